// The trainer: the data loaders and the step loop. The ZeRO engine (runtime/zero/engine.hpp) owns
// the model's buffers on this rank and every collective of the step, at any stage.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "models/model.hpp"
#include "runtime/checkpoint/checkpoint_root.hpp"
#include "runtime/config.hpp"
#include "runtime/data/data.hpp"
#include "runtime/zero/loss_scaler.hpp"
#include "runtime/train/metrics.hpp"
#include "runtime/train/monitor.hpp"
#include "runtime/trace.hpp"
#include "runtime/zero/engine.hpp"
#include "tensor/allocator.hpp"
#include "tensor/tape.hpp"

namespace zt {

// [Note: non-finite steps]: a step that ends the run.
class NonfiniteStep : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Dimensions from the config, or from model.init_from (runtime/checkpoint/weights.hpp); with init_from,
// dimensions the config also gives must agree (ConfigError naming both values), and so must the
// arch.
ModelDims resolve_dims(const Config& cfg);

// The run's model: cfg.model.arch of `dims`, the embedding cut into `embedding_units`, with the
// lora section applied (ConfigError naming lora.<key> where it does not fit the model). What the
// Trainer trains and `ztrain estimate` replays.
std::unique_ptr<Model> make_run_model(const Config& cfg, const ModelDims& dims, int embedding_units);

// The OpenMP threads a rank computes with: train.threads, or with 0 the host's cores shared among
// the `ranks_here` ranks on it (oversubscribed OpenMP teams spin at their barriers and run many
// times slower).
int train_threads(const Config& cfg, int ranks_here);

class Trainer {
 public:
  // One rank, without MPI.
  explicit Trainer(const Config& cfg);
  // Rank comm.rank() of comm.size(); collective. Every rank constructs its Trainer with the same
  // config: the ranks first agree on it ([Note: ranks agree on the run] in runtime/agreement.hpp),
  // and a difference ends every rank's constructor with a ConfigError naming the setting. comm's
  // timeout becomes train.comm_timeout_s. With train.device "cuda" the run computes over an NCCL
  // communicator of its own, bootstrapped over `comm`, whose memory() holds the model.
  Trainer(const Config& cfg, Communicator& comm);

  // [Note: non-finite steps] A step whose loss (the mean over ranks) or, in fp32 and bf16, global
  // gradient norm is inf or NaN (fp16's overflow is its loss scaler's) is one every rank sees,
  // since both are reduced over the ranks: every rank throws NonfiniteStep before the update,
  // naming the step, so no non-finite state is trained on or saved (and keep_last never pushes a
  // good checkpoint out for it). train.skip_nonfinite_steps lets that many such steps in a row be skipped
  // instead, as fp16 skips an overflow: no update on any rank, the data moves on.
  //
  // One optimizer step over gradient_accumulation_steps micro-batches of data.train (a Trainer
  // without data.train has none to read: run() says so). Rank 0 writes its metrics line.
  StepStats step();
  // The same over the caller's micro-batches: `inputs` and `targets` hold gradient_accumulation_steps
  // micro-batches of micro_batch x seq_len tokens each, one after the other, each checked by
  // check_batch (a target of -1 leaves its position out of the loss, [Note: masked loss]).
  StepStats step(const int32_t* inputs, const int32_t* targets);
  // Throws std::invalid_argument naming the first token or target outside the vocabulary (or a
  // null pointer) in one micro-batch. This rank's own check: callers agree on it (runtime/agreed.hpp).
  void check_batch(const int32_t* inputs, const int32_t* targets) const;
  // Mean loss over train.val_batches validation batches (no gradients), at most the batches the
  // validation data holds.
  double validate();
  // Mean loss of one micro-batch of the caller's (checked by check_batch) over the ranks, without
  // gradients; counted as validate() and step() count.
  double evaluate(const int32_t* inputs, const int32_t* targets);
  // Collective: a checkpoint of this point into `root` (default checkpoint.dir) as
  // root/step_<steps> ([Note: checkpoint layout]); returns the seconds it took. checkpoint.keep_last
  // prunes checkpoint.dir only. A Trainer built with train.resume starts from one.
  double save(const std::string& root = {});
  // Collective: continues from the checkpoint in `dir` (a step folder, or a root's latest), as
  // train.resume does at construction: the states, the step count, the schedule's position and
  // data.train's. A failure may leave the states partly loaded: the Trainer is not to be used then.
  void resume_from(const std::string& dir);
  // From the next step on, the learning rate is `lr`, whatever the scheduler says.
  void set_lr(double lr) { lr_override_ = lr; }
  // Collective: the model gathered a unit at a time, written by rank 0 as `format` ("safetensors":
  // Hugging Face's names, "llmc": llm.c's GPT-2 file) to `path`; a LoRA model merged. Every rank
  // throws alike where it fails (`what` names the setting or call in the message).
  void write_model(const std::string& path, const std::string& format, const std::string& what);
  bool has_validation() const { return val_ != nullptr; }
  bool has_train_data() const { return train_ != nullptr; }
  // The trace from here on (train.trace's, or a new one kept in memory), emptied: what the steps
  // after this call do (`ztrain bench` times steps after a warm-up).
  const Trace& start_trace();
  // The whole run: data.steps steps, progress every steps_per_print, validation every
  // val_interval, metrics lines, final save. `log` receives each progress line (on every rank:
  // the caller prints rank 0's); rank 0 alone writes the metrics file and the saved model.
  // ConfigError on every rank where there is no data.train.
  void run(const std::function<void(const std::string&)>& log);

  Model& model() { return *model_; }
  const Model& model() const { return *model_; }
  const Config& config() const { return cfg_; }
  const Communicator& comm() const { return comm_; }
  // The communicator the Trainer was given (host buffers): where the ranks agree on errors.
  Communicator& host_comm() { return host_comm_; }
  int steps_done() const { return steps_done_; }
  OpProfile& profile() { return profile_; }
  const ZeroEngine& engine() const { return *engine_; }
  // Summed parameter gradients of the last step, by unit, at stage 0 (tests compare them with
  // PyTorch).
  Tensor unit_grads(int u) const { return engine_->units().at(u).grad_view(); }

 private:
  Trainer(const Config& cfg, std::unique_ptr<Communicator> own);
  double mean_over_ranks(double v);
  double sum_over_ranks(double v);
  int64_t count_over_ranks(int64_t n);  // exact, over the host communicator
  // What this rank sent over the run's communicators so far ([Note: bytes sent]): within groups,
  // and across them ([Note: shard groups]).
  std::pair<uint64_t, uint64_t> bytes_sent() const;
  [[noreturn]] void throw_nonfinite(double loss, double norm) const;
  // The step over `inputs` and `targets` (gradient_accumulation_steps micro-batches); `may_mask`:
  // count the targets left out ([Note: masked loss]).
  StepStats step_on(const int32_t* inputs, const int32_t* targets, bool may_mask);
  // The forward of inputs_ and targets_ without gradients: the loss times the targets counted
  // (all of them, counted as 1, when not `masked`), and that count.
  std::pair<double, int64_t> eval_batch(bool masked);

  Config cfg_;
  std::unique_ptr<Communicator> own_comm_;  // the Self communicator of the one-rank constructor
  std::unique_ptr<Communicator> device_comm_;  // NCCL, for train.device "cuda"
  Communicator& comm_;
  // The communicator the Trainer was given: host buffers, so the ranks' agreements (checks that
  // end every rank together, runtime/agreed.hpp) go over it whichever comm_ computes.
  Communicator& host_comm_;
  int B_, T_;
  std::unique_ptr<Model> model_;
  Tape tape_;
  std::unique_ptr<Trace> trace_;  // before the engine, which records into it
  std::unique_ptr<ZeroEngine> engine_;
  std::unique_ptr<DataLoader> train_, val_;
  OpProfile profile_;
  int steps_done_ = 0;
  int updates_done_ = 0;  // steps not skipped: AdamW's t and the LR schedule's position
  std::string resumed_;  // "resumed from DIR at step K (S s)", for the log
  std::string loaded_;   // "started from PATH (S s): ... peaked at ...", for the log
  std::unique_ptr<CheckpointRoot> checkpoints_;  // with checkpoint.save_interval
  std::string last_saved_;  // the newest checkpoint this run saved or resumed from, for messages
  int nonfinite_in_a_row_ = 0;
  std::string val_note_;  // why train.val_batches was lowered, for the log
  int poison_step_ = -1;  // ZT_POISON_GRADS, a testing aid: this rank's step to poison
  LossScaler scaler_;
  std::optional<double> lr_override_;  // set_lr
  std::unique_ptr<MetricsWriter> metrics_;  // train.metrics, on rank 0
  std::unique_ptr<Monitors> monitors_;      // the tensorboard and csv_monitor sections, on rank 0
  Tensor inputs_, targets_;
  std::vector<int32_t> step_inputs_, step_targets_;  // a step's micro-batches, read before the first
};

}  // namespace zt
