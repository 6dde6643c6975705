// Communicator: the collectives every sharded step runs on. Implementations are chosen at run
// time: SelfCommunicator (one rank, no MPI), MpiCommunicator (host buffers) and NcclCommunicator
// (device buffers). Buffers are Tensors; counts are in elements of the tensor's dtype.
//
// [Note: collective shapes] With n = size() and r = rank():
//   all_gather(in, out):      in has c elements, out n*c; rank j's input lands at out[j*c, (j+1)*c).
//                             In place when in is the view out[r*c, (r+1)*c).
//   reduce_scatter(in, out):  in has n*c elements, out c; out = reduction over ranks of
//                             in[r*c, (r+1)*c). In place when out is that view of in.
//   all_reduce(in, out):      same count; in place when in and out are the same memory.
//   broadcast(buf, root):     root's buf everywhere.
// Reductions of bf16 and f16 accumulate in f32 and round once, at the end.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "tensor/tensor.hpp"

namespace zt {

enum class ReduceOp { sum, avg, max };

// How asynchronous operations move while the caller computes ([Note: MPI progress] in
// comm/mpi_communicator.hpp): a progress thread of the communicator's own, or the caller's
// test()/wait() calls. Only MPI has the choice; the others report `thread` (their work moves by
// itself).
enum class CommProgress { thread, poll };
std::string_view reduce_op_name(ReduceOp op);

// A collective that failed or did not complete in time; what() names the rank and the operation.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An operation in flight. wait() returns once it completed (rethrowing its error), or throws
// CommError when it has not completed within the communicator's timeout; test() never blocks.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
  // When the operation completed, where the backend knows (an MPI progress thread sees it
  // complete before anyone asks); a default time_point where it does not. For traces.
  virtual std::chrono::steady_clock::time_point completed_at() const { return {}; }
};
using WorkPtr = std::shared_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks on this host (MPI_COMM_TYPE_SHARED): the device index and the ranks sharing memory.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual std::string_view backend() const = 0;  // "self", "mpi", "nccl"
  // Where this communicator's buffers live: host memory, or a device's (NCCL). The ZeRO engine
  // keeps its units there, so the model computes on that device.
  virtual Allocator& memory() const { return cpu_allocator(); }

  // Asynchronous collectives; many may be outstanding. Buffers must stay alive and untouched
  // until the Work completes. Operations start in the order they were issued, which must be the
  // same on every rank. Each counts its bytes sent ([Note: bytes sent]).
  WorkPtr all_gather_async(const Tensor& in, const Tensor& out);
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op);
  WorkPtr all_reduce_async(const Tensor& in, const Tensor& out, ReduceOp op);
  WorkPtr broadcast_async(const Tensor& buf, int root);
  WorkPtr barrier_async() { return start_barrier(); }

  // [Note: bytes sent] What this rank sends over this communicator, counted as a ring algorithm
  // sends it (nccl-tests' bus bandwidth): an all-gather or a reduce-scatter (n-1) shards, an
  // all-reduce 2(n-1)/n of the buffer, a broadcast the buffer; nothing on one rank. The measure
  // of a group's traffic whatever algorithm the backend picks; since the communicator was made.
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }

  // Blocking forms. These also take buffers outside memory() (host metadata over NCCL: flags,
  // checksums, ids), which travel through copies in memory().
  void all_gather(const Tensor& in, const Tensor& out);
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) { reduce_scatter_async(in, out, op)->wait(); }
  void all_reduce(const Tensor& in, const Tensor& out, ReduceOp op);
  void all_reduce(const Tensor& buf, ReduceOp op) { all_reduce(buf, buf, op); }
  // One host value reduced over the ranks (a norm, a flag, a loss).
  float all_reduce_value(float v, ReduceOp op);
  void broadcast(const Tensor& buf, int root);
  void barrier() { barrier_async()->wait(); }

  // Ranks with the same color form a new communicator, ordered by key then by rank (MPI_Comm_split).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  virtual CommProgress progress() const { return CommProgress::thread; }
  // Switches the progress mode; only while no operation is in flight (throws std::logic_error).
  virtual void set_progress(CommProgress) {}

  // How long wait() lets an operation run before it ends the job (0: forever).
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 protected:
  // The backend's collectives, behind the public forms that count their bytes.
  virtual WorkPtr start_all_gather(const Tensor& in, const Tensor& out) = 0;
  virtual WorkPtr start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) = 0;
  virtual WorkPtr start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op) = 0;
  virtual WorkPtr start_broadcast(const Tensor& buf, int root) = 0;
  virtual WorkPtr start_barrier() = 0;

  // Checks the shapes of [Note: collective shapes]; throws std::invalid_argument naming `op`.
  void check_gather(const char* op, const Tensor& small, const Tensor& large) const;
  void check_same(const char* op, const Tensor& in, const Tensor& out) const;
  // Reductions exist for f32, bf16, f16 and i32 (no avg of i32), on every backend alike.
  static void check_reducible(const char* op, DType t, ReduceOp r);

 private:
  void count_sent(uint64_t bytes) { bytes_sent_.fetch_add(bytes, std::memory_order_relaxed); }

  std::chrono::milliseconds timeout_{std::chrono::minutes(5)};
  std::atomic<uint64_t> bytes_sent_{0};
};

// One rank, no MPI: collectives are copies. Lets ztrain run without mpirun and embed in programs
// that do not use MPI.
std::unique_ptr<Communicator> make_self_communicator();

}  // namespace zt
