// The autograd tape: ops record a backward closure in forward order; backward replays them in
// reverse. Units (a transformer block, the embedding, the head) are bracketed by markers, and the
// hooks fire around each unit in both directions. [Note: unit hooks]
//
// [Note: unit hooks] begin_unit(u) calls pre_forward(u) at once and leaves a marker; end_unit(u)
// calls post_forward(u) and leaves a marker. Replaying in reverse, the end marker is met first:
// pre_backward(u) runs before the unit's first backward op, post_backward(u) after its last.
// The ZeRO engine gathers parameters in pre_forward/pre_backward, frees them in post_forward, and
// reduce-scatters the unit's gradients in post_backward.
#pragma once

#include <chrono>
#include <functional>
#include <map>
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

class Tape {
 public:
  using Backward = std::function<void()>;

  // Whether ops should record (false inside a NoGrad scope).
  bool recording() const { return no_grad_depth_ == 0; }

  // Records an op. `outputs` must already carry a (non-leaf) grad slot, created before the
  // closure captured them; once `backward` has run, their gradients and everything the closure
  // captured are freed.
  void record(const char* op, std::vector<Tensor> outputs, Backward backward);

  void begin_unit(int unit);
  void end_unit(int unit);
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
  enum class Kind { op, unit_begin, unit_end };
  struct Entry {
    Kind kind;
    const char* op;
    int unit;
    std::vector<Tensor> outputs;
    Backward backward;
  };
  std::vector<Entry> entries_;
  UnitHooks hooks_;
  int no_grad_depth_ = 0;
  OpProfile* profile_ = nullptr;
  const RangeMarker* marker_ = nullptr;
};

}  // namespace zt
