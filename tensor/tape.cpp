#include "tensor/tape.hpp"

#include <stdexcept>
#include <string>

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
  entries_.push_back({Kind::op, op, -1, std::move(outputs), std::move(backward)});
}

namespace {
std::string unit_range(int unit) { return "unit " + std::to_string(unit); }
}  // namespace

void Tape::begin_unit(int unit) {
  if (marker_) marker_->push_range(unit_range(unit));
  if (hooks_.pre_forward) hooks_.pre_forward(unit);
  if (recording()) entries_.push_back({Kind::unit_begin, "unit_begin", unit, {}, {}});
}

void Tape::end_unit(int unit) {
  if (hooks_.post_forward) hooks_.post_forward(unit);
  if (marker_) marker_->pop_range();
  if (recording()) entries_.push_back({Kind::unit_end, "unit_end", unit, {}, {}});
}

void Tape::backward(const Tensor& loss, float seed) {
  if (!loss.requires_grad()) throw std::logic_error("backward from a tensor that no op recorded");
  if (loss.numel() != 1) throw std::logic_error("backward needs a scalar loss, got " + shape_str(loss.shape()));
  loss.ensure_grad().fill(seed);
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
    }
  }
  entries_.clear();
}

}  // namespace zt
