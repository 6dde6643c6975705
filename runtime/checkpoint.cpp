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
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "kernels/cpu/kernels.hpp"
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

// Reads a region whole and checks it against its checksum; CheckpointError naming the file, the
// unit and the region if the file ends inside it or the bytes differ.
void verify_region(const Fd& f, const std::string& path, uint64_t offset, uint64_t bytes, uint64_t want,
                   const std::string& unit, const char* region, std::vector<char>& buf) {
  Checksum c;
  for (uint64_t at = 0; at < bytes; at += buf.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), bytes - at));
    if (!f.read_at(buf.data(), n, offset + at))
      throw CheckpointError("checkpoint: '" + path + "' is truncated (it ends inside unit " + unit + "'s " + region + ")");
    c.update(buf.data(), n);
  }
  if (bytes && c.value() != want)
    throw CheckpointError("checkpoint: '" + path + "': unit " + unit + "'s " + region + " does not match its checksum " +
                          hex(want) + " (the file is corrupt)");
}

// [Note: resharding] A checkpoint saved at another world size, stage or precision loads by
// element: a unit's logical elements [0, numel) are the same whatever the padding, and old rank
// r's regions hold padded elements [r*M, (r+1)*M) (all of [0, M) at stage 0). Each new rank reads,
// for every region of its own shard, the overlapping pieces of the old rank files straight into
// place (padding beyond numel is zero), so no rank holds more than its shard. Each old region it
// reads from is checked against its checksum first, on every rank before the load's collectives.
// Across precisions the fp32 master is the source: a 16-bit shard is the master rounded, an fp32
// run's parameters are the master.
void load_resharded(const std::string& step_dir, const json& meta, const Config& cfg, Communicator& comm,
                    ZeroEngine& engine) {
  const int U = static_cast<int>(engine.units().size());
  const int old_world = meta.at("world_size").get<int>(), old_stage = meta.at("stage").get<int>();
  const DType old_wire = dtype_from_name(meta.at("precision").get<std::string>());
  const bool old_mixed = old_wire != DType::f32;
  const int rank = comm.rank(), new_stage = cfg.zero.stage;
  struct OldRegion {
    uint64_t offset = 0, bytes = 0, checksum = 0;
  };
  // old[r][u][region]
  std::vector<std::vector<std::array<OldRegion, kRegions>>> old(static_cast<size_t>(old_world),
                                                                  std::vector<std::array<OldRegion, kRegions>>(U));
  std::vector<std::string> files;
  for (int r = 0; r < old_world; ++r) {
    const json& f = meta.at("files").at(static_cast<size_t>(r));
    files.push_back((fs::path(step_dir) / f.at("name").get<std::string>()).string());
    for (const json& g : f.at("regions")) {
      const int u = g.at("unit").get<int>();
      const auto ri = static_cast<size_t>(std::find(kRegionNames, kRegionNames + kRegions, g.at("region").get<std::string>()) - kRegionNames);
      if (u < 0 || u >= U || ri >= kRegions) throw CheckpointError("checkpoint: '" + step_dir + "/meta.json': a region names no unit of this model");
      old[size_t(r)][size_t(u)][ri] = {g.at("offset").get<uint64_t>(), g.at("bytes").get<uint64_t>(),
                                       std::stoull(g.at("checksum").get<std::string>(), nullptr, 16)};
    }
  }
  auto old_M = [&](int u) { return meta.at("units").at(static_cast<size_t>(u)).at("shard").get<int64_t>(); };
  // Old ranks whose elements overlap [b, e) of unit u, each with its overlap.
  auto sources = [&](int u, int64_t b, int64_t e, const std::function<void(int, int64_t, int64_t)>& fn) {
    const int64_t M = old_M(u);
    if (old_stage == 0) return fn(0, b, e);  // every old rank holds the whole unit; rank 0's file
    for (int r = static_cast<int>(b / M); r < old_world && int64_t{r} * M < e; ++r)
      fn(r, std::max(b, int64_t{r} * M), std::min(e, int64_t{r + 1} * M));
  };
  // The saved region a new region comes from, and its element type.
  auto source_region = [&](Region r, DType new_wire) -> std::pair<int, DType> {
    switch (r) {
      case Region::param:
        if (new_wire == old_wire) return {0, old_wire};
        return {old_mixed ? 1 : 0, DType::f32};  // the master, rounded to new_wire
      case Region::master: return {old_mixed ? 1 : 0, DType::f32};
      case Region::m: return {2, DType::f32};
      default: return {3, DType::f32};
    }
  };
  auto first_element = [&](int u) {  // this rank's first padded element of unit u
    return new_stage == 0 ? int64_t{0} : int64_t{rank} * engine.units()[u].master_numel();
  };

  // The old regions this rank reads, checked whole first.
  agreed(comm, "checking checkpoint " + step_dir, [&] {
    std::vector<char> buf(1 << 22);
    for (int u = 0; u < U; ++u) {
      const int64_t numel = engine.units()[u].numel(), b = first_element(u);
      const int64_t e = std::min(numel, b + engine.units()[u].master_numel());
      if (b >= e) continue;
      sources(u, b, e, [&](int r, int64_t, int64_t) {
        Fd f(files[size_t(r)], O_RDONLY);
        for (int ri = 0; ri < kRegions; ++ri) {
          const OldRegion& g = old[size_t(r)][size_t(u)][size_t(ri)];
          verify_region(f, files[size_t(r)], g.offset, g.bytes, g.checksum, engine.units()[u].name(), kRegionNames[ri], buf);
        }
      });
    }
  });

  std::vector<std::unique_ptr<Fd>> fds(static_cast<size_t>(old_world));
  std::vector<char> bounce;
  engine.visit_state([&](int u, Region r, int64_t begin, int64_t n, void* data) {
    const DType new_wire = r == Region::param ? engine.units()[u].param_shard().dtype() : DType::f32;
    const size_t es = dtype_size(new_wire);
    const auto [ri, src_type] = source_region(r, new_wire);
    const size_t ss = dtype_size(src_type);
    const int64_t numel = engine.units()[u].numel(), b = first_element(u) + begin, e = b + n;
    // Padding beyond the unit's elements is zero.
    if (e > numel) std::memset(static_cast<char*>(data) + std::max<int64_t>(0, numel - b) * es, 0,
                               static_cast<size_t>(e - std::max(b, numel)) * es);
    if (b >= numel) return;
    sources(u, b, std::min(e, numel), [&](int sr, int64_t pb, int64_t pe) {
      auto& fd = fds[size_t(sr)];
      if (!fd) fd = std::make_unique<Fd>(files[size_t(sr)], O_RDONLY);
      const int64_t old_first = old_stage == 0 ? 0 : int64_t{sr} * old_M(u);
      const OldRegion& g = old[size_t(sr)][size_t(u)][size_t(ri)];
      const uint64_t at = g.offset + static_cast<uint64_t>(pb - old_first) * ss;
      const size_t count = static_cast<size_t>(pe - pb);
      char* dst = static_cast<char*>(data) + static_cast<size_t>(pb - b) * es;
      bool ok;
      if (src_type == new_wire) {
        ok = fd->read_at(dst, count * ss, at);
      } else {
        bounce.resize(count * ss);
        ok = fd->read_at(bounce.data(), count * ss, at);
        if (ok) cpu::cast(dst, new_wire, bounce.data(), src_type, count);
      }
      if (!ok) throw CheckpointError("checkpoint: '" + files[size_t(sr)] + "' was truncated while it was loaded");
    });
  }, true);
}

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
  bool reshard = false;  // saved at another world size, stage or precision
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
      const json& units = meta.at("units");
      if (units.size() != static_cast<size_t>(U)) throw bad("saved with " + std::to_string(units.size()) + " units, this run has " + std::to_string(U));
      for (int u = 0; u < U; ++u)
        if (units[static_cast<size_t>(u)].at("numel").get<int64_t>() != engine.units()[u].numel())
          throw bad("unit " + engine.units()[u].name() + " holds " + units[static_cast<size_t>(u)].at("numel").dump() +
                    " parameters in the checkpoint, " + std::to_string(engine.units()[u].numel()) + " in this run");
      const std::string saved_precision = meta.at("precision").get<std::string>();
      if (saved_precision != "f32" && saved_precision != "bf16" && saved_precision != "f16")
        throw bad("unknown precision " + meta.at("precision").dump());
      if (meta.at("world_size").get<int>() != world || meta.at("stage").get<int>() != cfg.zero.stage ||
          saved_precision != cfg.precision.dtype) {
        reshard = true;
        return;
      }
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
      for (int ri = 0; ri < kRegions; ++ri)
        verify_region(f, file, lay.offset[u][ri], lay.bytes[u][ri], want[static_cast<size_t>(u * kRegions + ri)],
                      engine.units()[u].name(), kRegionNames[ri], buf);
  });

  if (reshard) {
    load_resharded(step_dir, meta, cfg, comm, engine);
  } else {
    Fd f(file, O_RDONLY);
    engine.visit_state([&](int u, Region r, int64_t begin, int64_t n, void* data) {
      const size_t es = element_size(engine, u, r);
      if (!f.read_at(data, static_cast<size_t>(n) * es, lay.offset[u][static_cast<int>(r)] + static_cast<uint64_t>(begin) * es))
        throw CheckpointError("checkpoint: '" + file + "' was truncated while it was loaded");
    }, true);
  }

  const json& p = meta.at("position");
  TrainPosition pos;
  pos.steps_done = p.at("steps_done").get<int>();
  pos.updates_done = p.at("updates_done").get<int>();
  // At another world size a rank's micro-batches are counted anew: the global batch is the same,
  // so every step took grad_accum of them.
  pos.data_batches = reshard ? static_cast<int64_t>(pos.steps_done) * cfg.grad_accum : p.at("data_batches").get<int64_t>();
  pos.scaler.scale = p.at("loss_scale").get<double>();
  pos.scaler.hysteresis_left = p.at("hysteresis_left").get<int>();
  pos.scaler.iter = p.at("scaler_iter").get<long>();
  pos.scaler.last_overflow = p.at("last_overflow").get<long>();
  return pos;
}

}  // namespace zt
