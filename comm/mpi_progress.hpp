// What moves MpiCommunicator's operations ([Note: MPI progress] in comm/mpi_communicator.hpp): an
// operation in flight is a Pending that MPI advances without blocking; Progress starts operations
// in issue order and advances them, on a thread of its own or in whoever waits; MpiWork waits for
// one until the communicator's deadline. Internal to comm/: it includes mpi.h.
//
// [Note: no blocking MPI call] A collective's deadline is checked between advances, so nothing
// that runs while an operation is in flight may block in MPI: in the polled mode a blocking call
// would hold the waiting thread itself, past its deadline, and in the threaded mode it would hold
// the progress thread, so that no other operation moves and the communicator cannot end. Every
// operation is therefore made of nonblocking MPI calls (MPI_I* collectives, MPI_Isend/MPI_Irecv
// with MPI_Test), and a blocking MPI call (MPI_Comm_split, MPI_Finalize) is only made once a
// bounded operation has shown that every rank has reached it.
#pragma once

// The C API only: the deprecated C++ bindings add nothing and do not build warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"

namespace zt::mpi {

std::string error_string(int rc);
// Throws CommError "what: MPI's message" unless rc is MPI_SUCCESS.
void check(int rc, const std::string& what);

// One operation as MPI moves it: advance() makes what progress it can without blocking ([Note: no
// blocking MPI call]) and returns true once the operation completed; it throws on MPI's errors.
// Destroyed unfinished when the operation is abandoned (a timeout, the communicator ending).
class Pending {
 public:
  virtual ~Pending() = default;
  virtual bool advance() = 0;
};

// The request of one nonblocking MPI call (a collective): complete when MPI_Test says so.
std::unique_ptr<Pending> pending_request(MPI_Request r);

// Shared by a Work and whoever drives its operation.
struct OpState {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::chrono::steady_clock::time_point done_at;
  std::exception_ptr error;
  std::string what;  // "all_gather of 4096 bf16", for errors
  int rank = 0;
};

// One operation: `start` issues its MPI calls and returns what is left in flight (nullptr for an
// operation done at once); `finish` runs after completion (casts back, averages).
struct Op {
  std::function<std::unique_ptr<Pending>()> start;
  std::function<void()> finish;
  std::shared_ptr<OpState> state;
};

// In the threaded mode a thread of its own drives MPI; in the polled mode whoever waits on a Work
// (or calls poll()) does, and nothing moves between those calls.
class Progress {
 public:
  Progress(bool threaded, int poll_us);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool threaded() const { return thread_.joinable(); }
  // Operations submitted and not yet complete.
  int outstanding() const { return outstanding_.load(); }
  void submit(Op op);
  // One round in the polled mode: start what was queued, advance what is in flight.
  void poll();

 private:
  void complete(Op& op, std::exception_ptr error);
  bool drive();  // returns whether anything completed
  void loop();

  std::mutex m_;  // queued_, stop_
  std::condition_variable cv_;
  std::deque<Op> queued_;
  bool stop_ = false;
  std::mutex drive_m_;  // the polled mode's callers take turns at drive()
  std::vector<std::pair<Op, std::unique_ptr<Pending>>> inflight_;  // only the driving thread touches it
  int poll_us_;
  std::atomic<int> outstanding_{0};
  std::thread thread_;
};

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<OpState> s, std::shared_ptr<Progress> p, std::chrono::milliseconds timeout)
      : s_(std::move(s)), progress_(std::move(p)), timeout_(timeout) {}
  void wait() override;
  bool test() override;
  std::chrono::steady_clock::time_point completed_at() const override;

 private:
  [[noreturn]] void timed_out() const;
  std::shared_ptr<OpState> s_;
  std::shared_ptr<Progress> progress_;
  std::chrono::milliseconds timeout_;
};

}  // namespace zt::mpi
