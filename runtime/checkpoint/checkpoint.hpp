// Checkpoints: every rank's shard of the model states and the run's position, saved so that a
// killed save never costs the previous checkpoint, and loaded to continue bitwise identically.
// [Note: checkpoint layout]
//
// [Note: checkpoint layout] <dir>/step_<k>/ holds rank<r>.bin per rank of the shard group (every
// rank, or with hybrid sharding one group's: [Note: shard groups]) and meta.json. A rank file
// is the regions of [Note: unit state] (runtime/zero/engine.hpp) unit by unit (param, master where
// there is one, m, v), raw little-endian, each starting at a multiple of 4096 bytes ([Note: direct
// checkpoint writes] in runtime/checkpoint/checkpoint_writer.hpp). meta.json names the format and
// version, the model's dimensions, the world size, the rank files' count (shard_ranks), stage and precision, every unit's layout, the
// training position (steps, updates, data batches, fp16's loss scaler), the batch (micro,
// accumulation, seq_len) and, for every region of every rank file, its offset, length and
// checksum. A save writes into step_<k>.tmp/ (each rank its file, fsynced), rank 0 then writes
// meta.json (through a temporary name, fsynced), renames the folder to step_<k> and fsyncs the
// parent, and only then replaces `latest` (a one-line file naming the folder) by rename. A process
// killed at any moment leaves `latest` naming a complete checkpoint; a save that fails removes its
// .tmp folder, and a run removes those a killed one left before its first step. A state holding
// inf or NaN is never saved. (A step saved again, by a run that was let overwrite an old run's
// folder, is first published as step_<k>.new; see write_checkpoint.) What a run may do to the
// folder's other checkpoints, and keep_last: [Note: one history per folder] in
// runtime/checkpoint/checkpoint_root.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>
#include <stdexcept>
#include <string>

#include "comm/communicator.hpp"
#include "models/model.hpp"
#include "runtime/config.hpp"
#include "runtime/file_io.hpp"
#include "runtime/zero/loss_scaler.hpp"
#include "runtime/zero/engine.hpp"

namespace zt {


// The run's position a checkpoint carries besides the states. The data position follows from the
// steps: each took gradient_accumulation_steps micro-batches on every rank, at any world size
// (the global batch is the same).
struct TrainPosition {
  int steps_done = 0;
  int updates_done = 0;        // AdamW's t and the LR schedule's position
  LossScaler::State scaler;
};

// Collective: every rank calls it with the same arguments. Writes <cfg.checkpoint.dir>/step_<step>.
// CheckpointError naming the path on any failure (a read-only or full folder, a state holding inf
// or NaN, ...), with step_<step>.tmp removed; the previous checkpoint stays what `latest` names.
// Other checkpoints of the folder are CheckpointRoot's (runtime/checkpoint/checkpoint_root.hpp).
void save_checkpoint(const Config& cfg, Communicator& comm, const Model& model, ZeroEngine& engine,
                     const TrainPosition& pos);

// A checkpoint on disk, read unit by unit whatever world size, stage and precision it was saved
// at ([Note: resharding] in checkpoint.cpp). Regions: 0 param (stored in the saved wire dtype),
// 1 master (16-bit runs), 2 m, 3 v (f32).
class SavedCheckpoint {
 public:
  // `dir`: a checkpoint folder (holding meta.json) or root (its `latest`). Reads and checks
  // meta.json: format, version, dimensions, every rank file's regions. CheckpointError naming the
  // file otherwise.
  explicit SavedCheckpoint(const std::string& dir);
  ~SavedCheckpoint();

  // The batch it was saved with; zeros in checkpoints of builds that did not record it.
  struct Batch {
    int micro = 0, accumulation = 0, seq_len = 0;
  };

  const std::string& folder() const { return folder_; }
  const TrainPosition& position() const { return position_; }
  const Batch& batch() const { return batch_; }
  const nlohmann::json& meta() const { return meta_; }
  const std::string& arch() const { return arch_; }
  const ModelDims& dims() const { return dims_; }
  int wte_units() const { return wte_units_; }
  // The lora section it was trained with (r 0: none).
  LoraConfig lora() const;
  // Where its frozen model came from ([Note: frozen units' checksum] in checkpoint.cpp): the run's
  // model.init_from (absolute; "" for none, then train.seed's init) and the values' checksum (""
  // in a checkpoint without frozen units).
  struct FrozenSource {
    std::string init_from;
    uint64_t seed = 0;
    std::string checksum;
    // "model.init_from '<path>'" or "train.seed <n>", for messages.
    std::string text() const;
  };
  FrozenSource frozen_source() const;
  // The tokenizer the run trained through (an absolute path), "" where it recorded none.
  std::string tokenizer() const { return meta_.value("tokenizer", std::string()); }
  int world_size() const { return world_; }  // the ranks of the run (its batch)
  int stage() const { return stage_; }
  DType wire() const { return wire_; }
  int units() const { return static_cast<int>(numel_.size()); }
  int64_t numel(int u) const { return numel_.at(static_cast<size_t>(u)); }
  // A frozen unit ([Note: frozen units] in runtime/zero/sharded_unit.hpp) is in no rank file.
  bool frozen(int u) const { return frozen_.at(static_cast<size_t>(u)); }

  // CheckpointError unless `model` has its dimensions and every unit's name and size.
  void check_layout(const Model& model) const;
  // Whether writing `path` would replace a file of this checkpoint (or its root's `latest`).
  bool owns(const std::string& path) const;
  // Checks every region of unit u in the rank files holding its elements [b, e) against its
  // checksum (reading them whole).
  void verify(int u, int64_t b, int64_t e);
  // Elements [b, e) (within numel) of region `region` of unit u, converted to `type`, into dst.
  void read(int u, ZeroEngine::StateRegion region, int64_t b, int64_t e, void* dst, DType type);
  // The fp32 master of elements [b, e): the master region of 16-bit runs, the parameters of fp32 ones.
  void read_master(int u, int64_t b, int64_t e, float* dst);
  // Unit u's whole fp32 master into `out` (resized), its regions verified first.
  void read_unit(int u, std::vector<float>& out);
  // A CheckpointError about meta.json.
  CheckpointError bad(const std::string& what) const;

 private:
  struct Place;  // where a region of a unit lies in a rank file, and its checksum
  // Calls fn(rank, b', e') for each saved rank file holding part [b', e') of [b, e).
  void pieces(int u, int64_t b, int64_t e, const std::function<void(int, int64_t, int64_t)>& fn) const;

  std::string folder_, meta_path_;
  nlohmann::json meta_;
  std::string arch_;
  ModelDims dims_{};
  int wte_units_ = 0, world_ = 0, stage_ = 0;
  int files_count_ = 0;  // rank files: the shard group's size ([Note: shard groups])
  DType wire_ = DType::f32;
  TrainPosition position_;
  Batch batch_;
  std::vector<int64_t> numel_, shard_;
  std::vector<bool> frozen_;
  std::vector<std::string> names_, files_;
  std::vector<std::vector<std::array<Place, 4>>> regions_;  // [rank][unit][region]
  std::vector<std::unique_ptr<CheckpointFile>> fds_;
  std::vector<char> bounce_;
};

// [Note: frozen units' checksum] in checkpoint.cpp: the part of the sum elements [first, first+n)
// of unit u with values v add; the checksum is its sum over every element of every frozen unit.
uint64_t frozen_hash(int u, int64_t first, const float* v, int64_t n);

// What a resumed run must share with its checkpoint besides the model: the global batch (micro x
// accumulation x ranks) and seq_len, which the data position and the schedule follow from, and
// train.steps at or past the checkpoint's step. CheckpointError saying which and what to do.
void check_resume(const SavedCheckpoint& saved, const Config& cfg, int world_size);

// Collective. `dir` is a checkpoint folder (holding meta.json) or a checkpoint root (holding
// `latest`). Checks the checkpoint against this run's model and loads this rank's states into
// `engine`, resharded where it was saved at another world size, stage or precision ([Note:
// resharding] in checkpoint.cpp); returns the position. CheckpointError naming the file
// and what is wrong (missing, another model or format, a checksum mismatch, a truncated file, a
// check_resume failure).
TrainPosition load_checkpoint(const std::string& dir, const Config& cfg, Communicator& comm, const Model& model,
                              ZeroEngine& engine);

}  // namespace zt
