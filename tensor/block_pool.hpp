// The bookkeeping of the caching device allocator (tensor/cuda_allocator.cpp): segments taken from
// the driver, cut into blocks, kept when freed and handed out again, with the stream rule of
// [Note: stream-ordered reuse] in tensor/block_pool.cpp. It calls the device only through a
// BlockDriver, so the same code runs over the CUDA runtime and, in tests/test_block_pool.cpp, over
// a fake that needs no GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

struct CUstream_st;  // cudaStream_t is CUstream_st*; nullptr is the legacy default stream
struct CUevent_st;   // cudaEvent_t

namespace zt {

using Stream = CUstream_st*;
using Event = CUevent_st*;

// What the pool asks of the device. The pool calls it with its own lock held, one call at a time.
class BlockDriver {
 public:
  virtual ~BlockDriver() = default;
  // `bytes` of device memory, or nullptr when the device has no room (other failures throw).
  virtual void* malloc(size_t bytes) = 0;
  virtual void free(void* p) noexcept = 0;
  // An event recorded now on `s` (from a pool of events); throws when it cannot record.
  virtual Event record(Stream s) = 0;
  // Whether the work before `e` has completed.
  virtual bool done(Event e) = 0;
  // Waits on the host until it has.
  virtual void wait(Event e) = 0;
  // Gives `e` back to the driver's pool.
  virtual void release(Event e) noexcept = 0;
};

struct BlockPoolStats {
  size_t reserved = 0;       // bytes held from the driver (whole segments)
  size_t peak_reserved = 0;
  size_t in_use = 0;         // bytes of the blocks handed out (rounded up to granules)
  size_t segments = 0;       // segments held from the driver
  size_t free_blocks = 0;    // cached blocks waiting to be handed out again
  uint64_t allocations = 0;  // allocate() calls for more than 0 bytes
  uint64_t cache_hits = 0;   // of those, served from a cached block (no driver call)
  uint64_t mallocs = 0;      // successful driver allocations (cudaMalloc)
  uint64_t frees = 0;        // segments returned to the driver (cudaFree)
};

class BlockPool {
 public:
  static constexpr size_t kGranule = 512;               // every request rounds up to this
  static constexpr size_t kSegment = size_t{2} << 20;   // segments are multiples of 2 MiB
  static constexpr size_t kSmall = size_t{1} << 20;     // up to this, a request shares a segment

  explicit BlockPool(BlockDriver& driver) : driver_(driver) {}
  // Returns every segment to the driver (blocks still handed out are the caller's bug; they go too).
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of at least `bytes` (> 0) for use on stream `s`, or nullptr when the driver has no
  // room even after the cache was emptied.
  void* allocate(size_t bytes, Stream s);
  // Takes back a block allocate() returned; it stays cached. Records an event on the block's
  // stream (BlockDriver::record may throw; the block is then kept for its own stream only).
  void free(void* p);
  // Returns the segments no block of which is handed out (waiting for their pending events) and
  // the number of bytes released.
  size_t empty_cache();
  BlockPoolStats stats() const;

  static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
  // What a request of `bytes` holds, and the segment a driver allocation for it takes.
  static size_t block_size(size_t bytes) { return round_up(bytes ? bytes : 1, kGranule); }
  static size_t segment_size(size_t bytes) { return bytes <= kSmall ? kSegment : round_up(bytes, kSegment); }

 private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    Block* prev = nullptr;  // neighbours inside the same segment, in address order
    Block* next = nullptr;
    bool allocated = false;
    Stream stream = nullptr;  // the stream it was allocated on (free: last used on)
    Event event = nullptr;    // free: recorded at free time on `stream`; null once known complete
    uint64_t seq = 0;         // when `event` was recorded, to keep the newer of two on a merge
  };
  // Best fit: by size, then address.
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : std::less<char*>()(a->ptr, b->ptr);
    }
  };
  using FreeSet = std::set<Block*, BySize>;

  Block* best_fit(FreeSet& set, size_t size);
  Block* find_free(size_t size, Stream s);
  void sweep_completed();
  Block* new_segment(size_t size, Stream s);
  void* hand_out(Block* b, size_t size, Stream s);
  FreeSet& set_of(Block* b) { return b->event ? pending_[b->stream] : clean_; }
  void insert_free(Block* b) { set_of(b).insert(b); }
  void erase_free(Block* b);
  void drop_event(Block* b);
  bool mergeable(Block* b, Block* n);
  Block* merge(Block* b, Block* n);
  void coalesce(Block* b);
  size_t empty_cache_locked();

  BlockDriver& driver_;
  mutable std::mutex m_;
  // Every block, by address (handed out or free); owns them.
  std::unordered_map<void*, std::unique_ptr<Block>> blocks_;
  FreeSet clean_;                        // free, no pending work: any stream may take them
  std::map<Stream, FreeSet> pending_;    // free, with an event not yet seen complete
  uint64_t seq_ = 0;
  BlockPoolStats stats_;
};

}  // namespace zt
