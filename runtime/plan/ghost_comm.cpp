#include "runtime/plan/ghost_comm.hpp"

#include <functional>
#include <stdexcept>
#include <utility>

#include "comm/mpi_communicator.hpp"

namespace zt {

namespace {

constexpr size_t kF32 = sizeof(float);

// Completes at once with no clock and done_when_tested, else when the clock says (or, with no
// clock, when waited for); then hands its staging back.
class GhostWork final : public Work {
 public:
  GhostWork(GhostClock* clock, int op, bool done_when_tested, std::function<void()> finish)
      : clock_(clock), op_(op), done_when_tested_(done_when_tested), finish_(std::move(finish)) {}
  void wait() override {
    if (done_) return;
    if (clock_) clock_->wait(op_);
    complete();
  }
  bool test() override {
    if (!done_ && (clock_ ? clock_->done(op_) : done_when_tested_)) complete();
    return done_;
  }

 private:
  void complete() {
    done_ = true;
    if (finish_) std::exchange(finish_, nullptr)();
  }
  GhostClock* clock_;
  int op_;
  bool done_when_tested_;
  std::function<void()> finish_;
  bool done_ = false;
};

}  // namespace

// MpiCommunicator's StagingPool on the ledger: first fit, in the order buffers came back; kept.
class GhostCommunicator::Pool {
 public:
  explicit Pool(Allocator& memory) : memory_(memory) {}
  ~Pool() {
    for (const Buffer& b : buffers_) memory_.deallocate(b.at, static_cast<size_t>(b.elements) * kF32, MemCategory::communication);
  }
  size_t get(int64_t elements) {
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (buffers_[*it].elements >= elements) {
        const size_t id = *it;
        free_.erase(it);
        return id;
      }
    buffers_.push_back({memory_.allocate(static_cast<size_t>(elements) * kF32, MemCategory::communication), elements});
    return buffers_.size() - 1;
  }
  void put(size_t id) { free_.push_back(id); }

 private:
  struct Buffer {
    void* at;
    int64_t elements;
  };
  Allocator& memory_;
  std::vector<Buffer> buffers_;  // by id
  std::vector<size_t> free_;     // ids, in the order they came back
};

GhostCommunicator::GhostCommunicator(int size, bool one_host, GhostGroup group, MetaAllocator& memory, GhostClock* clock)
    : size_(size), one_host_(one_host), group_(group), memory_(memory), clock_(clock), pool_(std::make_shared<Pool>(memory)) {}

std::unique_ptr<Communicator> GhostCommunicator::split(int, int) {
  // One rank cannot agree a split with the others it stands for; the ghost step makes the groups.
  throw std::logic_error("a ghost communicator is not split: the ghost step makes its groups");
}

std::string GhostCommunicator::name_of(TraceLane kind, const Tensor& buf) const {
  std::string s = kind == TraceLane::all_gather ? "all_gather" : kind == TraceLane::reduce_scatter ? "reduce_scatter" : "all_reduce";
  if (names_)
    if (const auto it = names_->find(buf.storage().get()); it != names_->end()) s += " " + it->second;
  if (group_ == GhostGroup::replicas) s += " over replicas";
  return s;
}

WorkPtr GhostCommunicator::issue(TraceLane kind, const Tensor& buf, int64_t staging, bool done_when_tested) {
  std::optional<size_t> id;
  if (staging > 0) id = pool_->get(staging);
  const int op = clock_ ? clock_->issue(kind, group_, static_cast<double>(buf.nbytes()), -1, name_of(kind, buf)) : -1;
  return std::make_shared<GhostWork>(clock_, op, done_when_tested, [pool = pool_, id] {
    if (id) pool->put(*id);
  });
}

void GhostCommunicator::grow_ring(int64_t chunk) {
  if (2 * chunk <= ring_) return;
  MemAccounting& ledger = memory_.accounting();
  ledger.add(MemCategory::communication, static_cast<size_t>(2 * chunk) * kF32);
  ledger.sub(MemCategory::communication, static_cast<size_t>(ring_) * kF32);
  ring_ = 2 * chunk;
}

WorkPtr GhostCommunicator::start_all_gather(const Tensor& in, const Tensor& out) {
  check_gather("all_gather", in, out);
  return issue(TraceLane::all_gather, out, 0, true);
}

WorkPtr GhostCommunicator::start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_gather("reduce_scatter", out, in);
  check_reducible("reduce_scatter", in.dtype(), op);
  const int64_t c = out.numel();
  const bool half = in.dtype() == DType::bf16 || in.dtype() == DType::f16;
  const bool ring = !one_host_ && (half || in.dtype() == DType::f32);  // 16 bits staged in f32
  WorkPtr w = issue(TraceLane::reduce_scatter, in, ring && half ? in.numel() + c : 0, false);
  if (ring && size_ > 1 && c > 0) grow_ring(c);
  return w;
}

WorkPtr GhostCommunicator::start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_same("all_reduce", in, out);
  check_reducible("all_reduce", in.dtype(), op);
  const int64_t n = in.numel();
  const bool half = in.dtype() == DType::bf16 || in.dtype() == DType::f16;
  if (one_host_) return issue(TraceLane::all_reduce, in, 0, false);
  if ((half || in.dtype() == DType::f32) && ring_all_reduce(size_, n)) {
    const int64_t c = (n + size_ - 1) / size_;
    WorkPtr w = issue(TraceLane::all_reduce, in, c * size_, false);
    grow_ring(c);
    return w;
  }
  if (half) return issue(TraceLane::all_reduce, in, 2 * n, false);
  const bool in_place = in.same_storage(out) && in.offset() == out.offset();
  return issue(TraceLane::all_reduce, in, in_place && in.nbytes() >= kLargeAllReduceBytes ? n : 0, false);
}

WorkPtr GhostCommunicator::start_broadcast(const Tensor&, int root) {
  if (root < 0 || root >= size_)
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " outside [0, " + std::to_string(size_) + ")");
  return std::make_shared<GhostWork>(nullptr, -1, true, nullptr);
}

WorkPtr GhostCommunicator::start_barrier() { return std::make_shared<GhostWork>(nullptr, -1, true, nullptr); }

}  // namespace zt
