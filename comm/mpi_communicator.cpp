#include "comm/mpi_communicator.hpp"

// The C API only: the deprecated C++ bindings add nothing and do not build warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>


namespace zt {

namespace {

std::string mpi_error(int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string(msg, static_cast<size_t>(len));
}

void check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw CommError(what + ": " + mpi_error(rc));
}

// Shared by a Work and the progress thread.
struct OpState {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::chrono::steady_clock::time_point done_at;
  std::exception_ptr error;
  std::string what;  // "all_gather of 4096 bf16", for errors
  int rank = 0;
};

// One collective: `start` issues the MPI call and returns its request (MPI_REQUEST_NULL for work
// done at once); `finish` runs after completion (casts back, averages).
struct Op {
  std::function<MPI_Request()> start;
  std::function<void()> finish;
  std::shared_ptr<OpState> state;
};

// [Note: MPI progress] in mpi_communicator.hpp. In the threaded mode a thread of its own drives
// MPI; in the polled mode whoever waits on a Work (or calls poll()) does, and nothing moves
// between those calls.
class Progress {
 public:
  Progress(bool threaded, int poll_us) : poll_us_(poll_us) {
    if (threaded) thread_ = std::thread([this] { loop(); });
  }
  ~Progress() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  bool threaded() const { return thread_.joinable(); }
  // Operations submitted and not yet complete.
  int outstanding() const { return outstanding_.load(); }

  void submit(Op op) {
    ++outstanding_;
    {
      std::lock_guard lock(m_);
      queued_.push_back(std::move(op));
    }
    cv_.notify_one();
    if (!threaded()) poll();  // start it now, in issue order
  }

  // One round in the polled mode: start what was queued, test what is in flight.
  void poll() {
    std::lock_guard lock(drive_m_);
    drive();
  }

 private:
  void complete(Op& op, std::exception_ptr error) {
    --outstanding_;
    if (!error && op.finish) {
      try {
        op.finish();
      } catch (...) {
        error = std::current_exception();
      }
    }
    {
      std::lock_guard lock(op.state->m);
      op.state->done = true;
      op.state->done_at = std::chrono::steady_clock::now();
      op.state->error = error;
    }
    op.state->cv.notify_all();
  }

  // Returns whether anything completed.
  bool drive() {
    std::deque<Op> fresh;
    {
      std::lock_guard lock(m_);
      fresh.swap(queued_);
    }
    bool progressed = false;
    for (Op& op : fresh) {
      try {
        MPI_Request r = op.start();
        if (r == MPI_REQUEST_NULL) {
          complete(op, nullptr);
          progressed = true;
        } else {
          inflight_.emplace_back(std::move(op), r);
        }
      } catch (...) {
        complete(op, std::current_exception());
        progressed = true;
      }
    }
    for (size_t i = 0; i < inflight_.size();) {
      int flag = 0;
      const int rc = MPI_Test(&inflight_[i].second, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS || flag) {
        Op& op = inflight_[i].first;
        complete(op, rc == MPI_SUCCESS ? nullptr : std::make_exception_ptr(CommError(op.state->what + ": " + mpi_error(rc))));
        inflight_.erase(inflight_.begin() + static_cast<long>(i));
        progressed = true;
      } else {
        ++i;
      }
    }
    return progressed;
  }

  void loop() {
    for (;;) {
      {
        std::unique_lock lock(m_);
        if (inflight_.empty()) cv_.wait(lock, [&] { return stop_ || !queued_.empty(); });
        // On stop, operations that can never complete (a peer died) are abandoned rather than
        // waited for: the job is ending anyway.
        if (stop_ && queued_.empty()) return;
      }
      // Polling drives MPI's progress; pausing keeps it from starving the compute threads.
      if (!drive() && !inflight_.empty()) {
        if (poll_us_ > 0)
          std::this_thread::sleep_for(std::chrono::microseconds(poll_us_));
        else
          std::this_thread::yield();
      }
    }
  }

  std::mutex m_;  // queued_, stop_
  std::condition_variable cv_;
  std::deque<Op> queued_;
  bool stop_ = false;
  std::mutex drive_m_;  // the polled mode's callers take turns at drive()
  std::vector<std::pair<Op, MPI_Request>> inflight_;  // only the driving thread touches it
  int poll_us_;
  std::atomic<int> outstanding_{0};
  std::thread thread_;
};

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<OpState> s, std::shared_ptr<Progress> p, std::chrono::milliseconds timeout)
      : s_(std::move(s)), progress_(std::move(p)), timeout_(timeout) {}
  void wait() override {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    auto finished = [&] { return s_->done; };
    if (progress_->threaded()) {
      std::unique_lock lock(s_->m);
      if (timeout_.count() == 0)
        s_->cv.wait(lock, finished);
      else if (!s_->cv.wait_until(lock, deadline, finished))
        timed_out();
    } else {
      for (;;) {
        progress_->poll();
        {
          std::lock_guard lock(s_->m);
          if (s_->done) break;
        }
        if (timeout_.count() && std::chrono::steady_clock::now() > deadline) timed_out();
        std::this_thread::yield();
      }
    }
    std::lock_guard lock(s_->m);
    if (s_->error) std::rethrow_exception(s_->error);
  }
  bool test() override {
    if (!progress_->threaded()) progress_->poll();
    std::lock_guard lock(s_->m);
    if (s_->done && s_->error) std::rethrow_exception(s_->error);
    return s_->done;
  }
  std::chrono::steady_clock::time_point completed_at() const override {
    std::lock_guard lock(s_->m);
    return s_->done_at;
  }

 private:
  [[noreturn]] void timed_out() const {
    throw CommError("rank " + std::to_string(s_->rank) + ": " + s_->what + " did not complete within " +
                    std::to_string(timeout_.count()) + " ms (a rank died, hangs, or issued other collectives)");
  }
  std::shared_ptr<OpState> s_;
  std::shared_ptr<Progress> progress_;
  std::chrono::milliseconds timeout_;
};

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
    progress_ = std::make_shared<Progress>(!(mode && std::string(mode) == "poll"), poll_us_);
  }

  CommProgress progress() const override { return progress_->threaded() ? CommProgress::thread : CommProgress::poll; }
  void set_progress(CommProgress p) override {
    if (p == progress()) return;
    if (progress_->outstanding())
      throw std::logic_error("set_progress: " + std::to_string(progress_->outstanding()) + " operations in flight");
    progress_ = std::make_shared<Progress>(p == CommProgress::thread, poll_us_);
  }
  ~MpiCommunicator() override {
    progress_.reset();
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string_view backend() const override { return "mpi"; }

  WorkPtr all_gather_async(const Tensor& in, const Tensor& out) override {
    check_gather("all_gather", in, out);
    const int c = mpi_count("all_gather", in.numel());
    const bool in_place = in.same_storage(out) && in.offset() == out.offset() + static_cast<int64_t>(rank_) * c;
    const MPI_Datatype t = wire_type(in.dtype());
    return submit("all_gather", in, [=, this] {
      MPI_Request r;
      check(MPI_Iallgather(in_place ? MPI_IN_PLACE : in.raw(), c, t, out.raw(), c, t, comm_, &r), "MPI_Iallgather");
      return r;
    }, {});
  }

  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_gather("reduce_scatter", out, in);
    check_reducible("reduce_scatter", in.dtype(), op);
    const int c = mpi_count("reduce_scatter", out.numel());
    const bool avg = op == ReduceOp::avg;
    const auto n_ranks = static_cast<float>(size_);
    if (is_half(in.dtype())) {
      auto stage = staging_->get(in.numel() + c);
      return submit("reduce_scatter", out, [=, this] {
        float* st = stage->data<float>();
        to_f32(in, st);
        ring_reduce_scatter(st, st + in.numel(), c, op);
        return MPI_REQUEST_NULL;
      }, [=] {
        float* res = stage->data<float>() + in.numel();
        if (avg) divide(res, c, n_ranks);
        from_f32(res, out);
      });
    }
    if (in.dtype() == DType::f32)
      return submit("reduce_scatter", out, [=, this] {
        ring_reduce_scatter(in.data<float>(), out.data<float>(), c, op);
        if (avg) divide(out.data<float>(), c, n_ranks);
        return MPI_REQUEST_NULL;
      }, {});
    const bool in_place = in.same_storage(out) && out.offset() == in.offset() + static_cast<int64_t>(rank_) * c;
    const MPI_Datatype t = wire_type(in.dtype());
    return submit("reduce_scatter", out, [=, this] {
      MPI_Request r;
      // MPI's in-place form leaves the result at the start of the buffer; finish moves it to this
      // rank's slice, where the [Note: collective shapes] puts it.
      check(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : in.raw(), in_place ? in.raw() : out.raw(), c, t,
                                      mpi_op(op), comm_, &r),
            "MPI_Ireduce_scatter_block");
      return r;
    }, [=, this] {
      if (in_place && rank_ != 0 && c) std::memmove(out.raw(), in.raw(), out.nbytes());
    });
  }

  WorkPtr all_reduce_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_same("all_reduce", in, out);
    check_reducible("all_reduce", in.dtype(), op);
    const int n = mpi_count("all_reduce", in.numel());
    const bool avg = op == ReduceOp::avg;
    const auto n_ranks = static_cast<float>(size_);
    if (is_half(in.dtype())) {
      // Out of place in f32: Open MPI's in-place all-reduce runs several times slower here.
      auto stage = staging_->get(2 * static_cast<int64_t>(n));
      return submit("all_reduce", in, [=, this] {
        float* st = stage->data<float>();
        to_f32(in, st);
        MPI_Request r;
        check(MPI_Iallreduce(st, st + n, n, MPI_FLOAT, mpi_op(op), comm_, &r), "MPI_Iallreduce");
        return r;
      }, [=] {
        float* res = stage->data<float>() + n;
        if (avg) divide(res, n, n_ranks);
        from_f32(res, out);
      });
    }
    const bool in_place = in.same_storage(out) && in.offset() == out.offset();
    const MPI_Datatype t = wire_type(in.dtype());
    return submit("all_reduce", in, [=, this] {
      MPI_Request r;
      check(MPI_Iallreduce(in_place ? MPI_IN_PLACE : in.raw(), out.raw(), n, t, mpi_op(op), comm_, &r), "MPI_Iallreduce");
      return r;
    }, [=] {
      if (avg) divide(out.data<float>(), n, n_ranks);
    });
  }

  WorkPtr broadcast_async(const Tensor& buf, int root) override {
    if (root < 0 || root >= size_)
      throw std::invalid_argument("broadcast: root " + std::to_string(root) + " outside [0, " + std::to_string(size_) + ")");
    const int n = mpi_count("broadcast", buf.numel());
    const MPI_Datatype t = wire_type(buf.dtype());
    return submit("broadcast", buf, [=, this] {
      MPI_Request r;
      check(MPI_Ibcast(buf.raw(), n, t, root, comm_, &r), "MPI_Ibcast");
      return r;
    }, {});
  }

  WorkPtr barrier_async() override {
    return submit("barrier", Tensor(), [this] {
      MPI_Request r;
      check(MPI_Ibarrier(comm_, &r), "MPI_Ibarrier");
      return r;
    }, {});
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    // Through the progress thread, so that it is ordered with the collectives issued before it.
    // The result lives in shared state: if the wait times out, the progress thread may still
    // write it after this frame is gone.
    auto sub = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
    submit("split", Tensor(), [sub, color, key, this] {
      check(MPI_Comm_split(comm_, color, key, sub.get()), "MPI_Comm_split");
      return MPI_REQUEST_NULL;
    }, {})->wait();
    return std::make_unique<MpiCommunicator>(*sub);
  }

 private:
  static MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

  // [Note: ring reduce-scatter] Open MPI's reduce_scatter_block reaches under 1 GB/s here (it
  // reduces and then scatters), so f32 reduce-scatters run as a ring over point-to-point
  // messages, as NCCL's do: in n-1 steps each rank passes a partly reduced chunk to its right
  // neighbour and adds its own input to the one from its left, so rank r ends with chunk r summed
  // over all ranks, having sent (n-1)/n of the buffer. Runs on the progress thread; MPI progresses
  // the other operations in flight inside these calls. out may be in's own chunk (in place): it
  // is written only after the last read of in.
  void ring_reduce_scatter(const float* in, float* out, int c, ReduceOp op) {
    const int n = size_, r = rank_;
    if (n == 1 || c == 0) {
      if (c && out != in) std::memmove(out, in, static_cast<size_t>(c) * sizeof(float));
      return;
    }
    // Kept between calls (only the progress thread uses it): fresh pages for every operation cost
    // as much as the transfer itself.
    if (ring_buf_.numel() < 2 * static_cast<int64_t>(c))
      ring_buf_ = Tensor::empty({2 * static_cast<int64_t>(c)}, DType::f32, MemCategory::communication);
    float* cur = ring_buf_.data<float>();
    float* tmp = cur + c;
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    std::memcpy(cur, in + static_cast<size_t>(left) * c, static_cast<size_t>(c) * sizeof(float));
    for (int step = 0; step < n - 1; ++step) {
      const int idx = (r + 2 * n - step - 2) % n;  // the chunk arriving from the left
      check(MPI_Sendrecv(cur, c, MPI_FLOAT, right, kRingTag, tmp, c, MPI_FLOAT, left, kRingTag, comm_, MPI_STATUS_IGNORE),
            "reduce_scatter ring step");
      const float* mine = in + static_cast<size_t>(idx) * c;
      if (op == ReduceOp::max)
        for (int i = 0; i < c; ++i) tmp[i] = std::max(tmp[i], mine[i]);
      else
        for (int i = 0; i < c; ++i) tmp[i] += mine[i];
      std::swap(cur, tmp);
    }
    std::memcpy(out, cur, static_cast<size_t>(c) * sizeof(float));
  }
  static constexpr int kRingTag = 7301;
  Tensor ring_buf_;

  WorkPtr submit(const char* name, const Tensor& described, std::function<MPI_Request()> start, std::function<void()> finish) {
    auto state = std::make_shared<OpState>();
    state->rank = rank_;
    state->what = described.defined() ? std::string(name) + " of " + std::to_string(described.numel()) + " " +
                                            std::string(dtype_name(described.dtype()))
                                      : std::string(name);
    progress_->submit({std::move(start), std::move(finish), state});
    return std::make_shared<MpiWork>(state, progress_, timeout());
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  // Each handed-out buffer holds the pool, so a buffer that outlives the communicator (an
  // abandoned Work) still has somewhere to go back to.
  std::shared_ptr<StagingPool> staging_ = std::make_shared<StagingPool>();
  std::shared_ptr<Progress> progress_;  // shared with the Works, which poll it in the polled mode
  int poll_us_ = 0;
};

bool g_owns_mpi = false;

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
  // Each communicator's progress thread calls MPI concurrently with the others'.
  if (provided < MPI_THREAD_MULTIPLE)
    throw CommError("the MPI library provides thread level " + std::to_string(provided) +
                    "; ztrain needs MPI_THREAD_MULTIPLE");
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

void mpi_abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace zt
