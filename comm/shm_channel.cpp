#include "comm/shm_channel.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

namespace zt::mpi {

// [Note: shared-memory collectives]: the segment, the counters and the order of operations.
class ShmChannel {
 public:
  ShmChannel(void* base, size_t bytes, int rank, int size) : base_(static_cast<char*>(base)), bytes_(bytes),
                                                             rank_(rank), size_(size) {}
  ~ShmChannel() { ::munmap(base_, bytes_); }
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  static size_t slot_bytes(int size) { return kHeader + 2 * static_cast<size_t>(size) * kShmChunk; }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::atomic_ref<uint64_t> published(int j) { return std::atomic_ref<uint64_t>(*counter(j, 0)); }
  std::atomic_ref<uint64_t> done(int j) { return std::atomic_ref<uint64_t>(*counter(j, 1)); }
  // Region k of rank j's buffer for global step g.
  char* region(int j, uint64_t g, int k) {
    return slot(j) + kHeader + ((g & 1) * static_cast<size_t>(size_) + static_cast<size_t>(k)) * kShmChunk;
  }

  // Only the thread driving the communicator's progress touches these.
  uint64_t step = 0;    // global steps this rank has finished
  uint64_t issued = 0;  // operations started
  uint64_t turn = 0;    // the operation that runs now

 private:
  static constexpr size_t kLine = 64, kHeader = 4096;  // the counters, each on a line of its own
  char* slot(int j) { return base_ + static_cast<size_t>(j) * slot_bytes(size_); }
  uint64_t* counter(int j, int which) { return reinterpret_cast<uint64_t*>(slot(j) + which * kLine); }

  char* base_;
  size_t bytes_;
  int rank_, size_;
};

std::shared_ptr<ShmChannel> make_shm_channel(MPI_Comm comm, int rank, int size) {
  const size_t bytes = ShmChannel::slot_bytes(size) * static_cast<size_t>(size);
  char name[64] = {};
  int fd = -1, ok = 1;
  if (rank == 0) {
    static std::atomic<int> made{0};
    std::snprintf(name, sizeof name, "/ztrain-%d-%d", static_cast<int>(::getpid()), made++);
    fd = ::shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    // Reserved now, so a full /dev/shm shows here rather than as SIGBUS on a first touch.
    ok = fd >= 0 && ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 && ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0;
  }
  check(MPI_Bcast(&ok, 1, MPI_INT, 0, comm), "MPI_Bcast");
  check(MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm), "MPI_Bcast");
  if (ok && rank != 0) fd = ::shm_open(name, O_RDWR, 0600);
  void* base = MAP_FAILED;
  if (ok && fd >= 0) base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd >= 0) ::close(fd);
  int mapped = base != MAP_FAILED, all = 0;
  check(MPI_Allreduce(&mapped, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (rank == 0 && ok) ::shm_unlink(name);  // every rank has it mapped (or none keeps it)
  if (!all) {
    if (base != MAP_FAILED) ::munmap(base, bytes);
    return nullptr;
  }
  return std::make_shared<ShmChannel>(base, bytes, rank, size);  // the segment starts zeroed
}

namespace {

// One collective as a sequence of steps ([Note: shared-memory collectives]); the subclass says
// what each step writes and reads.
class ShmOp : public Pending {
 public:
  ShmOp(std::shared_ptr<ShmChannel> ch, int64_t steps)
      : ch_(std::move(ch)), r_(ch_->rank()), n_(ch_->size()), number_(ch_->issued++), steps_(steps) {}
  ~ShmOp() override {
    // Abandoned (a timeout ends the job): the next operation may run, out of step with the peers.
    if (!finished_ && ch_->turn == number_) ++ch_->turn;
  }
  ShmOp(const ShmOp&) = delete;
  ShmOp& operator=(const ShmOp&) = delete;

  bool advance() override {
    if (finished_) return true;
    if (ch_->turn != number_) return false;
    ShmChannel& c = *ch_;
    while (s_ < steps_) {
      const uint64_t g = c.step;
      if (!produced_) {
        if (g >= 2)
          for (int j = 0; j < n_; ++j)
            if (c.done(j).load(std::memory_order_acquire) < g - 1) return false;
        produce(s_, g);
        c.published(r_).store(g + 1, std::memory_order_release);
        produced_ = true;
      }
      for (int j = 0; j < n_; ++j)
        if (c.published(j).load(std::memory_order_acquire) < g + 1) return false;
      consume(s_, g);
      c.done(r_).store(g + 1, std::memory_order_release);
      ++c.step;
      ++s_;
      produced_ = false;
    }
    finished_ = true;
    ++c.turn;
    return true;
  }

 protected:
  virtual void produce(int64_t s, uint64_t g) = 0;
  virtual void consume(int64_t s, uint64_t g) = 0;
  ShmChannel& ch() { return *ch_; }

  std::shared_ptr<ShmChannel> ch_;
  int r_, n_;

 private:
  uint64_t number_;
  int64_t steps_, s_ = 0;
  bool produced_ = false, finished_ = false;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Reduces `count` elements at `srcs[0..n)` (in rank order) into `dst`, of type t: f32, bf16 and
// f16 accumulate in f32 (`acc`) and round once; i32 in i32. avg divides the sum by n (a division:
// the correctly rounded mean).
void reduce_into(void* dst, const std::vector<const char*>& srcs, int64_t count, DType t, ReduceOp op, float* acc) {
  const int n = static_cast<int>(srcs.size());
  if (t == DType::i32) {
    auto* out = static_cast<int32_t*>(dst);
    for (int64_t i = 0; i < count; ++i) {
      int32_t v = reinterpret_cast<const int32_t*>(srcs[0])[i];
      for (int j = 1; j < n; ++j) {
        const int32_t x = reinterpret_cast<const int32_t*>(srcs[size_t(j)])[i];
        v = op == ReduceOp::max ? std::max(v, x) : v + x;
      }
      out[i] = v;
    }
    return;
  }
  auto load = [&](int j, float* f) {
    const char* s = srcs[size_t(j)];
    if (t == DType::f32) return std::memcpy(f, s, static_cast<size_t>(count) * sizeof(float)), void();
    const auto* h = reinterpret_cast<const uint16_t*>(s);
    if (t == DType::bf16) for (int64_t i = 0; i < count; ++i) f[i] = bf16_to_f32(h[i]);
    else for (int64_t i = 0; i < count; ++i) f[i] = f16_to_f32(h[i]);
  };
  load(0, acc);
  for (int j = 1; j < n; ++j) {
    const char* s = srcs[size_t(j)];
    if (t == DType::f32) {
      const auto* x = reinterpret_cast<const float*>(s);
      if (op == ReduceOp::max) for (int64_t i = 0; i < count; ++i) acc[i] = std::max(acc[i], x[i]);
      else for (int64_t i = 0; i < count; ++i) acc[i] += x[i];
    } else {
      const auto* h = reinterpret_cast<const uint16_t*>(s);
      const bool bf = t == DType::bf16;
      for (int64_t i = 0; i < count; ++i) {
        const float x = bf ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
        acc[i] = op == ReduceOp::max ? std::max(acc[i], x) : acc[i] + x;
      }
    }
  }
  if (op == ReduceOp::avg)
    for (int64_t i = 0; i < count; ++i) acc[i] /= static_cast<float>(n);
  if (t == DType::f32) return std::memcpy(dst, acc, static_cast<size_t>(count) * sizeof(float)), void();
  auto* h = static_cast<uint16_t*>(dst);
  if (t == DType::bf16) for (int64_t i = 0; i < count; ++i) h[i] = f32_to_bf16(acc[i]);
  else for (int64_t i = 0; i < count; ++i) h[i] = f32_to_f16(acc[i]);
}

// Rank j's block of an n-way split of `count` elements: [j*k, min((j+1)*k, count)), k = ceil(count / n).
struct Blocks {
  int64_t k;
  int64_t count;
  int64_t begin(int j) const { return std::min(count, j * k); }
  int64_t len(int j) const { return std::min(count, (j + 1) * k) - begin(j); }
};

// A reduce-scatter's steps over blocks (its own shards, or an all-reduce's n-ths): each step takes
// piece [s*b, (s+1)*b) of every block (clipped to the block).
class ReduceBlocks {
 public:
  ReduceBlocks(Blocks blocks, DType t, ReduceOp op)
      : blocks_(blocks), t_(t), op_(op), es_(int64_t(dtype_size(t))), b_(int64_t(kShmChunk) / es_),
        acc_(t == DType::i32 ? 0 : static_cast<size_t>(b_)) {}
  int64_t steps() const { return ceil_div(blocks_.k, b_); }
  int64_t piece(int j, int64_t s) const { return std::clamp<int64_t>(blocks_.len(j) - s * b_, 0, b_); }
  // Rank r writes piece s of every other rank's block into that rank's region.
  void produce(ShmChannel& ch, int r, int n, int64_t s, uint64_t g, const char* in) const {
    for (int j = 0; j < n; ++j)
      if (j != r)
        std::memcpy(ch.region(r, g, j), in + (blocks_.begin(j) + s * b_) * es_, static_cast<size_t>(piece(j, s) * es_));
  }
  // Rank r reduces piece s of its block, its own from `in`, the others' from their regions, into out.
  void consume(ShmChannel& ch, int r, int n, int64_t s, uint64_t g, const char* in, char* out) {
    const int64_t m = piece(r, s);
    if (m == 0) return;
    srcs_.assign(size_t(n), nullptr);
    for (int j = 0; j < n; ++j) srcs_[size_t(j)] = j == r ? in + (blocks_.begin(r) + s * b_) * es_ : ch.region(j, g, r);
    reduce_into(out + s * b_ * es_, srcs_, m, t_, op_, acc_.data());
  }

 private:
  Blocks blocks_;
  DType t_;
  ReduceOp op_;
  int64_t es_, b_;
  std::vector<float> acc_;
  std::vector<const char*> srcs_;
};

class ReduceScatter final : public ShmOp {
 public:
  ReduceScatter(std::shared_ptr<ShmChannel> ch, const void* in, void* out, int64_t c, DType t, ReduceOp op)
      : ShmOp(ch, ceil_div(c, int64_t(kShmChunk / dtype_size(t)))), in_(static_cast<const char*>(in)),
        out_(static_cast<char*>(out)), red_(Blocks{c, c * ch->size()}, t, op) {}

 private:
  void produce(int64_t s, uint64_t g) override { red_.produce(ch(), r_, n_, s, g, in_); }
  void consume(int64_t s, uint64_t g) override { red_.consume(ch(), r_, n_, s, g, in_, out_); }
  const char* in_;
  char* out_;
  ReduceBlocks red_;
};

// A reduce-scatter of every rank's block into `out`'s block, then an all-gather of the blocks.
class AllReduce final : public ShmOp {
 public:
  AllReduce(std::shared_ptr<ShmChannel> ch, const void* in, void* out, int64_t count, DType t, ReduceOp op)
      : AllReduce(ch, in, out, Blocks{ceil_div(count, ch->size()), count}, t, op) {}

 private:
  AllReduce(std::shared_ptr<ShmChannel> ch, const void* in, void* out, Blocks blocks, DType t, ReduceOp op)
      : ShmOp(ch, 2 * ReduceBlocks(blocks, t, op).steps()), in_(static_cast<const char*>(in)),
        out_(static_cast<char*>(out)), blocks_(blocks), es_(int64_t(dtype_size(t))), red_(blocks, t, op),
        half_(red_.steps()) {}
  int64_t bytes(int j, int64_t s) const { return red_.piece(j, s) * es_; }
  char* at(int j, int64_t s) const { return out_ + blocks_.begin(j) * es_ + s * int64_t(kShmChunk); }
  void produce(int64_t s, uint64_t g) override {
    if (s < half_) return red_.produce(ch(), r_, n_, s, g, in_);
    std::memcpy(ch().region(r_, g, 0), at(r_, s - half_), static_cast<size_t>(bytes(r_, s - half_)));
  }
  void consume(int64_t s, uint64_t g) override {
    if (s < half_) return red_.consume(ch(), r_, n_, s, g, in_, out_ + blocks_.begin(r_) * es_);
    for (int j = 0; j < n_; ++j)
      if (j != r_) std::memcpy(at(j, s - half_), ch().region(j, g, 0), static_cast<size_t>(bytes(j, s - half_)));
  }
  const char* in_;
  char* out_;
  Blocks blocks_;
  int64_t es_;
  ReduceBlocks red_;
  int64_t half_;
};

class Broadcast final : public ShmOp {
 public:
  Broadcast(std::shared_ptr<ShmChannel> ch, void* buf, int64_t bytes, int root)
      : ShmOp(ch, ceil_div(bytes, int64_t(kShmChunk))), buf_(static_cast<char*>(buf)), bytes_(bytes), root_(root) {}

 private:
  size_t len(int64_t s) const { return static_cast<size_t>(std::min<int64_t>(kShmChunk, bytes_ - s * int64_t(kShmChunk))); }
  void produce(int64_t s, uint64_t g) override {
    if (r_ == root_) std::memcpy(ch().region(r_, g, 0), buf_ + s * int64_t(kShmChunk), len(s));
  }
  void consume(int64_t s, uint64_t g) override {
    if (r_ != root_) std::memcpy(buf_ + s * int64_t(kShmChunk), ch().region(root_, g, 0), len(s));
  }
  char* buf_;
  int64_t bytes_;
  int root_;
};

class Barrier final : public ShmOp {
 public:
  explicit Barrier(std::shared_ptr<ShmChannel> ch) : ShmOp(std::move(ch), 1) {}

 private:
  void produce(int64_t, uint64_t) override {}
  void consume(int64_t, uint64_t) override {}
};

}  // namespace

std::unique_ptr<Pending> shm_reduce_scatter(std::shared_ptr<ShmChannel> ch, const void* in, void* out, int64_t c,
                                            DType t, ReduceOp op) {
  return std::make_unique<ReduceScatter>(std::move(ch), in, out, c, t, op);
}
std::unique_ptr<Pending> shm_all_reduce(std::shared_ptr<ShmChannel> ch, const void* in, void* out, int64_t n, DType t,
                                        ReduceOp op) {
  return std::make_unique<AllReduce>(std::move(ch), in, out, n, t, op);
}
std::unique_ptr<Pending> shm_broadcast(std::shared_ptr<ShmChannel> ch, void* buf, int64_t n, DType t, int root) {
  return std::make_unique<Broadcast>(std::move(ch), buf, n * int64_t(dtype_size(t)), root);
}
std::unique_ptr<Pending> shm_barrier(std::shared_ptr<ShmChannel> ch) { return std::make_unique<Barrier>(std::move(ch)); }

}  // namespace zt::mpi
