#include "tensor/tape.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace zt {

void OpProfile::add(const std::string& op, bool backward, double seconds) {
  Row& r = rows_[op];
  (backward ? r.backward_s : r.forward_s) += seconds;
  if (!backward) ++r.calls;
}

Tape::Timer::~Timer() {
  if (profile_)
    profile_->add(op_, false, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

void Tape::record(const char* op, std::vector<Tensor> outputs, Backward backward) {
  if (!recording()) return;
  for (const Tensor& t : outputs)
    if (!t.requires_grad()) throw std::logic_error(std::string(op) + ": recorded output has no grad slot");
  entries_.push_back({Kind::op, op, -1, std::move(outputs), std::move(backward), {}});
}

namespace {
std::string unit_range(int unit) { return "unit " + std::to_string(unit); }
}  // namespace

void Tape::begin_unit(int unit) {
  if (marker_) marker_->push_range(unit_range(unit));
  if (hooks_.pre_forward) hooks_.pre_forward(unit);
  if (recording()) entries_.push_back({Kind::unit_begin, "unit_begin", unit, {}, {}, {}});
}

void Tape::end_unit(int unit) {
  if (hooks_.post_forward) hooks_.post_forward(unit);
  if (marker_) marker_->pop_range();
  if (recording()) entries_.push_back({Kind::unit_end, "unit_end", unit, {}, {}, {}});
}

struct Tape::Checkpoint {
  int unit;
  Tensor x;     // the unit's input; its storage released while `host` holds its values
  Tensor host;  // cpu_checkpointing: x's values in pinned host memory until they go back
  UnitFn fn;
  std::vector<std::vector<Tensor>> kept;  // selective by op: the kept ops' outputs, in op order

  // Brings x's values back (once), queued on the calling thread's stream. A device may still be
  // reading the host copy when this returns: `spent` holds it until the next pass.
  void restore(std::vector<Tensor>& spent) {
    if (!host.defined()) return;
    x.storage()->materialize();
    x.copy_from(host, false);
    if (x.device() == Device::cuda) spent.push_back(host);
    host = Tensor();
  }
};

namespace {
// Sets a value for a scope.
template <class T> class Scoped {
 public:
  Scoped(T& v, T now) : v_(v), was_(std::exchange(v, now)) {}
  ~Scoped() { v_ = was_; }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;

 private:
  T& v_;
  T was_;
};
}  // namespace

Tensor Tape::checkpoint(int unit, const Tensor& x, const CheckpointOptions& o, UnitFn fn) {
  if (!recording()) {
    begin_unit(unit);
    Tensor y = fn(*this, x);
    end_unit(unit);
    return y;
  }
  // The copies back of the previous pass: its step's results have been waited for since.
  spent_host_.clear();
  auto c = std::make_shared<Checkpoint>(Checkpoint{unit, x, Tensor(), std::move(fn), {}});
  if (marker_) marker_->push_range(unit_range(unit));
  if (hooks_.pre_forward) hooks_.pre_forward(unit);
  Tensor y;
  {
    Scoped<int> discard(discard_depth_, discard_depth_ + 1);
    Scoped<std::vector<std::vector<Tensor>>*> keeping(keeping_, o.keep_expensive ? &c->kept : nullptr);
    y = c->fn(*this, x);
  }
  if (hooks_.post_forward) hooks_.post_forward(unit);
  if (marker_) marker_->pop_range();
  // Only an input that is its storage's whole can leave the device (a block's is a fresh output).
  if (o.to_host && x.has_data() && x.storage()->bytes() == x.nbytes()) {
    // The meta device plans a host run, whose inputs are host memory already: charged beside them.
    Allocator& host = x.device() == Device::meta ? x.allocator() : x.allocator().pinned_host();
    c->host = Tensor::empty(x.shape(), x.dtype(), MemCategory::activations, host);
    c->host.copy_from(x, false);
    x.storage()->release();  // in stream order behind the copy
  }
  std::vector<Tensor> outputs;
  if (o.needs_grad) {
    y.set_requires_grad(true, false);
    outputs.push_back(y);
  }
  entries_.push_back({Kind::checkpoint, "checkpoint", unit, std::move(outputs), nullptr, std::move(c)});
  return y;
}

std::vector<Tensor> Tape::kept() {
  if (!reusing_ || reused_ >= reusing_->size()) return {};
  return (*reusing_)[reused_++];
}

void Tape::keep(std::vector<Tensor> outputs) {
  if (keeping_) keeping_->push_back(std::move(outputs));
}

void Tape::recompute(Checkpoint& c, const Tensor& out) {
  Tape sub;
  sub.hooks_ = hooks_;
  sub.profile_ = profile_;
  sub.marker_ = marker_;
  sub.reusing_ = &c.kept;
  sub.begin_unit(c.unit);  // the scheduler's recompute: gathered again, kept for the backward
  const Tensor y = c.fn(sub, c.x);
  sub.end_unit(c.unit);
  if (sub.reused_ != c.kept.size())
    throw std::logic_error("checkpoint: unit " + std::to_string(c.unit) + "'s recompute took back " +
                           std::to_string(sub.reused_) + " of the " + std::to_string(c.kept.size()) +
                           " outputs its forward kept");
  if (out.defined() && y.requires_grad()) y.bind_grad(out.ensure_grad());
  sub.replay();
}

void Tape::restore_next(std::vector<Entry>::reverse_iterator from) {
  for (auto it = from + 1; it != entries_.rend(); ++it)
    if (it->kind == Kind::checkpoint) return it->checkpoint->restore(spent_host_);
}

void Tape::backward(const Tensor& loss, float seed) {
  if (!loss.requires_grad()) throw std::logic_error("backward from a tensor that no op recorded");
  if (loss.numel() != 1) throw std::logic_error("backward needs a scalar loss, got " + shape_str(loss.shape()));
  loss.ensure_grad().fill(seed);
  replay();
}

void Tape::replay() {
  using clock = std::chrono::steady_clock;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    switch (it->kind) {
      case Kind::unit_end:
        if (marker_) marker_->push_range(unit_range(it->unit));
        if (hooks_.pre_backward) hooks_.pre_backward(it->unit);
        break;
      case Kind::unit_begin:
        if (hooks_.post_backward) hooks_.post_backward(it->unit);
        if (marker_) marker_->pop_range();
        break;
      case Kind::op: {
        const auto start = clock::now();
        {
          MarkedRange range(marker_, std::string(it->op) + " backward");
          it->backward();
        }
        if (profile_) profile_->add(it->op, true, std::chrono::duration<double>(clock::now() - start).count());
        // The producer's backward is the last reader of its outputs' gradients.
        for (const Tensor& t : it->outputs) t.release_grad();
        it->outputs.clear();
        it->backward = nullptr;  // frees the activations the closure held
        break;
      }
      case Kind::checkpoint: {
        Checkpoint& c = *it->checkpoint;
        c.restore(spent_host_);
        restore_next(it);  // the next one's input comes back while this one recomputes
        recompute(c, it->outputs.empty() ? Tensor() : it->outputs[0]);
        for (const Tensor& t : it->outputs) t.release_grad();
        it->outputs.clear();
        it->checkpoint.reset();
        break;
      }
    }
  }
  entries_.clear();
}

}  // namespace zt
