#include "comm/mpi_communicator.hpp"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

#include "comm/mpi_host.hpp"
#include "comm/mpi_progress.hpp"
#include "comm/mpi_ring.hpp"
#include "comm/shm_channel.hpp"

namespace zt {

namespace {

using mpi::check;
using mpi::Pending;

MPI_Datatype wire_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::i32: return MPI_INT32_T;
    case DType::bf16: case DType::f16: case DType::u16: return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

int mpi_count(const char* op, int64_t n) {
  if (n > INT_MAX) throw std::invalid_argument(std::string(op) + ": " + std::to_string(n) + " elements exceed MPI's int count");
  return static_cast<int>(n);
}

// 16-bit floats travel as f32 for reductions: MPI has no bf16 type, and summing in f32 with one
// rounding at the end is what a user of mixed precision expects (summing in bf16 hop by hop loses
// the small contributions). These copy between a half tensor and an f32 staging buffer. They run
// on the progress thread, serially: an OpenMP team started from that thread would be a second
// pool of threads fighting the compute threads for the cores.
void to_f32(const Tensor& half, float* f) {
  const auto* h = half.data<uint16_t>();
  const int64_t n = half.numel();
  if (half.dtype() == DType::bf16)
    for (int64_t i = 0; i < n; ++i) f[i] = bf16_to_f32(h[i]);
  else
    for (int64_t i = 0; i < n; ++i) f[i] = f16_to_f32(h[i]);
}
void from_f32(const float* f, const Tensor& half) {
  auto* h = half.data<uint16_t>();
  const int64_t n = half.numel();
  if (half.dtype() == DType::bf16)
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(f[i]);
  else
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(f[i]);
}

// Division, not multiplication by 1/n: sum/n is the correctly rounded mean, x * (1/n) can be an
// ulp off.
void divide(float* x, int64_t n, float d) {
  for (int64_t i = 0; i < n; ++i) x[i] /= d;
}

// f32 staging buffers for 16-bit reductions, handed out per operation and taken back when its
// last user lets go. Kept rather than freed: first-touch page faults on fresh buffers cost as much
// as the transfer. Holds at most as many buffers as operations were ever in flight at once.
class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  std::shared_ptr<Tensor> get(int64_t numel) {
    std::unique_ptr<Tensor> t;
    {
      std::lock_guard lock(m_);
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if ((*it)->numel() >= numel) {
          t = std::move(*it);
          free_.erase(it);
          break;
        }
    }
    if (!t) t = std::make_unique<Tensor>(Tensor::empty({numel}, DType::f32, MemCategory::communication));
    Tensor* raw = t.release();
    return std::shared_ptr<Tensor>(raw, [self = shared_from_this()](Tensor* back) {
      std::lock_guard lock(self->m_);
      self->free_.emplace_back(back);
    });
  }

 private:
  std::mutex m_;
  std::vector<std::unique_ptr<Tensor>> free_;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    MPI_Comm local;
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), "MPI_Comm_split_type");
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    const char* mode = std::getenv("ZT_MPI_PROGRESS");
    const char* pause = std::getenv("ZT_MPI_POLL_US");
    poll_us_ = pause ? std::atoi(pause) : 0;
    progress_ = std::make_shared<mpi::Progress>(!(mode && std::string(mode) == "poll"), poll_us_);
    // [Note: shared-memory collectives] where every rank is on this host; ZT_MPI_SHM=0 keeps
    // MPI's own (to compare them).
    const char* shm = std::getenv("ZT_MPI_SHM");
    if (size_ > 1 && local_size_ == size_ && !(shm && std::string(shm) == "0"))
      channel_ = mpi::make_shm_channel(comm_, rank_, size_);
  }

  CommProgress progress() const override { return progress_->threaded() ? CommProgress::thread : CommProgress::poll; }
  void set_progress(CommProgress p) override {
    if (p == progress()) return;
    if (progress_->outstanding())
      throw std::logic_error("set_progress: " + std::to_string(progress_->outstanding()) + " operations in flight");
    progress_ = std::make_shared<mpi::Progress>(p == CommProgress::thread, poll_us_);
  }
  ~MpiCommunicator() override {
    progress_.reset();
    // A host may finalize MPI before destroying its trainer (the embedding API allows it): MPI
    // may not be called then, and the communicator went with MPI.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string_view backend() const override { return "mpi"; }

  WorkPtr start_all_gather(const Tensor& in, const Tensor& out) override {
    check_gather("all_gather", in, out);
    const int c = mpi_count("all_gather", in.numel());
    const bool in_place = in.same_storage(out) && in.offset() == out.offset() + static_cast<int64_t>(rank_) * c;
    const MPI_Datatype t = wire_type(in.dtype());
    // Not through the shared-memory channel: Open MPI's all-gather copies once, from the peers'
    // buffers (its vader transport's CMA), where the channel's copies twice (bench/RESULTS.md).
    return submit("all_gather", in, [=, this] {
      MPI_Request r;
      check(MPI_Iallgather(in_place ? MPI_IN_PLACE : in.raw(), c, t, out.raw(), c, t, comm_, &r), "MPI_Iallgather");
      return mpi::pending_request(r);
    }, {});
  }

  WorkPtr start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_gather("reduce_scatter", out, in);
    check_reducible("reduce_scatter", in.dtype(), op);
    const int c = mpi_count("reduce_scatter", out.numel());
    const bool avg = op == ReduceOp::avg;
    const auto n_ranks = static_cast<float>(size_);
    if (channel_)
      return submit("reduce_scatter", out, [=, this] {
        return mpi::shm_reduce_scatter(channel_, in.raw(), out.raw(), c, in.dtype(), op);
      }, {});
    if (is_half(in.dtype())) {
      auto stage = staging_->get(in.numel() + c);
      const uint64_t ring = number_ring(c);
      return submit("reduce_scatter", out, [=, this] {
        float* st = stage->data<float>();
        to_f32(in, st);
        return ring_reduce_scatter(ring, st, st + in.numel(), c, op);
      }, [=] {
        float* res = stage->data<float>() + in.numel();
        if (avg) divide(res, c, n_ranks);
        from_f32(res, out);
      });
    }
    if (in.dtype() == DType::f32) {
      const uint64_t ring = number_ring(c);
      return submit("reduce_scatter", out, [=, this] {
        return ring_reduce_scatter(ring, in.data<float>(), out.data<float>(), c, op);
      }, [=] {
        if (avg) divide(out.data<float>(), c, n_ranks);
      });
    }
    const bool in_place = in.same_storage(out) && out.offset() == in.offset() + static_cast<int64_t>(rank_) * c;
    const MPI_Datatype t = wire_type(in.dtype());
    return submit("reduce_scatter", out, [=, this] {
      MPI_Request r;
      // MPI's in-place form leaves the result at the start of the buffer; finish moves it to this
      // rank's slice, where the [Note: collective shapes] puts it.
      check(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : in.raw(), in_place ? in.raw() : out.raw(), c, t,
                                      mpi_op(op), comm_, &r),
            "MPI_Ireduce_scatter_block");
      return mpi::pending_request(r);
    }, [=, this] {
      if (in_place && rank_ != 0 && c) std::memmove(out.raw(), in.raw(), out.nbytes());
    });
  }

  WorkPtr start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_same("all_reduce", in, out);
    check_reducible("all_reduce", in.dtype(), op);
    const int n = mpi_count("all_reduce", in.numel());
    const bool avg = op == ReduceOp::avg;
    const auto n_ranks = static_cast<float>(size_);
    if (channel_)
      return submit("all_reduce", in, [=, this] {
        return mpi::shm_all_reduce(channel_, in.raw(), out.raw(), n, in.dtype(), op);
      }, {});
    if ((in.dtype() == DType::f32 || is_half(in.dtype())) && ring_all_reduce(size_, n)) {
      // [Note: ring all-reduce], in f32, in a staged copy padded to size_ equal chunks.
      const int c = static_cast<int>((static_cast<int64_t>(n) + size_ - 1) / size_);
      const int64_t padded = static_cast<int64_t>(c) * size_;
      auto stage = staging_->get(padded);
      const uint64_t ring = number_ring(c);
      return submit("all_reduce", in, [=, this] {
        float* st = stage->data<float>();
        if (is_half(in.dtype())) to_f32(in, st);
        else std::memcpy(st, in.raw(), in.nbytes());
        std::fill(st + n, st + padded, 0.0f);
        return mpi::start_ring_all_reduce(ring_lane_, ring, comm_, rank_, size_, stage, st, c, op);
      }, [=] {
        float* st = stage->data<float>();
        if (avg) divide(st, n, n_ranks);
        if (is_half(in.dtype())) from_f32(st, out);
        else std::memcpy(out.raw(), st, out.nbytes());
      });
    }
    if (is_half(in.dtype())) {
      // Out of place in f32: Open MPI's in-place all-reduce runs several times slower here.
      auto stage = staging_->get(2 * static_cast<int64_t>(n));
      return submit("all_reduce", in, [=, this] {
        float* st = stage->data<float>();
        to_f32(in, st);
        MPI_Request r;
        check(MPI_Iallreduce(st, st + n, n, MPI_FLOAT, mpi_op(op), comm_, &r), "MPI_Iallreduce");
        return mpi::pending_request(r);
      }, [=] {
        float* res = stage->data<float>() + n;
        if (avg) divide(res, n, n_ranks);
        from_f32(res, out);
      });
    }
    const bool in_place = in.same_storage(out) && in.offset() == out.offset();
    const MPI_Datatype t = wire_type(in.dtype());
    if (in_place && in.nbytes() >= kLargeAllReduceBytes) {
      // kLargeAllReduceBytes: the input copied aside (4-byte elements, as the pool's), reduced out
      // of place into the buffer.
      auto stage = staging_->get(n);
      return submit("all_reduce", in, [=, this] {
        std::memcpy(stage->raw(), in.raw(), in.nbytes());
        MPI_Request r;
        check(MPI_Iallreduce(stage->raw(), out.raw(), n, t, mpi_op(op), comm_, &r), "MPI_Iallreduce");
        return mpi::pending_request(r);
      }, [=] {
        if (avg) divide(out.data<float>(), n, n_ranks);
      });
    }
    return submit("all_reduce", in, [=, this] {
      MPI_Request r;
      check(MPI_Iallreduce(in_place ? MPI_IN_PLACE : in.raw(), out.raw(), n, t, mpi_op(op), comm_, &r), "MPI_Iallreduce");
      return mpi::pending_request(r);
    }, [=] {
      if (avg) divide(out.data<float>(), n, n_ranks);
    });
  }

  WorkPtr start_broadcast(const Tensor& buf, int root) override {
    if (root < 0 || root >= size_)
      throw std::invalid_argument("broadcast: root " + std::to_string(root) + " outside [0, " + std::to_string(size_) + ")");
    const int n = mpi_count("broadcast", buf.numel());
    const MPI_Datatype t = wire_type(buf.dtype());
    if (channel_)
      return submit("broadcast", buf, [=, this] { return mpi::shm_broadcast(channel_, buf.raw(), n, buf.dtype(), root); }, {});
    return submit("broadcast", buf, [=, this] {
      MPI_Request r;
      check(MPI_Ibcast(buf.raw(), n, t, root, comm_, &r), "MPI_Ibcast");
      return mpi::pending_request(r);
    }, {});
  }

  WorkPtr start_barrier() override {
    if (channel_) return submit("barrier", Tensor(), [this] { return mpi::shm_barrier(channel_); }, {});
    return submit("barrier", Tensor(), [this] {
      MPI_Request r;
      check(MPI_Ibarrier(comm_, &r), "MPI_Ibarrier");
      return mpi::pending_request(r);
    }, {});
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    // [Note: no blocking MPI call] MPI_Comm_split waits for every rank, beyond any deadline, so
    // the ranks first meet in an all-gather of their colors and keys, ordered with the collectives
    // issued before it and bounded by the timeout: once it completed, every rank has reached this
    // split, and every operation issued before it has started.
    const Tensor mine = Tensor::empty({2}, DType::i32, MemCategory::communication);
    const Tensor all = Tensor::empty({2 * static_cast<int64_t>(size_)}, DType::i32, MemCategory::communication);
    mine.data<int32_t>()[0] = color;
    mine.data<int32_t>()[1] = key;
    all_gather(mine, all);
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    return std::make_unique<MpiCommunicator>(sub);
  }

 private:
  static MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

  // [Note: ring reduce-scatter]: rings are numbered in issue order, the same on every rank; a
  // reduce-scatter with nothing to pass on (one rank, no elements) is no ring and takes no number.
  bool is_ring(int c) const { return size_ > 1 && c > 0; }
  uint64_t number_ring(int c) { return is_ring(c) ? rings_issued_++ : 0; }
  std::unique_ptr<Pending> ring_reduce_scatter(uint64_t ring, const float* in, float* out, int c, ReduceOp op) {
    if (!is_ring(c)) {
      if (c && out != in) std::memmove(out, in, static_cast<size_t>(c) * sizeof(float));
      return nullptr;
    }
    return mpi::start_ring_reduce_scatter(ring_lane_, ring, comm_, rank_, size_, in, out, c, op);
  }
  uint64_t rings_issued_ = 0;  // the issuing thread's
  std::shared_ptr<mpi::RingLane> ring_lane_ = std::make_shared<mpi::RingLane>();

  WorkPtr submit(const char* name, const Tensor& described, std::function<std::unique_ptr<Pending>()> start,
                 std::function<void()> finish) {
    auto state = std::make_shared<mpi::OpState>();
    state->rank = rank_;
    state->what = described.defined() ? std::string(name) + " of " + std::to_string(described.numel()) + " " +
                                            std::string(dtype_name(described.dtype()))
                                      : std::string(name);
    progress_->submit({std::move(start), std::move(finish), state});
    return std::make_shared<mpi::MpiWork>(state, progress_, timeout());
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  // Each handed-out buffer holds the pool, so a buffer that outlives the communicator (an
  // abandoned Work) still has somewhere to go back to.
  std::shared_ptr<StagingPool> staging_ = std::make_shared<StagingPool>();
  std::shared_ptr<mpi::Progress> progress_;  // shared with the Works, which poll it in the polled mode
  std::shared_ptr<mpi::ShmChannel> channel_;  // [Note: shared-memory collectives]; null across hosts
  int poll_us_ = 0;
};

bool g_owns_mpi = false;

// Each communicator's progress thread calls MPI concurrently with the others' and the caller's.
void check_thread_level(int provided) {
  if (provided < MPI_THREAD_MULTIPLE)
    throw CommError("the MPI library provides thread level " + std::to_string(provided) +
                    "; ztrain needs MPI_THREAD_MULTIPLE (MPI_Init_thread with MPI_THREAD_MULTIPLE)");
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (initialized) {
    MPI_Query_thread(&provided);  // a host program started MPI; it also ends it
  } else {
    check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    g_owns_mpi = true;
  }
  check_thread_level(provided);
}

MpiSession::~MpiSession() {
  if (g_owns_mpi) MPI_Finalize();
  g_owns_mpi = false;
}

std::unique_ptr<Communicator> make_mpi_communicator() {
  MPI_Comm dup;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
  return std::make_unique<MpiCommunicator>(dup);
}

std::unique_ptr<Communicator> adopt_mpi_communicator(MPI_Comm host) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw CommError(std::string("MPI is ") + (finalized ? "finalized already" : "not initialized") +
                    ": the host program calls MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) before handing ztrain a "
                    "communicator, and MPI_Finalize after the last trainer is destroyed");
  int provided = 0;
  MPI_Query_thread(&provided);
  check_thread_level(provided);
  if (host == MPI_COMM_NULL) throw CommError("the communicator is MPI_COMM_NULL");
  MPI_Comm dup;
  check(MPI_Comm_dup(host, &dup), "MPI_Comm_dup");
  return std::make_unique<MpiCommunicator>(dup);
}

void mpi_abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace zt
