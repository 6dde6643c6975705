// The autograd tape: ops record a backward closure in forward order; backward replays them in
// reverse. Units (a transformer block, the embedding, the head) are bracketed by markers, and the
// hooks fire around each unit in both directions. [Note: unit hooks]
//
// [Note: unit hooks] begin_unit(u) calls pre_forward(u) at once and leaves a marker; end_unit(u)
// calls post_forward(u) and leaves a marker. Replaying in reverse, the end marker is met first:
// pre_backward(u) runs before the unit's first backward op, post_backward(u) after its last.
// The ZeRO engine gathers parameters in pre_forward/pre_backward, frees them in post_forward, and
// reduce-scatters the unit's gradients in post_backward.
//
// [Note: activation checkpointing] Tape::checkpoint runs a unit (a block) while recording
// nothing, so its activations are freed as they go, and leaves one entry holding the unit's input.
// Replaying, that entry runs the unit again on a tape of its own, with the hooks of a forward
// (pre_forward: the ZeRO scheduler gathers the unit again, [Note: ZeRO schedule]), binds the
// recomputed output's gradient to the one the later units accumulated, and replays that tape
// (pre_backward .. post_backward). The kernels are deterministic, so the recomputed values, and
// every gradient, are the bits the run without checkpointing computes. Selective by op: ops that
// call keep() (the matmuls, attention with its softmax statistics, LoRA's in-place column adds)
// hold their outputs from the first forward, and in the recompute take them back in the same
// order (kept()) instead of computing them; only the cheap ops between them run again. With
// `to_host` the input's values wait in the device's pinned host memory, its device storage
// released ([Note: storage that comes and goes] in tensor/tensor.hpp), and come back one
// checkpoint ahead of their recompute.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace zt {

// Marks nested ranges for a device profiler (NVTX on cuda, seen by Nsight Systems): the tape
// marks every op's forward and backward by the op's name and every unit's span in both
// directions ("unit 3"); the trainer marks its phases.
class RangeMarker {
 public:
  virtual ~RangeMarker() = default;
  virtual void push_range(const std::string& name) const = 0;
  virtual void pop_range() const = 0;
};

// A marked range for a scope; nothing without a marker.
class MarkedRange {
 public:
  MarkedRange(const RangeMarker* m, const std::string& name) : m_(m) {
    if (m_) m_->push_range(name);
  }
  ~MarkedRange() {
    if (m_) m_->pop_range();
  }
  MarkedRange(const MarkedRange&) = delete;
  MarkedRange& operator=(const MarkedRange&) = delete;

 private:
  const RangeMarker* m_;
};

struct UnitHooks {
  std::function<void(int)> pre_forward, post_forward, pre_backward, post_backward;
};

// Wall time per op name and direction, summed over a run (bench/ prints the breakdown).
class OpProfile {
 public:
  void add(const std::string& op, bool backward, double seconds);
  struct Row { double forward_s = 0, backward_s = 0; long calls = 0; };
  const std::map<std::string, Row>& rows() const { return rows_; }
  void clear() { rows_.clear(); }

 private:
  std::map<std::string, Row> rows_;
};

// How Tape::checkpoint keeps a unit ([Note: activation checkpointing]).
struct CheckpointOptions {
  bool keep_expensive = false;  // selective by op: the ops that call keep() are not recomputed
  bool to_host = false;         // the input waits in pinned host memory (cpu_checkpointing)
  bool needs_grad = true;       // the unit's output needs a gradient (its input or parameters do)
};

class Tape {
 public:
  using Backward = std::function<void()>;
  // A unit's math, input to output, recording on the tape it is given.
  using UnitFn = std::function<Tensor(Tape&, const Tensor&)>;

  Tape() = default;
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  // Whether ops should record (false inside a NoGrad scope and a checkpointed unit's forward).
  bool recording() const { return no_grad_depth_ == 0 && discard_depth_ == 0; }
  // Whether this is a training pass (false inside NoGrad only): dropout draws its masks.
  bool training() const { return no_grad_depth_ == 0; }

  // Records an op. `outputs` must already carry a (non-leaf) grad slot, created before the
  // closure captured them; once `backward` has run, their gradients and everything the closure
  // captured are freed.
  void record(const char* op, std::vector<Tensor> outputs, Backward backward);

  void begin_unit(int unit);
  void end_unit(int unit);

  // Runs fn(tape, x) as unit `unit`, bracketed like begin_unit/end_unit, keeping only x (and with
  // keep_expensive what the ops keep) until the backward recomputes it: [Note: activation
  // checkpointing]. Without recording, just the bracketed unit.
  Tensor checkpoint(int unit, const Tensor& x, const CheckpointOptions& o, UnitFn fn);
  // Selective checkpointing, for the ops worth keeping: kept() returns the op's outputs from its
  // unit's first forward when this is the unit's recompute (the op then computes nothing), else
  // nothing; after computing, the op hands its outputs to keep(), which holds them only in a
  // checkpointed unit's first forward with keep_expensive.
  std::vector<Tensor> kept();
  void keep(std::vector<Tensor> outputs);
  void set_hooks(UnitHooks hooks) { hooks_ = std::move(hooks); }

  // Seeds d(loss) = seed and replays the tape in reverse, then clears it. Leaf gradients accumulate
  // into their bound buffers.
  void backward(const Tensor& loss, float seed = 1.0f);
  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }

  void set_profile(OpProfile* p) { profile_ = p; }
  OpProfile* profile() const { return profile_; }
  // Ranges for a device profiler (null: none); the marker outlives the tape's use of it.
  void set_marker(const RangeMarker* m) { marker_ = m; }
  const RangeMarker* marker() const { return marker_; }

  class NoGrad {
   public:
    explicit NoGrad(Tape& t) : tape_(t) { ++tape_.no_grad_depth_; }
    ~NoGrad() { --tape_.no_grad_depth_; }
    NoGrad(const NoGrad&) = delete;
    NoGrad& operator=(const NoGrad&) = delete;

   private:
    Tape& tape_;
  };

  // Times a forward op into the profile, if one is set, and marks its range.
  class Timer {
   public:
    Timer(const Tape& t, const char* op)
        : profile_(t.profile_), op_(op), start_(std::chrono::steady_clock::now()), range_(t.marker_, op) {}
    ~Timer();
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    OpProfile* profile_;
    const char* op_;
    std::chrono::steady_clock::time_point start_;
    MarkedRange range_;
  };

 private:
  struct Checkpoint;
  enum class Kind { op, unit_begin, unit_end, checkpoint };
  struct Entry {
    Kind kind;
    const char* op;
    int unit;
    std::vector<Tensor> outputs;
    Backward backward;
    std::shared_ptr<Checkpoint> checkpoint;  // Kind::checkpoint
  };
  // Replays the entries in reverse (the outputs' gradients already seeded), then clears them.
  void replay();
  void recompute(Checkpoint& c, const Tensor& out);
  // cpu_checkpointing's input on its way back: the next checkpoint's that the replay meets after `from`.
  void restore_next(std::vector<Entry>::reverse_iterator from);

  std::vector<Entry> entries_;
  UnitHooks hooks_;
  int no_grad_depth_ = 0;
  int discard_depth_ = 0;                             // inside a checkpointed unit's first forward
  std::vector<std::vector<Tensor>>* keeping_ = nullptr;  // where keep() holds outputs, if anywhere
  const std::vector<std::vector<Tensor>>* reusing_ = nullptr;  // a recompute's kept outputs
  size_t reused_ = 0;                                 // how many of them the recompute took back
  std::vector<Tensor> spent_host_;                    // host copies the device may still be reading
  OpProfile* profile_ = nullptr;
  const RangeMarker* marker_ = nullptr;
};

}  // namespace zt
