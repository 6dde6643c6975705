#include "runtime/zero/optimizer_offload.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

namespace zt {

std::string offload_swap_dir(Communicator& comm) {
  // Rank 0's process id and start time, so that runs sharing an nvme_path never share files.
  Tensor id = Tensor::empty({2}, DType::i32, MemCategory::other);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  id.data<int32_t>()[0] = static_cast<int32_t>(::getpid());
  id.data<int32_t>()[1] = static_cast<int32_t>(std::chrono::duration_cast<std::chrono::seconds>(now).count() % 1000000);
  comm.broadcast(id, 0);
  return "ztrain-" + std::to_string(id.data<int32_t>()[0]) + "-" + std::to_string(id.data<int32_t>()[1]) + "/rank" +
         std::to_string(comm.rank());
}

namespace {

constexpr size_t kF32 = sizeof(float);

}  // namespace

OptimizerOffload::OptimizerOffload(std::vector<ShardedUnit>& units, const ZeroConfig& zero, std::unique_ptr<SwapStore> store,
                                   IoEngine* io, Allocator* plan)
    : units_(units), cfg_(zero.offload_optimizer), nvme_(cfg_.device == "nvme"), store_(std::move(store)) {
  size_t largest = 0;
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
    const ShardedUnit& x = units_[u];
    if (x.frozen()) continue;  // no optimizer
    const int64_t M = x.master_numel();
    const size_t per_element = (x.optimizer().master_offloaded() ? 3 : 2) * kF32;
    for (int64_t b = 0; b < M; b += zero.sub_group_size) {
      const int64_t e = std::min(M, b + zero.sub_group_size);
      const size_t bytes = static_cast<size_t>(e - b) * per_element;
      groups_.push_back({u, b, e, store_->add(x.name() + "[" + std::to_string(b) + ":" + std::to_string(e) + "]", bytes)});
      largest = std::max(largest, bytes);
    }
  }
  next_read_ = next_update_ = groups_.size();  // no update in progress
  if (nvme_) {
    const int n = static_cast<int>(std::min<size_t>(static_cast<size_t>(cfg_.buffer_count), groups_.size()));
    const auto bytes = static_cast<int64_t>(SwapStore::buffer_bytes(largest));
    for (int i = 0; i < n; ++i) {
      if (plan) {
        planned_.push_back(Tensor::empty({bytes / 2}, DType::u16, category_, *plan));  // 2-byte elements
        buffers_.push_back(static_cast<char*>(planned_.back().device_ptr()));
        continue;
      }
      pinned_.emplace_back(static_cast<size_t>(bytes), cfg_.pin_memory);
      cpu_allocator().accounting().add(category_, pinned_.back().size());
      io->register_buffer(pinned_.back());
      buffers_.push_back(pinned_.back().as<char>());
    }
  }
}

OptimizerOffload::~OptimizerOffload() {
  for (const PinnedBuffer& b : pinned_) cpu_allocator().accounting().sub(category_, b.size());
}

void OptimizerOffload::arrays(const Group& g, char* base, float*& master, float*& m, float*& v) const {
  const size_t n = static_cast<size_t>(g.end - g.begin);
  float* f = reinterpret_cast<float*>(base);
  const bool own = units_[g.unit].optimizer().master_offloaded();
  master = own ? f : nullptr;
  m = f + (own ? n : 0);
  v = m + n;
}

void OptimizerOffload::store_initial(int u) {
  ShardedUnit& x = units_[u];
  visit_unit(u, true, [&](int64_t begin, int64_t n, float* master, float* m, float* v) {
    if (master) std::memcpy(master, x.master().data<float>() + begin, static_cast<size_t>(n) * kF32);
    std::memset(m, 0, static_cast<size_t>(n) * kF32);
    std::memset(v, 0, static_cast<size_t>(n) * kF32);
  });
  x.optimizer().release_master();
}

void OptimizerOffload::visit_unit(int u, bool load, const GroupVisitor& fn) {
  size_t first = 0;
  while (first < groups_.size() && groups_[first].unit != u) ++first;
  size_t last = first;
  while (last < groups_.size() && groups_[last].unit == u) ++last;
  visit_groups(first, last, load, [&](int, int64_t begin, int64_t n, float* master, float* m, float* v) {
    fn(begin, n, master, m, v);
  });
}

void OptimizerOffload::visit_all(bool load, const UnitGroupVisitor& fn) { visit_groups(0, groups_.size(), load, fn); }

void OptimizerOffload::visit_groups(size_t first, size_t last, bool load, const UnitGroupVisitor& fn) {
  if (active()) throw std::logic_error("optimizer offload: states visited during an update");
  auto visit = [&](size_t k, char* base) {
    float *master, *m, *v;
    arrays(groups_[k], base, master, m, v);
    fn(groups_[k].unit, groups_[k].begin, groups_[k].end - groups_[k].begin, master, m, v);
  };
  if (!nvme_) {  // host memory: where they lie
    for (size_t k = first; k < last; ++k) visit(k, static_cast<char*>(store_->resident(groups_[k].record)));
    return;
  }
  // nvme, through every buffer: a save reads ahead of the visitor, a load writes behind it.
  struct InFlight {
    size_t group;
    int buffer;
    SwapOp op;
  };
  std::deque<InFlight> in_flight;  // an op left when the visitor throws waits in its destructor
  std::deque<int> free;
  for (int b = 0; b < static_cast<int>(buffers_.size()); ++b) free.push_back(b);
  size_t next = first;  // the next group to read (save)
  for (size_t k = first; k < last; ++k) {
    if (load) {
      if (free.empty()) {
        in_flight.front().op.wait();
        free.push_back(in_flight.front().buffer);
        in_flight.pop_front();
      }
      const int b = free.front();
      free.pop_front();
      visit(k, buffers_[size_t(b)]);
      in_flight.push_back({k, b, store_->write(groups_[k].record, buffers_[size_t(b)])});
    } else {
      for (; next < last && !free.empty(); ++next) {
        const int b = free.front();
        free.pop_front();
        in_flight.push_back({next, b, store_->read(groups_[next].record, buffers_[size_t(b)])});
      }
      InFlight f = std::move(in_flight.front());
      in_flight.pop_front();
      f.op.wait();
      visit(k, buffers_[size_t(f.buffer)]);
      free.push_back(f.buffer);
    }
  }
  while (!in_flight.empty()) {
    in_flight.front().op.wait();
    in_flight.pop_front();
  }
}

void OptimizerOffload::update_group(const Group& g, char* base, float lr, float grad_scale, int t) {
  float *master, *m, *v;
  arrays(g, base, master, m, v);
  ShardedUnit& x = units_[g.unit];
  if (g.begin == 0) x.begin_update();
  {
    Trace::Scope span(trace_, TraceLane::optimizer, "adamw " + store_->name(g.record));
    x.optimizer().step_range(lr, grad_scale, t, g.begin, g.end, master, m, v);
  }
  if (g.end == x.master_numel()) x.finish_update();
}

void OptimizerOffload::update(float lr, float grad_scale, int t) {
  if (nvme_) {
    begin(lr, grad_scale, t);
    finish();
  } else {
    for (const Group& g : groups_) update_group(g, static_cast<char*>(store_->resident(g.record)), lr, grad_scale, t);
  }
}

void OptimizerOffload::begin(float lr, float grad_scale, int t) {
  if (active()) throw std::logic_error("optimizer offload: an update began before the previous one ended");
  lr_ = lr;
  grad_scale_ = grad_scale;
  t_ = t;
  next_read_ = next_update_ = 0;
  free_.clear();
  for (int b = 0; b < static_cast<int>(buffers_.size()); ++b) free_.push_back(b);
  for (ShardedUnit& x : units_) x.mark_update_pending();
  advance(false);
}

bool OptimizerOffload::active() const { return next_update_ < groups_.size() || !writes_.empty() || !reads_.empty(); }

void OptimizerOffload::retire_write() {
  Pending w = std::move(writes_.front());
  writes_.pop_front();
  w.op.wait();
  trace_transfer(trace_, "write " + store_->name(groups_[w.group].record), w.io);
  free_.push_back(w.buffer);
}

bool OptimizerOffload::advance(bool block) {
  // [Note: optimizer offload]: reads run ahead into free buffers, writes trail behind. Without
  // `block` nothing is waited for: what completed is taken, what can start is started.
  const size_t n = groups_.size();
  bool progressed = false;
  while (!writes_.empty() && writes_.front().op.test()) {
    retire_write();
    progressed = true;
  }
  const size_t limit = cfg_.pipeline_read ? n : next_update_ + 1;
  while (next_read_ < std::min(limit, n) && !free_.empty()) {
    const int b = free_.front();
    free_.pop_front();
    SwapOp op = store_->read(groups_[next_read_].record, buffers_[b]);
    IoTransferPtr io = op.transfer();
    reads_.push_back({next_read_++, b, std::move(op), std::move(io)});
    progressed = true;
  }
  if (next_update_ < n) {
    if (reads_.empty()) {  // no buffer was free: the oldest write must end first
      if (!block) return progressed;
      retire_write();
      return true;
    }
    Pending& r = reads_.front();
    if (!block && !r.op.test()) return progressed;
    r.op.wait();
    trace_transfer(trace_, "read " + store_->name(groups_[r.group].record), r.io);
    const size_t i = r.group;
    const int b = r.buffer;
    reads_.pop_front();
    update_group(groups_[i], buffers_[b], lr_, grad_scale_, t_);
    SwapOp op = store_->write(groups_[i].record, buffers_[b]);
    IoTransferPtr io = op.transfer();
    writes_.push_back({i, b, std::move(op), std::move(io)});
    if (!cfg_.pipeline_write) retire_write();
    ++next_update_;
    return true;
  }
  if (!writes_.empty() && block) {
    retire_write();
    return true;
  }
  return progressed;
}

void OptimizerOffload::poll() {
  while (active() && advance(false)) {
  }
}

void OptimizerOffload::finish_unit(int u) {
  while (next_update_ < groups_.size() && groups_[next_update_].unit <= u) advance(true);
}

void OptimizerOffload::finish() {
  while (active()) advance(true);
}

}  // namespace zt
