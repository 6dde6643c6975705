#include "runtime/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "offload/checksum.hpp"

namespace zt {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Region = ZeroEngine::StateRegion;

constexpr const char* kFormat = "ztrain-checkpoint";
constexpr int kVersion = 1;
constexpr int kRegions = 4;
constexpr const char* kRegionNames[kRegions] = {"param", "master", "m", "v"};

[[noreturn]] void fail_errno(const std::string& what, const std::string& path) {
  throw CheckpointError("checkpoint: " + what + " '" + path + "': " + std::strerror(errno));
}

// A file descriptor that closes itself.
class Fd {
 public:
  Fd(const std::string& path, int flags) : path_(path), fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {
    if (fd_ < 0) fail_errno((flags & O_CREAT) ? "cannot create" : "cannot open", path);
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void write_at(const void* p, size_t n, uint64_t off) const {
    const auto* b = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::pwrite(fd_, b, n, static_cast<off_t>(off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) fail_errno("cannot write", path_);
      b += w, n -= static_cast<size_t>(w), off += static_cast<uint64_t>(w);
    }
  }
  // Reads n bytes at off; false at the end of the file before n bytes.
  bool read_at(void* p, size_t n, uint64_t off) const {
    auto* b = static_cast<char*>(p);
    while (n > 0) {
      const ssize_t r = ::pread(fd_, b, n, static_cast<off_t>(off));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail_errno("cannot read", path_);
      if (r == 0) return false;
      b += r, n -= static_cast<size_t>(r), off += static_cast<uint64_t>(r);
    }
    return true;
  }
  void sync() const {
    if (::fsync(fd_) != 0) fail_errno("cannot fsync", path_);
  }

 private:
  std::string path_;
  int fd_;
};

void sync_dir(const std::string& dir) { Fd(dir, O_RDONLY | O_DIRECTORY).sync(); }

// Writes `text` to `path` through path + ".tmp", fsynced, renamed over it.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    Fd f(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    f.write_at(text.data(), text.size(), 0);
    f.sync();
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail_errno("cannot rename into", path);
}

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// Where each region of this rank's file lies: [unit][region] -> (offset, bytes), bytes 0 where
// absent.
struct Layout {
  std::vector<std::array<uint64_t, kRegions>> offset, bytes;
  uint64_t total = 0;
};

Layout layout_of(const ZeroEngine& engine) {
  Layout l;
  for (const ShardedUnit& x : engine.units()) {
    std::array<uint64_t, kRegions> off{}, len{};
    const auto M = static_cast<uint64_t>(x.master_numel());
    const size_t wire = dtype_size(x.param_shard().dtype());
    len[0] = M * wire;
    len[1] = wire == sizeof(float) ? 0 : M * sizeof(float);
    len[2] = len[3] = M * sizeof(float);
    for (int r = 0; r < kRegions; ++r) {
      off[r] = l.total;
      l.total += len[r];
    }
    l.offset.push_back(off);
    l.bytes.push_back(len);
  }
  return l;
}

size_t element_size(const ZeroEngine& engine, int u, Region r) {
  return r == Region::param ? dtype_size(engine.units()[u].param_shard().dtype()) : sizeof(float);
}

// Runs `body` on every rank; if it threw on any, every rank throws (its own message, or which
// rank failed), so that no rank goes on into a collective the others left.
template <class F>
void agreed(Communicator& comm, const std::string& what, F&& body) {
  std::string error;
  try {
    body();
  } catch (const std::exception& e) {
    error = e.what();
  }
  Tensor flag = Tensor::empty({1}, DType::i32, MemCategory::other);
  flag.data<int32_t>()[0] = error.empty() ? -1 : comm.rank();
  if (comm.size() > 1) comm.all_reduce(flag, ReduceOp::max);
  const int failed = flag.data<int32_t>()[0];
  if (!error.empty()) throw CheckpointError(error);
  if (failed >= 0) throw CheckpointError("checkpoint: " + what + " failed on rank " + std::to_string(failed));
}

json dims_json(const GPT2Dims& d) {
  return {{"n_layer", d.n_layer}, {"n_head", d.n_head}, {"n_embd", d.n_embd}, {"vocab_size", d.vocab_size},
          {"padded_vocab_size", d.padded_vocab_size}, {"max_seq_len", d.max_seq_len}};
}

std::string step_name(int step) { return "step_" + std::to_string(step); }

}  // namespace

void save_checkpoint(const Config& cfg, Communicator& comm, const GPT2& model, ZeroEngine& engine,
                     const TrainPosition& pos) {
  const std::string root = cfg.checkpoint.dir;
  const std::string name = step_name(pos.steps_done);
  const std::string tmp = (fs::path(root) / (name + ".tmp")).string();
  const int rank = comm.rank(), world = comm.size();
  const int U = static_cast<int>(engine.units().size());

  agreed(comm, "preparing " + tmp, [&] {
    if (rank != 0) return;
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw CheckpointError("checkpoint: cannot create '" + root + "': " + ec.message());
    fs::remove_all(tmp, ec);  // what a killed save left
    if (::mkdir(tmp.c_str(), 0755) != 0) fail_errno("cannot create", tmp);
  });

  // Every rank its file, region by region; a checksum per region.
  const Layout lay = layout_of(engine);
  std::vector<Checksum> sums(static_cast<size_t>(U) * kRegions);
  const std::string file = (fs::path(tmp) / ("rank" + std::to_string(rank) + ".bin")).string();
  agreed(comm, "writing " + tmp, [&] {
    Fd f(file, O_WRONLY | O_CREAT | O_TRUNC);
    engine.visit_state([&](int u, Region r, int64_t begin, int64_t n, void* data) {
      const size_t es = element_size(engine, u, r);
      const int ri = static_cast<int>(r);
      f.write_at(data, static_cast<size_t>(n) * es, lay.offset[u][ri] + static_cast<uint64_t>(begin) * es);
      sums[static_cast<size_t>(u * kRegions + ri)].update(data, static_cast<size_t>(n) * es);
    }, false);
    f.sync();
  });

  // Rank 0 gathers every rank's checksums (as pairs of i32) for the metadata.
  Tensor mine = Tensor::empty({2 * U * kRegions}, DType::i32, MemCategory::other);
  Tensor all = Tensor::empty({2 * U * kRegions * world}, DType::i32, MemCategory::other);
  for (size_t i = 0; i < sums.size(); ++i) {
    const uint64_t v = sums[i].value();
    std::memcpy(mine.data<int32_t>() + 2 * i, &v, sizeof v);
  }
  if (world > 1) comm.all_gather(mine, all);
  else std::memcpy(all.raw(), mine.raw(), mine.nbytes());

  agreed(comm, "publishing " + tmp, [&] {
    if (rank != 0) return;
    json files = json::array();
    for (int r = 0; r < world; ++r) {
      json regions = json::array();
      for (int u = 0; u < U; ++u)
        for (int ri = 0; ri < kRegions; ++ri) {
          if (lay.bytes[u][ri] == 0) continue;
          uint64_t v;
          std::memcpy(&v, all.data<int32_t>() + 2 * (r * U * kRegions + u * kRegions + ri), sizeof v);
          regions.push_back({{"unit", u}, {"region", kRegionNames[ri]}, {"offset", lay.offset[u][ri]},
                             {"bytes", lay.bytes[u][ri]}, {"checksum", hex(v)}});
        }
      files.push_back({{"name", "rank" + std::to_string(r) + ".bin"}, {"bytes", lay.total}, {"regions", regions}});
    }
    json units = json::array();
    for (const ShardedUnit& x : engine.units())
      units.push_back({{"name", x.name()}, {"numel", x.numel()}, {"shard", x.master_numel()}});
    const json meta = {{"format", kFormat},
                       {"version", kVersion},
                       {"model", dims_json(model.dims())},
                       {"wte_units", model.wte_units()},
                       {"world_size", world},
                       {"stage", cfg.zero.stage},
                       {"precision", cfg.precision.dtype},
                       {"units", units},
                       {"position",
                        {{"steps_done", pos.steps_done},
                         {"updates_done", pos.updates_done},
                         {"data_batches", pos.data_batches},
                         {"loss_scale", pos.scaler.scale},
                         {"hysteresis_left", pos.scaler.hysteresis_left},
                         {"scaler_iter", pos.scaler.iter},
                         {"last_overflow", pos.scaler.last_overflow}}},
                       {"files", files}};
    write_atomically((fs::path(tmp) / "meta.json").string(), meta.dump(1) + "\n");
    sync_dir(tmp);
    const std::string final_dir = (fs::path(root) / name).string(), latest = (fs::path(root) / "latest").string();
    std::error_code ec;
    if (fs::exists(final_dir)) {
      // The same step saved again (a new run in an old run's folder), and `latest` may name the
      // old one: the new one is published as <name>.new first, the old one goes, the new one takes
      // its name. A reader finding `latest` name a missing <name>.new takes <name>.
      const std::string fresh = final_dir + ".new";
      fs::remove_all(fresh, ec);
      if (::rename(tmp.c_str(), fresh.c_str()) != 0) fail_errno("cannot rename into", fresh);
      sync_dir(root);
      write_atomically(latest, name + ".new\n");
      sync_dir(root);
      fs::remove_all(final_dir, ec);
      if (::rename(fresh.c_str(), final_dir.c_str()) != 0) fail_errno("cannot rename into", final_dir);
    } else if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
      fail_errno("cannot rename into", final_dir);
    }
    sync_dir(root);
    write_atomically(latest, name + "\n");
    sync_dir(root);
    // keep_last: the oldest complete checkpoints beyond that many go, now that latest moved on.
    if (cfg.checkpoint.keep_last > 0) {
      std::vector<std::pair<int, fs::path>> steps;
      for (const auto& e : fs::directory_iterator(root, ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("step_", 0) != 0 || n.find('.') != std::string::npos) continue;
        try {
          steps.emplace_back(std::stoi(n.substr(5)), e.path());
        } catch (const std::exception&) {
        }
      }
      // Never the one `latest` names (a new run's first save into an old run's folder has the
      // lowest number); of the others the lowest numbers go.
      std::sort(steps.begin(), steps.end());
      steps.erase(std::remove_if(steps.begin(), steps.end(), [&](const auto& e) { return e.first == pos.steps_done; }),
                  steps.end());
      for (size_t i = 0; i + static_cast<size_t>(cfg.checkpoint.keep_last) < steps.size() + 1; ++i)
        fs::remove_all(steps[i].second, ec);
    }
  });
}

TrainPosition load_checkpoint(const std::string& dir, const Config& cfg, Communicator& comm, const GPT2& model,
                              ZeroEngine& engine) {
  const int rank = comm.rank(), world = comm.size();
  std::string step_dir = dir;
  json meta;
  Layout lay;
  std::vector<uint64_t> want;  // this rank's region checksums, [u * kRegions + r]
  std::string file;
  const int U = static_cast<int>(engine.units().size());
  agreed(comm, "reading checkpoint " + dir, [&] {
    if (!fs::exists(fs::path(dir) / "meta.json")) {
      const std::string latest = (fs::path(dir) / "latest").string();
      std::ifstream in(latest);
      std::string name;
      if (!in || !std::getline(in, name) || name.empty())
        throw CheckpointError("checkpoint: no checkpoint in '" + dir + "' (neither meta.json nor a 'latest' file)");
      step_dir = (fs::path(dir) / name).string();
      // A save of a step saved before was killed between its two renames ([Note: checkpoint layout]).
      if (!fs::exists(step_dir) && name.size() > 4 && name.ends_with(".new"))
        step_dir = (fs::path(dir) / name.substr(0, name.size() - 4)).string();
    }
    const std::string meta_path = (fs::path(step_dir) / "meta.json").string();
    std::ifstream in(meta_path);
    if (!in) throw CheckpointError("checkpoint: cannot read '" + meta_path + "': " + std::strerror(errno));
    std::stringstream text;
    text << in.rdbuf();
    meta = json::parse(text.str(), nullptr, false);
    if (meta.is_discarded() || !meta.is_object()) throw CheckpointError("checkpoint: '" + meta_path + "' is not valid JSON");
    auto bad = [&](const std::string& what) { return CheckpointError("checkpoint: '" + meta_path + "': " + what); };
    try {
      if (meta.value("format", "") != kFormat) throw bad("not a ztrain checkpoint (format is not \"ztrain-checkpoint\")");
      if (meta.at("version").get<int>() != kVersion)
        throw bad("format version " + meta.at("version").dump() + ", this build reads version " + std::to_string(kVersion));
      if (meta.at("model") != dims_json(model.dims()) || meta.at("wte_units").get<int>() != model.wte_units())
        throw bad("saved from another model shape (" + meta.at("model").dump() + ", wte_units " +
                  meta.at("wte_units").dump() + ") than this run's (" + dims_json(model.dims()).dump() + ", wte_units " +
                  std::to_string(model.wte_units()) + ")");
      const int saved_world = meta.at("world_size").get<int>(), saved_stage = meta.at("stage").get<int>();
      const std::string saved_precision = meta.at("precision").get<std::string>();
      if (saved_world != world || saved_stage != cfg.zero.stage || saved_precision != cfg.precision.dtype)
        throw bad("saved at world size " + std::to_string(saved_world) + ", stage " + std::to_string(saved_stage) +
                  ", " + saved_precision + "; this run has world size " + std::to_string(world) + ", stage " +
                  std::to_string(cfg.zero.stage) + ", " + cfg.precision.dtype +
                  ": resuming at another world size, stage or precision is not implemented yet");
      lay = layout_of(engine);
      const json& f = meta.at("files").at(static_cast<size_t>(rank));
      file = (fs::path(step_dir) / f.at("name").get<std::string>()).string();
      if (f.at("bytes").get<uint64_t>() != lay.total) throw bad("rank " + std::to_string(rank) + "'s file layout differs");
      want.assign(static_cast<size_t>(U) * kRegions, 0);
      for (const json& r : f.at("regions")) {
        const int u = r.at("unit").get<int>();
        const std::string rn = r.at("region").get<std::string>();
        const int ri = static_cast<int>(std::find(kRegionNames, kRegionNames + kRegions, rn) - kRegionNames);
        if (u < 0 || u >= U || ri >= kRegions || r.at("offset").get<uint64_t>() != lay.offset[u][ri] ||
            r.at("bytes").get<uint64_t>() != lay.bytes[u][ri])
          throw bad("rank " + std::to_string(rank) + "'s region list does not match this model's units");
        want[static_cast<size_t>(u * kRegions + ri)] = std::stoull(r.at("checksum").get<std::string>(), nullptr, 16);
      }
    } catch (const json::exception& e) {
      throw bad(std::string("malformed metadata: ") + e.what());
    }
    // Every region's checksum before anything is loaded, so a bad file fails the same on every rank
    // and before the load's collectives.
    Fd f(file, O_RDONLY);
    std::vector<char> buf(1 << 22);
    for (int u = 0; u < U; ++u)
      for (int ri = 0; ri < kRegions; ++ri) {
        Checksum c;
        for (uint64_t at = 0; at < lay.bytes[u][ri]; at += buf.size()) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), lay.bytes[u][ri] - at));
          if (!f.read_at(buf.data(), n, lay.offset[u][ri] + at))
            throw CheckpointError("checkpoint: '" + file + "' is truncated (it ends inside unit " +
                                  engine.units()[u].name() + "'s " + kRegionNames[ri] + ")");
          c.update(buf.data(), n);
        }
        if (lay.bytes[u][ri] && c.value() != want[static_cast<size_t>(u * kRegions + ri)])
          throw CheckpointError("checkpoint: '" + file + "': unit " + engine.units()[u].name() + "'s " +
                                kRegionNames[ri] + " does not match its checksum " +
                                hex(want[static_cast<size_t>(u * kRegions + ri)]) + " (the file is corrupt)");
      }
  });

  Fd f(file, O_RDONLY);
  engine.visit_state([&](int u, Region r, int64_t begin, int64_t n, void* data) {
    const size_t es = element_size(engine, u, r);
    if (!f.read_at(data, static_cast<size_t>(n) * es, lay.offset[u][static_cast<int>(r)] + static_cast<uint64_t>(begin) * es))
      throw CheckpointError("checkpoint: '" + file + "' was truncated while it was loaded");
  }, true);

  const json& p = meta.at("position");
  TrainPosition pos;
  pos.steps_done = p.at("steps_done").get<int>();
  pos.updates_done = p.at("updates_done").get<int>();
  pos.data_batches = p.at("data_batches").get<int64_t>();
  pos.scaler.scale = p.at("loss_scale").get<double>();
  pos.scaler.hysteresis_left = p.at("hysteresis_left").get<int>();
  pos.scaler.iter = p.at("scaler_iter").get<long>();
  pos.scaler.last_overflow = p.at("last_overflow").get<long>();
  return pos;
}

}  // namespace zt
