#include "comm/mpi_progress.hpp"

namespace zt::mpi {

std::string error_string(int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string(msg, static_cast<size_t>(len));
}

void check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw CommError(what + ": " + error_string(rc));
}

namespace {
class Request final : public Pending {
 public:
  explicit Request(MPI_Request r) : r_(r) {}
  // An abandoned collective's request stays with MPI: freeing or cancelling one is erroneous.
  bool advance() override {
    int flag = 0;
    check(MPI_Test(&r_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    return flag != 0;
  }

 private:
  MPI_Request r_;
};
}  // namespace

std::unique_ptr<Pending> pending_request(MPI_Request r) {
  if (r == MPI_REQUEST_NULL) return nullptr;
  return std::make_unique<Request>(r);
}

Progress::Progress(bool threaded, int poll_us) : poll_us_(poll_us) {
  if (threaded) thread_ = std::thread([this] { loop(); });
}

Progress::~Progress() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Progress::submit(Op op) {
  ++outstanding_;
  {
    std::lock_guard lock(m_);
    queued_.push_back(std::move(op));
  }
  cv_.notify_one();
  if (!threaded()) poll();  // start it now, in issue order
}

void Progress::poll() {
  std::lock_guard lock(drive_m_);
  drive();
}

void Progress::complete(Op& op, std::exception_ptr error) {
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

bool Progress::drive() {
  std::deque<Op> fresh;
  {
    std::lock_guard lock(m_);
    fresh.swap(queued_);
  }
  bool progressed = false;
  for (Op& op : fresh) {
    try {
      std::unique_ptr<Pending> p = op.start();
      if (!p) {
        complete(op, nullptr);
        progressed = true;
      } else {
        inflight_.emplace_back(std::move(op), std::move(p));
      }
    } catch (...) {
      complete(op, std::current_exception());
      progressed = true;
    }
  }
  for (size_t i = 0; i < inflight_.size();) {
    auto& [op, pending] = inflight_[i];
    std::exception_ptr error;
    bool done = false;
    try {
      done = pending->advance();
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(CommError(op.state->what + ": " + e.what()));
    }
    if (done || error) {
      complete(op, error);
      inflight_.erase(inflight_.begin() + static_cast<long>(i));
      progressed = true;
    } else {
      ++i;
    }
  }
  return progressed;
}

void Progress::loop() {
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

void MpiWork::wait() {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto finished = [&] { return s_->done; };
  if (progress_->threaded()) {
    std::unique_lock lock(s_->m);
    if (timeout_.count() == 0)
      s_->cv.wait(lock, finished);
    else if (!s_->cv.wait_until(lock, deadline, finished))
      timed_out();
  } else {
    // [Note: no blocking MPI call]: each poll returns, so the deadline is seen.
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

bool MpiWork::test() {
  if (!progress_->threaded()) progress_->poll();
  std::lock_guard lock(s_->m);
  if (s_->done && s_->error) std::rethrow_exception(s_->error);
  return s_->done;
}

std::chrono::steady_clock::time_point MpiWork::completed_at() const {
  std::lock_guard lock(s_->m);
  return s_->done_at;
}

void MpiWork::timed_out() const {
  throw CommError("rank " + std::to_string(s_->rank) + ": " + s_->what + " did not complete within " +
                  std::to_string(timeout_.count()) + " ms (a rank died, hangs, or issued other collectives)");
}

}  // namespace zt::mpi
