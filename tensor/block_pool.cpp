#include "tensor/block_pool.hpp"

#include <stdexcept>
#include <vector>

namespace zt {

// [Note: stream-ordered reuse] A tensor's memory is given back when its last reference goes on the
// host, while kernels that use it may still be queued. Every block carries the stream it was
// allocated on (the thread's CudaStreamScope, else the legacy default stream), and freeing it
// records an event on that stream:
//  - the same stream may take the block again at once: whatever it queues next runs after the
//    kernels that used the block;
//  - another stream takes it only once that event has completed (cudaEventQuery; checked when
//    that stream finds nothing of its own that fits, before asking the driver for more).
// So a block must only be used on the stream it was allocated on, or on streams ordered before
// that stream's later work (an event the allocating stream waits on), or be kept alive by the user
// until the other stream's work is known complete (as NcclWork keeps its buffers). Streams are told
// apart by handle: cudaStreamPerThread names a different stream on every thread and must not be
// the scope's stream, and a stream that allocated must have finished its work before it is
// destroyed (a new stream may get the same handle and would take its blocks at once). Neighbouring free blocks merge when one may stand for both: either has no
// pending work, or both wait on the same stream (the newer event covers the older one).

BlockPool::~BlockPool() {
  for (auto& [p, b] : blocks_)
    if (b->event) driver_.release(b->event);
  for (auto& [p, b] : blocks_)
    if (!b->prev) driver_.free(b->ptr);  // a segment's first block holds the driver's pointer
}

BlockPool::Block* BlockPool::best_fit(FreeSet& set, size_t size) {
  Block probe;
  probe.size = size;  // ptr null: before every block of that size
  auto it = set.lower_bound(&probe);
  return it == set.end() ? nullptr : *it;
}

BlockPool::Block* BlockPool::find_free(size_t size, Stream s) {
  Block* best = best_fit(clean_, size);
  if (auto own = pending_.find(s); own != pending_.end()) {
    Block* b = best_fit(own->second, size);
    if (b && (!best || BySize()(b, best))) best = b;
  }
  if (best) return best;
  sweep_completed();
  return best_fit(clean_, size);
}

void BlockPool::sweep_completed() {
  std::vector<void*> cleaned;
  for (auto it = pending_.begin(); it != pending_.end();) {
    FreeSet& set = it->second;
    for (auto b = set.begin(); b != set.end();) {
      Block* block = *b;
      if (!driver_.done(block->event)) {
        ++b;
        continue;
      }
      b = set.erase(b);
      drop_event(block);
      clean_.insert(block);
      cleaned.push_back(block->ptr);
    }
    it = set.empty() ? pending_.erase(it) : std::next(it);
  }
  // A block merged into its predecessor is gone; look each up again by address.
  for (void* p : cleaned)
    if (auto b = blocks_.find(p); b != blocks_.end() && !b->second->allocated) coalesce(b->second.get());
}

BlockPool::Block* BlockPool::new_segment(size_t size, Stream s) {
  const size_t bytes = segment_size(size);
  void* p = driver_.malloc(bytes);
  if (!p) return nullptr;
  ++stats_.mallocs;
  ++stats_.segments;
  stats_.reserved += bytes;
  if (stats_.reserved > stats_.peak_reserved) stats_.peak_reserved = stats_.reserved;
  auto b = std::make_unique<Block>();
  b->ptr = static_cast<char*>(p);
  b->size = bytes;
  b->stream = s;
  Block* raw = b.get();
  blocks_.emplace(p, std::move(b));
  clean_.insert(raw);
  return raw;
}

void* BlockPool::hand_out(Block* b, size_t size, Stream s) {
  erase_free(b);
  if (b->size - size >= kGranule) {
    // The rest stays free, waiting on what the whole block waited on.
    auto rest = std::make_unique<Block>();
    rest->ptr = b->ptr + size;
    rest->size = b->size - size;
    rest->prev = b;
    rest->next = b->next;
    rest->stream = b->stream;
    rest->event = b->event;
    rest->seq = b->seq;
    if (b->next) b->next->prev = rest.get();
    b->next = rest.get();
    b->size = size;
    b->event = nullptr;
    insert_free(rest.get());
    blocks_.emplace(rest->ptr, std::move(rest));
  }
  drop_event(b);  // `s` is the block's stream, or the block's work has completed
  b->allocated = true;
  b->stream = s;
  stats_.in_use += b->size;
  return b->ptr;
}

void BlockPool::erase_free(Block* b) {
  if (!b->event) {
    clean_.erase(b);
    return;
  }
  auto it = pending_.find(b->stream);
  it->second.erase(b);
  if (it->second.empty()) pending_.erase(it);
}

void BlockPool::drop_event(Block* b) {
  if (b->event) driver_.release(b->event);
  b->event = nullptr;
}

// Whether free neighbours x, y may become one block; a block whose event has completed is made
// clean on the way.
bool BlockPool::mergeable(Block* x, Block* y) {
  if (x->allocated || y->allocated) return false;
  if (!x->event || !y->event || x->stream == y->stream) return true;
  for (Block* b : {x, y}) {
    if (driver_.done(b->event)) {
      erase_free(b);
      drop_event(b);
      insert_free(b);
      return true;
    }
  }
  return false;
}

// x directly before y, both free and mergeable; x absorbs y, taking the pending event if any (the
// newer of two on the same stream).
BlockPool::Block* BlockPool::merge(Block* x, Block* y) {
  erase_free(x);
  erase_free(y);
  if (x->event && y->event) {
    Block* older = x->seq < y->seq ? x : y;
    drop_event(older);
  }
  if (y->event) {
    x->event = std::exchange(y->event, nullptr);
    x->seq = y->seq;
    x->stream = y->stream;
  }
  x->size += y->size;
  x->next = y->next;
  if (y->next) y->next->prev = x;
  blocks_.erase(y->ptr);
  insert_free(x);
  return x;
}

void BlockPool::coalesce(Block* b) {
  if (b->next && mergeable(b, b->next)) b = merge(b, b->next);
  if (b->prev && mergeable(b->prev, b)) merge(b->prev, b);
}

void* BlockPool::allocate(size_t bytes, Stream s) {
  std::lock_guard lock(m_);
  if (bytes > (size_t{1} << 62)) return nullptr;  // no device has it; rounding up would overflow
  const size_t size = block_size(bytes);
  ++stats_.allocations;
  if (Block* b = find_free(size, s)) {
    ++stats_.cache_hits;
    return hand_out(b, size, s);
  }
  Block* b = new_segment(size, s);
  if (!b) {
    empty_cache_locked();
    b = new_segment(size, s);
  }
  return b ? hand_out(b, size, s) : nullptr;
}

void BlockPool::free(void* p) {
  std::lock_guard lock(m_);
  auto it = blocks_.find(p);
  if (it == blocks_.end() || !it->second->allocated)
    throw std::invalid_argument("free of a device pointer the caching allocator did not hand out");
  Block* b = it->second.get();
  b->event = driver_.record(b->stream);  // throws: the block stays handed out (leaked), not reused early
  b->seq = ++seq_;
  b->allocated = false;
  stats_.in_use -= b->size;
  insert_free(b);
  coalesce(b);
}

size_t BlockPool::empty_cache() {
  std::lock_guard lock(m_);
  return empty_cache_locked();
}

size_t BlockPool::empty_cache_locked() {
  for (auto& [stream, set] : pending_)
    for (Block* b : set) driver_.wait(b->event);
  sweep_completed();  // every free block is now clean and merged with its free neighbours
  std::vector<Block*> whole;
  for (Block* b : clean_)
    if (!b->prev && !b->next) whole.push_back(b);
  size_t released = 0;
  for (Block* b : whole) {
    clean_.erase(b);
    driver_.free(b->ptr);
    ++stats_.frees;
    --stats_.segments;
    stats_.reserved -= b->size;
    released += b->size;
    blocks_.erase(b->ptr);
  }
  return released;
}

BlockPoolStats BlockPool::stats() const {
  std::lock_guard lock(m_);
  BlockPoolStats s = stats_;
  s.free_blocks = clean_.size();
  for (const auto& [stream, set] : pending_) s.free_blocks += set.size();
  return s;
}

}  // namespace zt
