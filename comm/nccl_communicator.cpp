#include "comm/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tensor/cuda_allocator.hpp"
#include "tensor/cuda_stream.hpp"

// [Note: NCCL half reductions] NCCL reduces bf16 and f16 in their own type on every hop: each
// step of its ring or tree adds two 16-bit values and rounds, and avg pre-multiplies every input
// by 1/n in that type. That differs from what [Note: collective shapes] states and MpiCommunicator
// does (accumulate in f32, round once): with n ranks a sum carries up to n-1 roundings and loses
// contributions small next to the running total. Staging through f32 would double the bytes on
// the wire, which is what this path exists to avoid; a reduction that needs f32 accuracy (the
// gradients of a long accumulation) reduces f32 buffers.

namespace zt {

namespace {

using Clock = std::chrono::steady_clock;
// Between two polls of an operation's completion: short next to a collective, long enough that a
// waiting thread leaves its core to compute.
constexpr auto kPollInterval = std::chrono::microseconds(20);
// ncclUniqueId travels over the bootstrap as this many u16 elements.
constexpr int64_t kIdElements = 64;
static_assert(sizeof(ncclUniqueId) == kIdElements * 2, "ncclUniqueId is 128 bytes");

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
constexpr bool kHaveSplit = true;
ncclResult_t comm_split(ncclComm_t parent, int color, int key, ncclComm_t* out) {
  return ncclCommSplit(parent, color, key, out, nullptr);  // nullptr: the parent's config
}
#else
constexpr bool kHaveSplit = false;
ncclResult_t comm_split(ncclComm_t, int, int, ncclComm_t*) { return ncclInvalidUsage; }
#endif

std::string rank_prefix(int rank) { return "rank " + std::to_string(rank) + ": "; }

std::string cuda_error(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

std::string nccl_error(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);  // comm may be null: this thread's last error
  if (last && *last) s += std::string(" (") + last + ")";
  return s;
}

// CUDA calls fail with cuda::CudaError (tensor/cuda_stream.hpp), which names the call; here they
// become this rank's CommError: "rank 3: <what>: <name>: <description>".
void check_cuda(cudaError_t e, int rank, const std::string& what) {
  try {
    cuda::check(e, what.c_str());
  } catch (const cuda::CudaError& x) {
    throw CommError(rank_prefix(rank) + x.what());
  }
}

void check_nccl(ncclResult_t r, int rank, const std::string& what, ncclComm_t comm = nullptr) {
  if (r != ncclSuccess) throw CommError(rank_prefix(rank) + what + ": " + nccl_error(r, comm));
}

// Owns an ncclComm_t. NcclState::close() destroys it once its work drained; anything else that
// ends it (an error or timeout, an exception before the communicator is complete) aborts it,
// which does not wait for peers.
class NcclComm {
 public:
  explicit NcclComm(ncclComm_t c) : c_(c) {}
  ~NcclComm() { abort(); }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ncclComm_t get() const { return c_; }
  void abort() {
    if (c_) ncclCommAbort(std::exchange(c_, nullptr));
  }
  void destroy() {
    if (c_) ncclCommDestroy(std::exchange(c_, nullptr));
  }

 private:
  ncclComm_t c_;
};

// What a communicator and its outstanding Work share, so that a Work may outlive its communicator.
// The NCCL handle ends with the communicator (close()), at the same point of the program on every
// rank: ncclCommDestroy first finalizes, which waits for the communicator to be quiescent on
// every rank, so ranks that destroy their communicators in different orders can hang. (A Work
// outliving its communicator still reports its completion.) NCCL communicators are not
// thread-safe, so every call on `comm` (issuing, polling its error, aborting) holds `m`.
struct NcclState {
  // With `device_` current: the stream and events belong to it.
  NcclState(int rank_, int device_, ncclComm_t c) try
      : rank(rank_), device(device_), comm(c),
        barrier_buf(Tensor::empty({1}, DType::i32, MemCategory::communication, cuda_allocator(device_))) {
    CudaDeviceGuard on(device);
    check_cuda(cudaMemset(barrier_buf.device_ptr(), 0, barrier_buf.nbytes()), rank, "cudaMemset");
  } catch (const cuda::CudaError& e) {  // creating the stream or the event
    throw CommError(rank_prefix(rank_) + e.what());
  }
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;

  // Empty while the communicator is healthy; otherwise why not, after aborting it.
  std::string failure() {
    std::lock_guard lock(m);
    if (!comm.get()) return ended;
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm.get(), &async);
    if (r != ncclSuccess) async = r;
    if (async == ncclSuccess || async == ncclInProgress) return {};
    std::string why = nccl_error(async, comm.get());
    abort_locked();
    return why + "; the NCCL communicator was aborted";
  }

  void abort() {
    std::lock_guard lock(m);
    abort_locked();
  }
  void abort_locked() {
    if (comm.get()) ended = "the NCCL communicator was aborted after an earlier failure";
    comm.abort();
  }

  // Lets the collectives still on the stream finish (up to `timeout`; 0: for ever), then destroys
  // the communicator; aborts it when they fail or do not finish, as with a peer that died.
  void close(std::chrono::milliseconds timeout) noexcept {
    std::lock_guard lock(m);
    if (!comm.get()) return;
    int current = -1;
    cudaGetDevice(&current);
    if (current != device) cudaSetDevice(device);
    const auto start = Clock::now();
    bool drained = false;
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream.get());
      if (e == cudaSuccess) {
        drained = true;
        break;
      }
      if (e != cudaErrorNotReady) {
        cudaGetLastError();
        break;
      }
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm.get(), &async) != ncclSuccess || (async != ncclSuccess && async != ncclInProgress))
        break;
      if (timeout.count() && Clock::now() - start >= timeout) break;
      std::this_thread::sleep_for(kPollInterval);
    }
    if (drained) {
      comm.destroy();
      ended = "the NCCL communicator was destroyed";
    } else {
      abort_locked();
    }
    if (current >= 0 && current != device) cudaSetDevice(current);
  }

  const int rank;
  const int device;
  std::mutex m;
  NcclComm comm;
  // Non-blocking: the collectives do not serialize with the legacy default stream, where compute
  // runs ([Note: NCCL stream ordering] orders them explicitly).
  cuda::Stream stream;
  cuda::Event ready;   // recorded on the default stream: [Note: NCCL stream ordering]
  Tensor barrier_buf;  // one i32 that barrier() all-reduces
  std::string ended;   // why `comm` is gone, once it is
};

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> s, cuda::Event done, std::string what, std::vector<Tensor> keep,
           std::chrono::milliseconds timeout)
      : s_(std::move(s)), done_event_(std::move(done)), what_(std::move(what)), keep_(std::move(keep)),
        timeout_(timeout) {}

  // A Work dropped before its collective was seen to complete gives its buffers back to the
  // caching allocator, which may hand them out again at once on the default stream they came from
  // ([Note: stream-ordered reuse] in tensor/block_pool.cpp): that stream waits for the collective.
  ~NcclWork() override {
    if (keep_.empty()) return;
    int current = -1;
    cudaGetDevice(&current);
    if (current != s_->device) cudaSetDevice(s_->device);
    if (cudaStreamWaitEvent(nullptr, done_event_.get(), 0) != cudaSuccess) cudaGetLastError();
    if (current >= 0 && current != s_->device) cudaSetDevice(current);
  }

  void wait() override {
    std::lock_guard lock(m_);
    if (finished()) return;
    const auto start = Clock::now();
    while (!poll()) {
      if (timeout_.count() && Clock::now() - start >= timeout_) {
        s_->abort();  // the collective's kernels end; the job goes down through the exception
        fail(what_ + " did not complete within " + std::to_string(timeout_.count()) +
             " ms (a rank died, hangs, or issued other collectives); the NCCL communicator was aborted");
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  bool test() override {
    std::lock_guard lock(m_);
    return finished() || poll();
  }

 private:
  // True once completed; rethrows a failure seen before.
  bool finished() const {
    if (error_) std::rethrow_exception(error_);
    return done_;
  }

  // One look: true when complete; throws (and keeps) the failure of the op or the communicator.
  bool poll() {
    bool complete = false;
    try {
      complete = done_event_.done();
    } catch (const cuda::CudaError& e) {
      s_->abort();
      fail(what_ + " failed: " + e.what() + "; the NCCL communicator was aborted");
    }
    if (complete) {
      done_ = true;
      keep_.clear();
      return true;
    }
    if (std::string why = s_->failure(); !why.empty()) fail(what_ + " failed: " + why);
    return false;
  }

  [[noreturn]] void fail(const std::string& msg) {
    error_ = std::make_exception_ptr(CommError(rank_prefix(s_->rank) + msg));
    keep_.clear();
    std::rethrow_exception(error_);
  }

  std::shared_ptr<NcclState> s_;
  cuda::Event done_event_;      // recorded on the communicator's stream after the NCCL call
  std::string what_;            // "all_gather of 4096 bf16", for errors
  std::vector<Tensor> keep_;    // the buffers stay allocated until the collective finished
  std::chrono::milliseconds timeout_;
  std::mutex m_;
  bool done_ = false;
  std::exception_ptr error_;
};

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  return ncclSum;
}

// The element type of a reduction; u16 holds no numbers to add, and an integer average is not
// one (as in MpiCommunicator). Collectives that only move data move bytes.
ncclDataType_t reduce_type(const char* op, DType t, ReduceOp r) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32:
      if (r != ReduceOp::avg) return ncclInt32;
      break;
    case DType::u16: break;
  }
  throw std::invalid_argument(std::string(op) + ": no " + std::string(reduce_op_name(r)) + " reduction of " +
                              std::string(dtype_name(t)));
}

uint64_t host_id() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return std::hash<std::string>{}(name);
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclState> s, int size, int local_rank, int local_size)
      : s_(std::move(s)), size_(size), local_rank_(local_rank), local_size_(local_size) {}
  ~NcclCommunicator() override { s_->close(timeout()); }

  int rank() const override { return s_->rank; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string_view backend() const override { return "nccl"; }
  Allocator& memory() const override { return cuda_allocator(s_->device); }

  WorkPtr start_all_gather(const Tensor& in, const Tensor& out) override {
    check_gather("all_gather", in, out);
    check_device("all_gather", {in, out});
    const size_t bytes = in.nbytes();
    // In place when `in` is this rank's slice of `out`: NCCL recognizes it from the addresses.
    return issue("all_gather", in, {in, out}, "ncclAllGather", bytes != 0, [&](ncclComm_t c, cudaStream_t st) {
      return ncclAllGather(in.device_ptr(), out.device_ptr(), bytes, ncclUint8, c, st);
    });
  }

  WorkPtr start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_gather("reduce_scatter", out, in);
    check_device("reduce_scatter", {in, out});
    const ncclDataType_t t = reduce_type("reduce_scatter", in.dtype(), op);
    const size_t count = static_cast<size_t>(out.numel());
    // In place when `out` is this rank's slice of `in` (out == in + rank * count), as NCCL defines it.
    return issue("reduce_scatter", out, {in, out}, "ncclReduceScatter", count != 0, [&](ncclComm_t c, cudaStream_t st) {
      return ncclReduceScatter(in.device_ptr(), out.device_ptr(), count, t, nccl_op(op), c, st);
    });
  }

  WorkPtr start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_same("all_reduce", in, out);
    check_device("all_reduce", {in, out});
    const ncclDataType_t t = reduce_type("all_reduce", in.dtype(), op);
    const size_t count = static_cast<size_t>(in.numel());
    return issue("all_reduce", in, {in, out}, "ncclAllReduce", count != 0, [&](ncclComm_t c, cudaStream_t st) {
      return ncclAllReduce(in.device_ptr(), out.device_ptr(), count, t, nccl_op(op), c, st);
    });
  }

  WorkPtr start_broadcast(const Tensor& buf, int root) override {
    if (root < 0 || root >= size_)
      throw std::invalid_argument("broadcast: root " + std::to_string(root) + " outside [0, " + std::to_string(size_) + ")");
    if (!buf.defined()) throw std::invalid_argument("broadcast: undefined buffer");
    check_device("broadcast", {buf});
    const size_t bytes = buf.nbytes();
    return issue("broadcast", buf, {buf}, "ncclBroadcast", bytes != 0, [&](ncclComm_t c, cudaStream_t st) {
      return ncclBroadcast(buf.device_ptr(), buf.device_ptr(), bytes, ncclUint8, root, c, st);
    });
  }

  WorkPtr start_barrier() override {
    void* p = s_->barrier_buf.device_ptr();
    return issue("barrier", Tensor(), {}, "ncclAllReduce", true, [&](ncclComm_t c, cudaStream_t st) {
      return ncclAllReduce(p, p, 1, ncclInt32, ncclSum, c, st);
    });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    if (!kHaveSplit)
      throw CommError(rank_prefix(rank()) + "split needs NCCL 2.18 (ncclCommSplit); this build has NCCL " +
                      std::to_string(NCCL_VERSION_CODE));
    if (color < 0) throw std::invalid_argument("split: color " + std::to_string(color) + " is negative");
    // NCCL does not say which ranks of the new communicator share a host, so every rank's color,
    // key and host go around first; the new ranks are those of one color ordered by key, then by
    // rank, as in MPI_Comm_split and ncclCommSplit.
    constexpr int64_t kFields = 4;
    Allocator& dev = cuda_allocator(s_->device);
    const Tensor mine = Tensor::empty({kFields}, DType::i32, MemCategory::communication, dev);
    const Tensor all = Tensor::empty({kFields * size_}, DType::i32, MemCategory::communication, dev);
    const uint64_t host = host_id();
    const int32_t info[kFields] = {color, key, static_cast<int32_t>(static_cast<uint32_t>(host)),
                                   static_cast<int32_t>(static_cast<uint32_t>(host >> 32))};
    std::vector<int32_t> table(static_cast<size_t>(kFields * size_));
    {
      CudaDeviceGuard on(s_->device);
      check_cuda(cudaMemcpy(mine.device_ptr(), info, sizeof info, cudaMemcpyHostToDevice), rank(), "split: cudaMemcpy");
      all_gather(mine, all);
      check_cuda(cudaMemcpy(table.data(), all.device_ptr(), all.nbytes(), cudaMemcpyDeviceToHost), rank(),
                 "split: cudaMemcpy");
    }
    auto field = [&](int r, int f) { return table[static_cast<size_t>(r * kFields + f)]; };
    std::vector<int> members;
    for (int r = 0; r < size_; ++r)
      if (field(r, 0) == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return field(a, 1) < field(b, 1); });
    int local_rank = 0, local_size = 0, new_rank = -1;
    for (int i = 0; i < static_cast<int>(members.size()); ++i) {
      const int r = members[static_cast<size_t>(i)];
      if (r == rank()) new_rank = i;
      if (field(r, 2) == info[2] && field(r, 3) == info[3]) {
        if (new_rank < 0) ++local_rank;
        ++local_size;
      }
    }

    CudaDeviceGuard on(s_->device);
    ncclComm_t sub = nullptr;
    {
      std::lock_guard lock(s_->m);
      if (!s_->comm.get()) throw CommError(rank_prefix(rank()) + "split: " + s_->ended);
      check_nccl(comm_split(s_->comm.get(), color, key, &sub), rank(), "ncclCommSplit", s_->comm.get());
    }
    auto state = std::make_shared<NcclState>(new_rank, s_->device, sub);
    int nccl_rank = -1, nccl_size = 0;
    check_nccl(ncclCommUserRank(sub, &nccl_rank), rank(), "ncclCommUserRank", sub);
    check_nccl(ncclCommCount(sub, &nccl_size), rank(), "ncclCommCount", sub);
    if (nccl_rank != new_rank || nccl_size != static_cast<int>(members.size()))
      throw CommError(rank_prefix(rank()) + "split: NCCL made this rank " + std::to_string(nccl_rank) + " of " +
                      std::to_string(nccl_size) + ", the color/key order " + std::to_string(new_rank) + " of " +
                      std::to_string(members.size()));
    return std::make_unique<NcclCommunicator>(std::move(state), nccl_size, local_rank, local_size);
  }

 private:
  // Buffers live on this communicator's device; a host tensor is a caller's mistake, not a copy
  // to make behind its back.
  void check_device(const char* op, std::initializer_list<std::reference_wrapper<const Tensor>> tensors) const {
    for (const Tensor& t : tensors) {
      if (t.device() != Device::cuda)
        throw std::invalid_argument(std::string(op) + ": the NCCL communicator takes device (cuda) tensors, not a " +
                                    std::string(device_name(t.device())) + " tensor " + shape_str(t.shape()));
      if (!t.nbytes()) continue;
      cudaPointerAttributes a{};
      if (cudaPointerGetAttributes(&a, t.device_ptr()) != cudaSuccess) {
        cudaGetLastError();
        continue;  // not CUDA's to describe; NCCL reports it if it matters
      }
      if (a.type == cudaMemoryTypeDevice && a.device != s_->device)
        throw std::invalid_argument(std::string(op) + ": a buffer on cuda:" + std::to_string(a.device) +
                                    ", the communicator on cuda:" + std::to_string(s_->device));
    }
  }

  // Enqueues `call` on the communicator's stream behind the default stream's work and returns a
  // Work that completes with it. `run` is false for an empty buffer: nothing to move, but the Work
  // still completes in issue order.
  template <class Call>
  WorkPtr issue(const char* name, const Tensor& described, std::vector<Tensor> keep, const char* nccl_name, bool run,
                Call&& call) {
    std::string what = described.defined() ? std::string(name) + " of " + std::to_string(described.numel()) + " " +
                                                 std::string(dtype_name(described.dtype()))
                                           : std::string(name);
    const int r = rank();
    CudaDeviceGuard on(s_->device);
    try {
      cuda::Event done;
      {
        std::lock_guard lock(s_->m);
        const ncclComm_t c = s_->comm.get();
        if (!c) throw CommError(rank_prefix(r) + what + ": " + s_->ended);
        const cudaStream_t st = s_->stream.get();
        // [Note: NCCL stream ordering] nullptr is the default stream of the current device.
        s_->ready.record(nullptr);
        s_->ready.wait_on(st);
        if (run) check_nccl(call(c, st), r, std::string(nccl_name) + " (" + what + ")", c);
        done.record(st);
      }
      return std::make_shared<NcclWork>(s_, std::move(done), what, std::move(keep), timeout());
    } catch (const cuda::CudaError& e) {
      throw CommError(rank_prefix(r) + what + ": " + e.what());
    }
  }

  std::shared_ptr<NcclState> s_;
  int size_, local_rank_, local_size_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap) {
  const int rank = bootstrap.rank(), size = bootstrap.size();
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw CommError(rank_prefix(rank) + "the NCCL communicator needs a CUDA device; this process sees none" +
                    (e != cudaSuccess ? " (" + cuda_error(e) + ")" : std::string()));
  }
  const int device = bootstrap.local_rank() % count;
  // For the thread, not only the calls below: the rank's tensors and kernels belong on this device.
  check_cuda(cudaSetDevice(device), rank, "cudaSetDevice(" + std::to_string(device) + ")");

  ncclUniqueId id{};
  const Tensor wire = Tensor::empty({kIdElements}, DType::u16, MemCategory::communication);
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), rank, "ncclGetUniqueId");
    std::memcpy(wire.raw(), &id, sizeof id);
  }
  bootstrap.broadcast(wire, 0);
  std::memcpy(&id, wire.raw(), sizeof id);

  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, size, id, rank), rank,
             "ncclCommInitRank (cuda:" + std::to_string(device) + ", " + std::to_string(size) + " ranks)");
  auto state = std::make_shared<NcclState>(rank, device, comm);
  return std::make_unique<NcclCommunicator>(std::move(state), size, bootstrap.local_rank(), bootstrap.local_size());
}

}  // namespace zt
