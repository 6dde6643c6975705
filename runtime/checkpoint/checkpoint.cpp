#include "runtime/checkpoint/checkpoint.hpp"

#include "runtime/agreed.hpp"
#include "runtime/agreement.hpp"
#include "runtime/checkpoint/checkpoint_writer.hpp"
#include "runtime/checkpoint/model_writer.hpp"
#include "runtime/file_io.hpp"
#include "runtime/text/tokenizer_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <string_view>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "kernels/cpu/kernels.hpp"
#include "models/init.hpp"
#include "files/json_text.hpp"
#include "models/registry.hpp"
#include "offload/checksum.hpp"

namespace zt {

namespace fs = std::filesystem;

using Fd = CheckpointFile;

namespace {

using nlohmann::json;
using Region = ZeroEngine::StateRegion;

constexpr const char* kFormat = "ztrain-checkpoint";
constexpr int kVersion = 1;
constexpr int kRegions = 4;
constexpr const char* kRegionNames[kRegions] = {"param", "master", "m", "v"};  // by Region
constexpr size_t at(Region r) { return static_cast<size_t>(r); }

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
    len[at(Region::param)] = M * wire;
    len[at(Region::master)] = wire == sizeof(float) ? 0 : M * sizeof(float);  // the params are the masters
    len[at(Region::m)] = len[at(Region::v)] = M * sizeof(float);
    for (int r = 0; r < kRegions; ++r) {  // [Note: direct checkpoint writes]: aligned regions
      constexpr uint64_t a = RankFileWriter::kAlignment;
      off[r] = l.total = (l.total + a - 1) / a * a;
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

// The fields the architecture has (GPT-2's own six: the rest derive from them, and its meta reads
// as it always did).
json dims_json(const ModelDims& d, const std::string& arch) {
  json j = json::object();
  const ModelSpec& spec = model_spec(arch);
  for_each_dim([&](const char* name, const auto& v) {
    if (spec.has_dim(name)) j[name] = v;
  }, d);
  return j;
}

std::string step_name(int step) { return "step_" + std::to_string(step); }

// [Note: frozen units' checksum] A checkpoint of adapters holds no frozen parameters: a resumed
// run re-reads them from model.init_from (or initialises them from train.seed), and its meta.json
// records a checksum of their values, which the resume compares. The checksum is a sum over
// every element of a hash of (unit, index, value as f32), each rank summing its shard's elements
// and the sums added across the shard group (its replicas hold the same shards): the same number
// for any world size, stage, groups, frozen_params policy and dtype the values were held in.
// Collective; "" without frozen units.
std::string frozen_checksum(const ZeroEngine& engine) {
  Communicator& comm = engine.groups().shard();
  uint64_t sum = 0;
  bool any = false;
  for (int u = 0; u < static_cast<int>(engine.units().size()); ++u) {
    const ShardedUnit& x = engine.units()[u];
    if (!x.frozen()) continue;
    any = true;
    const ShardGeometry& g = x.geometry();
    const int64_t n = std::clamp<int64_t>(g.numel - g.begin(), 0, g.shard);
    if (n == 0) continue;
    const Tensor mine = x.persistent() ? x.full_params().view(g.begin(), {n}) : x.param_shard().view(0, {n});
    sum += frozen_hash(u, g.begin(), host_f32(mine).data<float>(), n);
  }
  if (!any) return "";
  if (comm.size() > 1) {
    const std::vector<uint64_t> all = all_gather_words(comm, {sum});
    sum = std::accumulate(all.begin(), all.end(), uint64_t{0});
  }
  return hex(sum);
}

// The lora section a checkpoint records, with the targets resolved.
json lora_json(const Model& model) {
  const LoraConfig& l = model.lora();
  if (!l.enabled()) return nullptr;
  return {{"r", l.r},
          {"alpha", l.alpha},
          {"target_modules", l.targets(model.arch())},
          {"use_rslora", l.use_rslora}};
}

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

}  // namespace

uint64_t frozen_hash(int u, int64_t first, const float* v, int64_t n) {
  const uint64_t unit = static_cast<uint64_t>(u) << 40;
  uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    sum += mix_seed(mix_seed(unit | static_cast<uint64_t>(first + i)) ^ bits);
  }
  return sum;
}

namespace {

// save_checkpoint's work once step_<k>.tmp exists: every rank's file, the metadata, the renames.
namespace {
// The tokenizer the model's text goes through, for `ztrain sample` to find: the chat data's, or the
// one the starting model's file carries; absolute, as the run saw it; "" for none.
std::string absolute_path(const std::string& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return ec ? p : a.string();
}
std::string tokenizer_of(const Config& cfg) {
  std::string t = cfg.data.tokenizer;
  if (t.empty() && cfg.model.init_from && holds_tokenizer(*cfg.model.init_from)) t = *cfg.model.init_from;
  return t.empty() ? t : absolute_path(t);
}
}  // namespace

void write_checkpoint(const Config& cfg, Communicator& comm, const Model& model, ZeroEngine& engine,
                      const TrainPosition& pos, const std::string& tmp) {
  const std::string root = cfg.checkpoint.dir;
  const std::string name = step_name(pos.steps_done);
  const int rank = comm.rank(), world = comm.size();
  const int U = static_cast<int>(engine.units().size());
  // [Note: shard groups]: one replica of each shard writes it, named by its place in the shard
  // group: the first group, ranks 0 to files - 1.
  const ShardGroups& groups = engine.groups();
  const int files_count = groups.shard().size();

  // Every rank its file, region by region; a checksum per region.
  const Layout lay = layout_of(engine);
  std::vector<Checksum> sums(static_cast<size_t>(U) * kRegions);
  const std::string file = (fs::path(tmp) / ("rank" + std::to_string(groups.shard().rank()) + ".bin")).string();
  agreed<CheckpointError>(comm, "checkpoint: writing " + tmp, [&] {
    if (!groups.writes_shard()) return;
    std::vector<std::pair<uint64_t, uint64_t>> regions;
    for (int u = 0; u < U; ++u)
      for (int ri = 0; ri < kRegions; ++ri) regions.emplace_back(lay.offset[u][ri], lay.bytes[u][ri]);
    RankFileWriter f(file, std::move(regions), cfg.aio);
    engine.visit_state([&](int u, Region r, int64_t, int64_t n, void* data) {
      const size_t id = static_cast<size_t>(u * kRegions + static_cast<int>(r));
      // A state that went inf or NaN is never saved (and never pushes a finite checkpoint out
      // under keep_last). The 16-bit shard is the master rounded, so the f32 regions tell.
      if (element_size(engine, u, r) == sizeof(float) && cpu::any_nonfinite(static_cast<const float*>(data), static_cast<size_t>(n)))
        throw CheckpointError("checkpoint: " + name + " is not saved: on rank " + std::to_string(rank) + ", unit " +
                              engine.units()[u].name() + "'s " + kRegionNames[static_cast<int>(r)] +
                              " holds inf or NaN (an update overflowed); the checkpoints saved before are left as "
                              "they were");
      f.append(id, data, static_cast<size_t>(n) * element_size(engine, u, r), sums[id]);
    }, false);
    f.finish();
  });

  const std::string frozen = frozen_checksum(engine);
  // Rank 0 gathers every rank's checksums (as pairs of i32) for the metadata.
  Tensor mine = Tensor::empty({2 * U * kRegions}, DType::i32, MemCategory::other);
  Tensor all = Tensor::empty({2 * U * kRegions * world}, DType::i32, MemCategory::other);
  for (size_t i = 0; i < sums.size(); ++i) {
    const uint64_t v = sums[i].value();
    std::memcpy(mine.data<int32_t>() + 2 * i, &v, sizeof v);
  }
  if (world > 1) comm.all_gather(mine, all);
  else std::memcpy(all.raw(), mine.raw(), mine.nbytes());

  // stage3_gather_16bit_weights_on_model_save: the whole model in the wire dtype, a unit at a
  // time, written by rank 0 ([Note: export formats]).
  if (cfg.zero.gather_16bit_on_save) {
    agreed<CheckpointError>(comm, "checkpoint: writing the 16-bit model in " + tmp, [&] {
      write_gathered_model(engine, model, rank, "safetensors", (fs::path(tmp) / "model.safetensors").string(),
                           "checkpoint", dtype_from_name(cfg.precision.dtype));
    });
  }

  agreed<CheckpointError>(comm, "checkpoint: publishing " + tmp, [&] {
    if (rank != 0) return;
    json files = json::array();
    for (int r = 0; r < files_count; ++r) {
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
    for (const ShardedUnit& x : engine.units()) {
      units.push_back({{"name", x.name()}, {"numel", x.numel()}, {"shard", x.master_numel()}});
      if (x.frozen()) units.back()["frozen"] = true;
    }
    const json meta = {{"format", kFormat},
                       {"version", kVersion},
                       {"arch", model.arch()},
                       {"model", dims_json(model.dims(), model.arch())},
                       {"wte_units", model.embedding_units()},
                       {"world_size", world},
                       {"shard_ranks", files_count},
                       {"stage", cfg.zero.stage},
                       {"precision", cfg.precision.dtype},
                       {"units", units},
                       {"position",
                        {{"steps_done", pos.steps_done},
                         {"updates_done", pos.updates_done},
                         {"data_batches", static_cast<int64_t>(pos.steps_done) * cfg.grad_accum},  // for readers
                         {"loss_scale", pos.scaler.scale},
                         {"hysteresis_left", pos.scaler.hysteresis_left},
                         {"scaler_iter", pos.scaler.iter},
                         {"last_overflow", pos.scaler.last_overflow}}},
                       {"tokenizer", tokenizer_of(cfg)},
                       {"lora", lora_json(model)},
                       // Absolute, as the run saw it: an export or a sample elsewhere reads it again.
                       {"frozen", {{"checksum", frozen},
                                   {"init_from", cfg.model.init_from ? json(absolute_path(*cfg.model.init_from)) : json()},
                                   {"seed", cfg.train.seed}}},
                       // What the data position and the schedule depend on besides the steps.
                       {"batch", {{"micro", cfg.micro_batch}, {"accumulation", cfg.grad_accum}, {"seq_len", cfg.data.seq_len}}},
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
  });
}

}  // namespace

void save_checkpoint(const Config& cfg, Communicator& comm, const Model& model, ZeroEngine& engine,
                     const TrainPosition& pos) {
  const std::string root = cfg.checkpoint.dir;
  const std::string name = step_name(pos.steps_done);
  const std::string tmp = (fs::path(root) / (name + ".tmp")).string();
  const int rank = comm.rank();

  agreed<CheckpointError>(comm, "checkpoint: preparing " + tmp, [&] {
    if (rank != 0) return;
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw CheckpointError("checkpoint: cannot create '" + root + "': " + ec.message());
    fs::remove_all(tmp, ec);  // what a killed save left
    if (::mkdir(tmp.c_str(), 0755) != 0) fail_errno("cannot create", tmp);
  });
  // A save that fails (a full disk, a non-finite state) leaves nothing behind: the partial folder
  // would hold the space the next save needs. Every rank has stopped writing into it by then
  // (each failure is agreed).
  try {
    write_checkpoint(cfg, comm, model, engine, pos, tmp);
  } catch (...) {
    std::error_code ec;
    if (rank == 0) fs::remove_all(tmp, ec);
    throw;
  }
}

// ---- Reading ------------------------------------------------------------------------------------

using nlohmann::json;

struct SavedCheckpoint::Place {
  uint64_t offset = 0, bytes = 0, checksum = 0;
};

SavedCheckpoint::SavedCheckpoint(const std::string& dir) : folder_(dir) {
  if (!fs::exists(fs::path(dir) / "meta.json")) {
    const std::string latest = (fs::path(dir) / "latest").string();
    std::ifstream in(latest);
    std::string name;
    if (!in || !std::getline(in, name) || name.empty())
      throw CheckpointError("checkpoint: no checkpoint in '" + dir + "' (neither meta.json nor a 'latest' file)");
    folder_ = (fs::path(dir) / name).string();
    // A save of a step saved before was killed between its two renames ([Note: checkpoint layout]).
    if (!fs::exists(folder_) && name.size() > 4 && name.ends_with(".new"))
      folder_ = (fs::path(dir) / name.substr(0, name.size() - 4)).string();
  }
  meta_path_ = (fs::path(folder_) / "meta.json").string();
  std::ifstream in(meta_path_);
  if (!in) throw CheckpointError("checkpoint: cannot read '" + meta_path_ + "': " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  JsonParsed<json> parsed = parse_json(text.str());  // [Note: JSON from files] in files/json_text.hpp
  if (!parsed.ok() || !parsed.value.is_object())
    throw CheckpointError("checkpoint: '" + meta_path_ + "' is not valid JSON" + (parsed.ok() ? " object" : ": " + parsed.error));
  meta_ = std::move(parsed.value);
  try {
    if (meta_.value("format", "") != kFormat) throw bad("not a ztrain checkpoint (format is not \"ztrain-checkpoint\")");
    if (meta_.at("version").get<int>() != kVersion)
      throw bad("format version " + show_json(meta_.at("version")) + ", this build reads version " + std::to_string(kVersion));
    // Every number is checked for its type and range: json's get<int> would wrap a huge one.
    auto integer = [&](const json& j, const char* key, int64_t lo, int64_t hi, const std::string& path) {
      const json& v = j.at(key);
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) ||
          v.get<int64_t>() < lo || v.get<int64_t>() > hi)
        throw bad(path + key + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                  show_json(v));
      return v.get<int64_t>();
    };
    constexpr int64_t kInt = INT32_MAX, kElements = int64_t{1} << 48;
    // Checkpoints from before other architectures existed hold GPT-2 and do not say so.
    arch_ = meta_.value("arch", std::string(kDefaultModelArch));
    if (!is_model_arch(arch_)) throw bad("model arch \"" + arch_ + "\" is not implemented");
    const json& m = meta_.at("model");
    // GPT-2's six are required; the Llama family's came later, and a checkpoint from before them
    // holds GPT-2, whose values they derive from.
    ModelDims d;
    int i = 0;
    for_each_dim(
        [&](const char* key, auto& v) {
          const bool required = i++ < kGpt2DimCount;
          using T = std::decay_t<decltype(v)>;
          if (!required && !m.contains(key)) {  // the default, or for the widths derived below
            if constexpr (std::is_same_v<T, int>)
              if (std::string_view(key) == "n_kv_head" || std::string_view(key) == "head_dim" ||
                  std::string_view(key) == "intermediate_size")
                v = 0;
            return;
          }
          if constexpr (std::is_same_v<T, int>) {
            v = static_cast<int>(integer(m, key, required ? 1 : std::string_view(key) == "pad_token_id" ? -1 : 0, kInt, "model."));
          } else {
            const json& j = m.at(key);
            const bool ok = std::is_same_v<T, bool> ? j.is_boolean() : std::is_same_v<T, double> ? j.is_number() : j.is_string();
            if (!ok) throw bad(std::string("model.") + key + " has the wrong type: " + show_json(j));
            v = j.get<T>();
          }
        },
        d);
    dims_ = derive_dims(d);
    wte_units_ = static_cast<int>(integer(meta_, "wte_units", 1, kInt, ""));
    world_ = static_cast<int>(integer(meta_, "world_size", 1, kInt, ""));
    // [Note: shard groups]: a hybrid run's files are one group's; absent before hybrid sharding.
    files_count_ = meta_.contains("shard_ranks") ? static_cast<int>(integer(meta_, "shard_ranks", 1, world_, "")) : world_;
    stage_ = static_cast<int>(integer(meta_, "stage", 0, 3, ""));
    const std::string precision = meta_.at("precision").get<std::string>();
    if (precision != "f32" && precision != "bf16" && precision != "f16") throw bad("unknown precision \"" + precision + "\"");
    wire_ = dtype_from_name(precision);
    for (const json& u : meta_.at("units")) {
      names_.push_back(u.at("name").get<std::string>());
      const std::string at = "unit " + names_.back() + "'s ";
      numel_.push_back(integer(u, "numel", 0, kElements, at));
      shard_.push_back(integer(u, "shard", 0, kElements, at));
      frozen_.push_back(u.value("frozen", false));
      if (frozen_.back()) {  // [Note: frozen units' checksum]: in no rank file
        if (shard_.back() != 0) throw bad("frozen unit " + names_.back() + " has a shard");
        continue;
      }
      if (shard_.back() < (stage_ == 0 ? numel_.back() : (numel_.back() + files_count_ - 1) / files_count_))
        throw bad("unit " + names_.back() + "'s shard does not cover it");
    }
    // The run's position: a resumed run starts from it, so a hand-edited or damaged one must not
    // pass (a negative step count trained steps -4 to 0 and then on NaN).
    const json& p = meta_.at("position");
    constexpr int64_t kLong = INT64_MAX / 2;
    position_.steps_done = static_cast<int>(integer(p, "steps_done", 0, kInt, "position."));
    position_.updates_done = static_cast<int>(integer(p, "updates_done", 0, position_.steps_done, "position."));
    position_.scaler.scale = p.at("loss_scale").get<double>();
    if (!(std::isfinite(position_.scaler.scale) && position_.scaler.scale > 0.0))
      throw bad("position.loss_scale must be a positive finite number, got " + show_json(p.at("loss_scale")));
    position_.scaler.hysteresis_left = static_cast<int>(integer(p, "hysteresis_left", 0, kInt, "position."));
    position_.scaler.iter = static_cast<long>(integer(p, "scaler_iter", 0, kLong, "position."));
    position_.scaler.last_overflow =
        static_cast<long>(integer(p, "last_overflow", -1, position_.scaler.iter - 1, "position."));
    const int64_t batches = integer(p, "data_batches", 0, kLong, "position.");
    if (const auto b = meta_.find("batch"); b != meta_.end()) {  // absent before this build recorded it
      batch_.micro = static_cast<int>(integer(*b, "micro", 1, kInt, "batch."));
      batch_.accumulation = static_cast<int>(integer(*b, "accumulation", 1, kInt, "batch."));
      batch_.seq_len = static_cast<int>(integer(*b, "seq_len", 1, kInt, "batch."));
      if (batches != int64_t{position_.steps_done} * batch_.accumulation)
        throw bad("position.data_batches " + std::to_string(batches) + " is not position.steps_done " +
                  std::to_string(position_.steps_done) + " x batch.accumulation " + std::to_string(batch_.accumulation));
    }
    const size_t U = numel_.size();
    const json& files = meta_.at("files");
    if (files.size() != static_cast<size_t>(files_count_))
      throw bad("lists " + std::to_string(files.size()) + " rank files for " + std::to_string(files_count_) + " shards");
    for (const json& f : files) {
      files_.push_back((fs::path(folder_) / f.at("name").get<std::string>()).string());
      regions_.emplace_back(U);
      for (const json& g : f.at("regions")) {
        const int u = g.at("unit").get<int>();
        const auto ri = static_cast<size_t>(std::find(kRegionNames, kRegionNames + kRegions, g.at("region").get<std::string>()) - kRegionNames);
        if (u < 0 || static_cast<size_t>(u) >= U || ri >= kRegions) throw bad("a region names no unit or region");
        const uint64_t esize = ri == at(Region::param) ? dtype_size(wire_) : sizeof(float);
        Place r{g.at("offset").get<uint64_t>(), g.at("bytes").get<uint64_t>(),
                 std::stoull(g.at("checksum").get<std::string>(), nullptr, 16)};
        if (r.bytes != static_cast<uint64_t>(shard_[size_t(u)]) * esize) throw bad("a region's length does not match its unit's shard");
        regions_.back()[size_t(u)][ri] = r;
      }
    }
  } catch (const json::exception& e) {
    throw bad(std::string("malformed metadata: ") + e.what());
  } catch (const std::invalid_argument&) {
    throw bad("malformed checksum");
  } catch (const std::out_of_range&) {
    throw bad("malformed checksum");
  }
}

SavedCheckpoint::~SavedCheckpoint() = default;

LoraConfig SavedCheckpoint::lora() const {
  LoraConfig l;
  const json j = meta_.value("lora", json());
  if (j.is_null()) return l;
  try {
    l.r = j.at("r").get<int>();
    l.alpha = j.at("alpha").get<double>();
    l.target_modules = j.at("target_modules").get<std::vector<std::string>>();
    l.use_rslora = j.value("use_rslora", false);
  } catch (const json::exception& e) {
    throw bad(std::string("malformed lora section: ") + e.what());
  }
  return l;
}

SavedCheckpoint::FrozenSource SavedCheckpoint::frozen_source() const {
  FrozenSource s;
  const json f = meta_.value("frozen", json::object());
  try {
    if (f.value("init_from", json()).is_string()) s.init_from = f.at("init_from").get<std::string>();
    s.seed = f.value("seed", uint64_t{0});
    s.checksum = f.value("checksum", std::string());
  } catch (const json::exception& e) {
    throw bad(std::string("malformed frozen section: ") + e.what());
  }
  return s;
}

std::string SavedCheckpoint::FrozenSource::text() const {
  return init_from.empty() ? "train.seed " + std::to_string(seed) : "model.init_from '" + init_from + "'";
}

CheckpointError SavedCheckpoint::bad(const std::string& what) const {
  return CheckpointError("checkpoint: '" + meta_path_ + "': " + what);
}

void SavedCheckpoint::check_layout(const Model& model) const {
  if (arch_ != model.arch()) throw bad("saved from a model of arch " + arch_ + ", this run's is " + model.arch());
  if (!(dims_ == model.dims()) || wte_units_ != model.embedding_units())
    throw bad("saved from another model shape (" + dims_str(dims_) + ", wte_units " + std::to_string(wte_units_) +
              ") than this run's (" + dims_str(model.dims()) + ", wte_units " + std::to_string(model.embedding_units()) + ")");
  const json saved_lora = meta_.value("lora", json()), lora = lora_json(model);
  auto lora_text = [](const json& l) {
    return l.is_null() ? std::string("without LoRA") : "with lora " + l.dump();
  };
  if (saved_lora != lora)
    throw bad("saved " + lora_text(saved_lora) + ", this run is " + lora_text(lora) +
              ": a checkpoint resumes or exports with the lora section it was trained with");
  const auto& layout = model.layout();
  if (numel_.size() != layout.size())
    throw bad("holds " + std::to_string(numel_.size()) + " units, the model of its dimensions has " +
              std::to_string(layout.size()));
  // The dimensions alone do not tell: a meta.json edited by hand can name other dimensions than
  // its rank files were written with.
  for (size_t u = 0; u < layout.size(); ++u)
    if (numel_[u] != layout[u].numel || names_[u] != layout[u].name)
      throw bad("unit " + std::to_string(u) + " is " + names_[u] + " of " + std::to_string(numel_[u]) +
                " elements, but the model of its dimensions (" + dims_str(dims_) + ") has " + layout[u].name + " of " +
                std::to_string(layout[u].numel) + ": its units do not match its model");
}

bool SavedCheckpoint::owns(const std::string& path) const {
  return lies_within(path, folder_) || lies_within(path, (fs::path(folder_).parent_path() / "latest").string());
}

void SavedCheckpoint::pieces(int u, int64_t b, int64_t e, const std::function<void(int, int64_t, int64_t)>& fn) const {
  const int64_t M = shard_.at(size_t(u));
  if (stage_ == 0) return fn(0, b, e);  // every rank holds the whole unit: rank 0's file
  for (int r = static_cast<int>(b / M); r < files_count_ && int64_t{r} * M < e; ++r)
    fn(r, std::max(b, int64_t{r} * M), std::min(e, int64_t{r + 1} * M));
}

void SavedCheckpoint::verify(int u, int64_t b, int64_t e) {
  if (b >= e) return;
  std::vector<char> buf(1 << 22);
  pieces(u, b, e, [&](int r, int64_t, int64_t) {
    Fd f(files_[size_t(r)], O_RDONLY);
    for (int ri = 0; ri < kRegions; ++ri) {
      const Place& g = regions_[size_t(r)][size_t(u)][size_t(ri)];
      verify_region(f, files_[size_t(r)], g.offset, g.bytes, g.checksum, names_[size_t(u)], kRegionNames[ri], buf);
    }
  });
}

void SavedCheckpoint::read(int u, Region region, int64_t b, int64_t e, void* dst, DType type) {
  const DType stored = region == Region::param ? wire_ : DType::f32;
  const size_t ss = dtype_size(stored), ds = dtype_size(type);
  if (fds_.empty()) fds_.resize(files_.size());
  pieces(u, b, e, [&](int r, int64_t pb, int64_t pe) {
    auto& fd = fds_[size_t(r)];
    if (!fd) fd = std::make_unique<Fd>(files_[size_t(r)], O_RDONLY);
    const int64_t first = stage_ == 0 ? 0 : int64_t{r} * shard_[size_t(u)];
    const Place& g = regions_[size_t(r)][size_t(u)][at(region)];
    const uint64_t offset = g.offset + static_cast<uint64_t>(pb - first) * ss;
    const size_t count = static_cast<size_t>(pe - pb);
    char* out = static_cast<char*>(dst) + static_cast<size_t>(pb - b) * ds;
    bool ok;
    if (stored == type) {
      ok = fd->read_at(out, count * ss, offset);
    } else {
      bounce_.resize(count * ss);
      ok = fd->read_at(bounce_.data(), count * ss, offset);
      if (ok) cpu::cast(out, type, bounce_.data(), stored, count);
    }
    if (!ok) throw CheckpointError("checkpoint: '" + files_[size_t(r)] + "' was truncated while it was read");
  });
}

void SavedCheckpoint::read_master(int u, int64_t b, int64_t e, float* dst) {
  read(u, wire_ == DType::f32 ? Region::param : Region::master, b, e, dst, DType::f32);
}

void SavedCheckpoint::read_unit(int u, std::vector<float>& out) {
  const int64_t n = numel(u);
  verify(u, 0, n);
  out.assign(static_cast<size_t>(n), 0.0f);
  read_master(u, 0, n, out.data());
}

void check_resume(const SavedCheckpoint& saved, const Config& cfg, int world_size) {
  const SavedCheckpoint::Batch& b = saved.batch();
  if (b.micro > 0) {  // recorded (checkpoints of earlier builds lack it)
    const int64_t then = int64_t{b.micro} * b.accumulation * saved.world_size(),
                  now = int64_t{cfg.micro_batch} * cfg.grad_accum * world_size;
    if (then != now)
      throw saved.bad("saved with a global batch of " + std::to_string(then) + " sequences (micro " +
                      std::to_string(b.micro) + " x accumulation " + std::to_string(b.accumulation) + " x " +
                      std::to_string(saved.world_size()) + " ranks), this run's is " + std::to_string(now) + " (micro " +
                      std::to_string(cfg.micro_batch) + " x accumulation " + std::to_string(cfg.grad_accum) + " x " +
                      std::to_string(world_size) + " ranks): the data position and the optimizer's steps follow "
                      "from it; resume with micro x accumulation x ranks = " + std::to_string(then));
    if (b.seq_len != cfg.data.seq_len)
      throw saved.bad("saved with data.seq_len " + std::to_string(b.seq_len) + ", this run's is " +
                      std::to_string(cfg.data.seq_len) + ": the data position follows from it");
  }
  const int done = saved.position().steps_done;
  if (cfg.train.steps < done)
    throw CheckpointError("train.steps: " + std::to_string(cfg.train.steps) + " is below the step of the checkpoint '" +
                          saved.folder() + "' (" + std::to_string(done) +
                          "): it has trained further than this run would; ask for more steps, or `ztrain export` it");
}

TrainPosition load_checkpoint(const std::string& dir, const Config& cfg, Communicator& comm, const Model& model,
                              ZeroEngine& engine) {
  const int U = static_cast<int>(engine.units().size());
  std::unique_ptr<SavedCheckpoint> saved;
  // This rank's first padded element of unit u in the new layout.
  auto first_element = [&](int u) { return cfg.zero.stage == 0 ? int64_t{0} : engine.units()[u].geometry().begin(); };
  // Everything checked on every rank before the load's collectives: the model, and every region
  // this rank will read against its checksum.
  agreed<CheckpointError>(comm, "checkpoint: reading checkpoint " + dir, [&] {
    saved = std::make_unique<SavedCheckpoint>(dir);
    saved->check_layout(model);
    check_resume(*saved, cfg, comm.size());
    for (int u = 0; u < U; ++u) {
      const int64_t b = first_element(u);
      saved->verify(u, b, std::min(engine.units()[u].numel(), b + engine.units()[u].master_numel()));
    }
  });
  // [Note: frozen units' checksum]: the frozen model this run read is the one the checkpoint's
  // adapters were trained on.
  const std::string have = frozen_checksum(engine);
  agreed<CheckpointError>(comm, "checkpoint: checking the frozen model", [&] {
    const SavedCheckpoint::FrozenSource was = saved->frozen_source();
    if (was.checksum == have) return;
    throw saved->bad("its adapters were trained on a frozen model (" + was.text() + ", checksum " + was.checksum +
                     ") other than the one this run starts from (checksum " + have + ", model.init_from " +
                     (cfg.model.init_from ? "'" + *cfg.model.init_from + "'" : "unset, train.seed " + std::to_string(cfg.train.seed)) +
                     "); resume with the model it was trained on");
  });

  // [Note: resharding]: each region of this rank's shard from the pieces of the saved rank files
  // that hold it, straight into place; padding beyond the unit's elements is zero. At the same
  // world size, stage and precision that is this rank's own file, region by region.
  const DType saved_wire = saved->wire();
  engine.visit_state([&](int u, Region r, int64_t begin, int64_t n, void* data) {
    const DType type = r == Region::param ? engine.units()[u].param_shard().dtype() : DType::f32;
    const size_t es = dtype_size(type);
    const int64_t numel = engine.units()[u].numel(), b = first_element(u) + begin, e = b + n;
    if (e > numel)
      std::memset(static_cast<char*>(data) + std::max<int64_t>(0, numel - b) * es, 0,
                  static_cast<size_t>(e - std::max(b, numel)) * es);
    if (b >= numel) return;
    const int64_t end = std::min(e, numel);
    switch (r) {
      case Region::param:  // the shard as saved, or the master rounded to this run's wire dtype
        if (type == saved_wire) saved->read(u, Region::param, b, end, data, type);
        else saved->read(u, saved_wire == DType::f32 ? Region::param : Region::master, b, end, data, type);
        break;
      case Region::master: saved->read_master(u, b, end, static_cast<float*>(data)); break;
      case Region::m:
      case Region::v: saved->read(u, r, b, end, data, DType::f32); break;
    }
  }, true);

  return saved->position();
}

}  // namespace zt
