// The caching allocator's bookkeeping (tensor/block_pool.hpp) over a fake device, so that it runs
// everywhere: rounding and segments, splitting and merging, steady-state reuse, the stream rule of
// [Note: stream-ordered reuse], empty_cache, running out of memory, and a random walk that checks
// after every step that live blocks never overlap and that no stream receives memory another
// stream's queued work may still use.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "tensor/block_pool.hpp"

using namespace zt;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

// A device of `capacity` bytes at fake addresses (never dereferenced), consecutive segments
// adjacent so that merging across segments would show. A stream is a queue of numbered events:
// the test says how far each stream has run (finish), and host waits run it up to the event.
class FakeDriver final : public BlockDriver {
 public:
  explicit FakeDriver(size_t capacity) : capacity_(capacity) {}

  void* malloc(size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    void* p = reinterpret_cast<void*>(next_);
    sizes_[next_] = bytes;
    next_ += bytes;
    ++mallocs;
    return p;
  }
  void free(void* p) noexcept override {
    auto it = sizes_.find(reinterpret_cast<uintptr_t>(p));
    CHECK(it != sizes_.end());  // noexcept: REQUIRE's throw would end the program
    if (it == sizes_.end()) return;
    used_ -= it->second;
    sizes_.erase(it);
  }
  Event record(Stream s) override {
    if (fail_records) throw std::runtime_error("record failed");
    auto e = std::make_unique<FakeEvent>(FakeEvent{s, ++issued_[s]});
    Event handle = reinterpret_cast<Event>(e.get());
    events_.emplace(handle, std::move(e));
    return handle;
  }
  bool done(Event e) override {
    const FakeEvent& f = *events_.at(e);
    return f.seq <= finished_[f.stream];
  }
  void wait(Event e) override {
    const FakeEvent& f = *events_.at(e);
    if (finished_[f.stream] < f.seq) finished_[f.stream] = f.seq;
  }
  void release(Event e) noexcept override { events_.erase(e); }

  // Stream s has run everything queued so far.
  void finish(Stream s) { finished_[s] = issued_[s]; }
  // The number the next event on s would get minus one: what a free now waits for.
  uint64_t issued(Stream s) { return issued_[s]; }
  uint64_t finished(Stream s) { return finished_[s]; }
  size_t used() const { return used_; }
  size_t live_events() const { return events_.size(); }

  uint64_t mallocs = 0;
  bool fail_records = false;

 private:
  struct FakeEvent {
    Stream stream;
    uint64_t seq;
  };
  size_t capacity_, used_ = 0;
  uintptr_t next_ = uintptr_t{1} << 40;
  std::map<uintptr_t, size_t> sizes_;
  std::map<Event, std::unique_ptr<FakeEvent>> events_;
  std::map<Stream, uint64_t> issued_, finished_;
};

Stream stream(int i) { return reinterpret_cast<Stream>(uintptr_t(0x1000) * static_cast<uintptr_t>(i)); }
const Stream kA = stream(1), kB = stream(2);

char* at(void* p) { return static_cast<char*>(p); }

}  // namespace

TEST_CASE("block pool: requests round to 512 B granules inside 2 MiB segments") {
  FakeDriver d(64 * MiB);
  BlockPool pool(d);
  void* a = pool.allocate(1, nullptr);
  void* b = pool.allocate(1000, nullptr);
  CHECK(at(b) == at(a) + 512);  // a's rest of the segment
  BlockPoolStats s = pool.stats();
  CHECK(s.mallocs == 1);
  CHECK(s.reserved == 2 * MiB);
  CHECK(s.in_use == 512 + 1024);
  CHECK(s.cache_hits == 1);

  void* big = pool.allocate(3 * MiB, nullptr);  // its own segment, rounded to 4 MiB
  CHECK(pool.stats().reserved == 6 * MiB);
  void* rest = pool.allocate(1 * MiB, nullptr);  // the 4 MiB segment's free MiB is a best fit
  CHECK(at(rest) == at(big) + 3 * MiB);
  CHECK(pool.stats().mallocs == 2);
  for (void* p : {a, b, big, rest}) pool.free(p);
  s = pool.stats();
  CHECK(s.in_use == 0);
  CHECK(s.free_blocks == 2);  // each segment merged back whole
  CHECK(BlockPool::segment_size(BlockPool::kSmall) == 2 * MiB);
  CHECK(BlockPool::segment_size(BlockPool::kSmall + 512) == 2 * MiB);
  CHECK(BlockPool::segment_size(5 * MiB) == 6 * MiB);
}

TEST_CASE("block pool: blocks split, and merge back when their neighbours are freed") {
  FakeDriver d(64 * MiB);
  BlockPool pool(d);
  void* a = pool.allocate(512 * KiB, nullptr);
  void* b = pool.allocate(512 * KiB, nullptr);
  void* c = pool.allocate(1 * MiB, nullptr);  // fills the segment exactly
  CHECK(at(b) == at(a) + 512 * KiB);
  CHECK(at(c) == at(b) + 512 * KiB);
  CHECK(pool.stats().free_blocks == 0);
  pool.free(b);  // a hole between two live blocks
  void* e = pool.allocate(768 * KiB, nullptr);  // does not fit the hole: a new segment
  CHECK(pool.stats().mallocs == 2);
  void* f = pool.allocate(256 * KiB, nullptr);  // best fit: the rest of e's segment is larger
  CHECK(at(f) == at(b));
  pool.free(f);
  pool.free(a);  // merges with the hole after it
  CHECK(pool.stats().free_blocks == 2);
  pool.free(c);  // and now the whole segment is one block
  pool.free(e);
  CHECK(pool.stats().free_blocks == 2);
  void* whole = pool.allocate(2 * MiB, nullptr);
  CHECK((whole == a || whole == e));
  CHECK(pool.stats().mallocs == 2);
  // Only the segment nobody holds goes back.
  CHECK(pool.empty_cache() == 2 * MiB);
  CHECK(pool.stats().reserved == 2 * MiB);
  CHECK(d.used() == 2 * MiB);
  pool.free(whole);
}

TEST_CASE("block pool: the same sequence twice allocates nothing the second time") {
  FakeDriver d(256 * MiB);
  BlockPool pool(d);
  const std::vector<size_t> sizes = {4,       3 * MiB, 700 * KiB, 12 * KiB + 5, 40 * MiB, 513,
                                     2 * MiB, 96,      1 * MiB,   1 * MiB + 1,  5 * MiB,  300 * KiB};
  auto pass = [&] {
    std::vector<void*> held;
    for (size_t i = 0; i < sizes.size(); ++i) {
      held.push_back(pool.allocate(sizes[i], nullptr));
      if (i % 3 == 2) {  // activations freed in between, as in a step
        pool.free(held[i - 1]);
        held[i - 1] = nullptr;
      }
    }
    for (auto it = held.rbegin(); it != held.rend(); ++it)
      if (*it) pool.free(*it);
  };
  pass();
  const BlockPoolStats first = pool.stats();
  pass();
  const BlockPoolStats second = pool.stats();
  CHECK(second.mallocs == first.mallocs);
  CHECK(second.cache_hits - first.cache_hits == sizes.size());
  CHECK(second.reserved == first.reserved);
}

TEST_CASE("block pool: another stream reuses a block only after the work queued before its free") {
  FakeDriver d(64 * MiB);
  BlockPool pool(d);
  void* p = pool.allocate(2 * MiB, kA);
  pool.free(p);  // kernels on A may still use it
  void* again = pool.allocate(2 * MiB, kA);
  CHECK(again == p);  // A itself: at once
  pool.free(again);
  void* q = pool.allocate(2 * MiB, kB);
  CHECK(q != p);  // B: not while A's work is pending
  CHECK(pool.stats().mallocs == 2);
  d.finish(kA);
  void* r = pool.allocate(2 * MiB, kB);
  CHECK(r == p);  // once it completed
  CHECK(pool.stats().mallocs == 2);
  pool.free(q);
  pool.free(r);
  // B's blocks wait for B: A takes neither until B has run.
  void* s = pool.allocate(2 * MiB, kA);
  CHECK(s != p);
  CHECK(s != q);
  pool.free(s);
  d.finish(kB);
  CHECK(pool.empty_cache() == 6 * MiB);
  CHECK(d.live_events() == 0);
}

TEST_CASE("block pool: free neighbours pending on different streams merge once one completes") {
  FakeDriver d(64 * MiB);
  BlockPool pool(d);
  void* x = pool.allocate(1 * MiB, kA);
  void* y = pool.allocate(1 * MiB, kB);  // the rest of x's segment (nothing of B's own exists)
  REQUIRE(at(y) == at(x) + 1 * MiB);
  pool.free(x);
  pool.free(y);
  CHECK(pool.stats().free_blocks == 2);
  d.finish(kA);
  // A 2 MiB request of a third stream finds nothing of its own, sweeps, and finds x merged with
  // y's block only if y's work completed: not yet.
  void* z = pool.allocate(2 * MiB, stream(3));
  CHECK(pool.stats().mallocs == 2);
  pool.free(z);
  d.finish(kB);
  d.finish(stream(3));
  void* w = pool.allocate(2 * MiB, stream(4));
  CHECK((w == x || w == z));
  CHECK(pool.stats().mallocs == 2);
  pool.free(w);
}

TEST_CASE("block pool: out of memory empties the cache, retries, then returns null") {
  FakeDriver d(8 * MiB);
  BlockPool pool(d);
  void* a = pool.allocate(6 * MiB, nullptr);
  pool.free(a);  // cached, 6 of the 8 MiB reserved
  void* b = pool.allocate(7 * MiB, nullptr);  // needs an 8 MiB segment: only after the cache went back
  REQUIRE(b != nullptr);
  BlockPoolStats s = pool.stats();
  CHECK(s.frees == 1);
  CHECK(s.reserved == 8 * MiB);
  CHECK(pool.allocate(2 * MiB, nullptr) == nullptr);
  CHECK(pool.allocate(SIZE_MAX, nullptr) == nullptr);
  pool.free(b);
  CHECK_THROWS_AS(pool.free(at(b) + 512), std::invalid_argument);
}

TEST_CASE("block pool: a free whose event cannot be recorded keeps the block out of the cache") {
  FakeDriver d(8 * MiB);
  BlockPool pool(d);
  void* a = pool.allocate(4 * KiB, nullptr);
  d.fail_records = true;
  CHECK_THROWS(pool.free(a));
  d.fail_records = false;
  CHECK(pool.stats().in_use == 4 * KiB);
  void* b = pool.allocate(4 * KiB, nullptr);
  CHECK(b != a);
  pool.free(b);
}

TEST_CASE("block pool: random walk over three streams keeps blocks disjoint and stream-safe") {
  std::mt19937_64 rng(12345);
  FakeDriver d(1024 * MiB);
  std::map<uintptr_t, std::pair<size_t, Stream>> live;  // address -> (requested bytes, stream)
  // Per 512 B granule, the stream that freed it last and the event number that free waited for.
  std::map<uintptr_t, std::pair<Stream, uint64_t>> freed;
  {
    BlockPool pool(d);
    const Stream streams[] = {nullptr, kA, kB};
    for (int step = 0; step < 4000; ++step) {
      const Stream s = streams[rng() % 3];
      const int what = static_cast<int>(rng() % 10);
      if (what < 4 || live.empty()) {
        const size_t bytes = rng() % 4 == 0 ? 1 + rng() % (6 * MiB) : 1 + rng() % (64 * KiB);
        void* p = pool.allocate(bytes, s);
        REQUIRE(p != nullptr);
        const auto a = reinterpret_cast<uintptr_t>(p);
        const size_t size = BlockPool::block_size(bytes);
        auto next = live.lower_bound(a);
        if (next != live.end()) REQUIRE(a + size <= next->first);
        if (next != live.begin()) {
          auto prev = std::prev(next);
          REQUIRE(prev->first + BlockPool::block_size(prev->second.first) <= a);
        }
        for (uintptr_t g = a; g < a + size; g += BlockPool::kGranule) {
          auto f = freed.find(g);
          if (f == freed.end() || f->second.first == s) continue;
          INFO("step " << step << ": granule handed to another stream before its work completed");
          REQUIRE(f->second.second <= d.finished(f->second.first));
        }
        live.emplace(a, std::make_pair(bytes, s));
      } else if (what < 9) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        const auto [a, info] = *it;
        pool.free(reinterpret_cast<void*>(a));
        const uint64_t waits_for = d.issued(info.second);  // the event free() just recorded
        for (uintptr_t g = a; g < a + BlockPool::block_size(info.first); g += BlockPool::kGranule)
          freed[g] = {info.second, waits_for};
        live.erase(it);
      } else {
        d.finish(s);
      }
      if (step % 500 == 499) pool.empty_cache();
      size_t in_use = 0;
      for (const auto& [a, info] : live) in_use += BlockPool::block_size(info.first);
      REQUIRE(pool.stats().in_use == in_use);
      REQUIRE(pool.stats().reserved == d.used());
    }
    for (const auto& [a, info] : live) pool.free(reinterpret_cast<void*>(a));
  }
  CHECK(d.used() == 0);
  CHECK(d.live_events() == 0);
}
