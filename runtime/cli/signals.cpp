#include "runtime/cli/signals.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "comm/process_group.hpp"
#include "offload/scratch_paths.hpp"

namespace zt {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

sigset_t handled() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kSignals) sigaddset(&set, s);
  return set;
}

class Fd {
 public:
  explicit Fd(int fd, const char* what) : fd_(fd) {
    if (fd_ < 0) throw std::runtime_error(std::string("signals: ") + what + ": " + std::strerror(errno));
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { ::close(fd_); }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Removes the scratch paths and dies by `sig`, as if the guard had never been there. `prefix`:
// "[rank r] " under a launcher of several ranks.
[[noreturn]] void end_by(int sig, const std::string& prefix) {
  const size_t removed = remove_scratch_paths();
  const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
  std::fprintf(stderr, "%sztrain: stopped by %s%s\n", prefix.c_str(), name,
               removed ? "; its temporary files were removed" : "");
  std::fflush(stderr);
  ::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);  // the default action ends the whole process here
  ::_exit(128 + sig);  // not reached unless someone ignores it
}

}  // namespace

struct SignalGuard::State {
  sigset_t old{};
  std::unique_ptr<Fd> signals, stop;
  std::thread waiter;
};

SignalGuard::SignalGuard() : s_(std::make_unique<State>()) {
  const sigset_t set = handled();
  if (const int e = ::pthread_sigmask(SIG_BLOCK, &set, &s_->old); e != 0)
    throw std::runtime_error(std::string("signals: cannot block SIGINT and SIGTERM: ") + std::strerror(e));
  try {
    s_->signals = std::make_unique<Fd>(::signalfd(-1, &set, SFD_CLOEXEC), "signalfd");
    s_->stop = std::make_unique<Fd>(::eventfd(0, EFD_CLOEXEC), "eventfd");
  } catch (...) {
    ::pthread_sigmask(SIG_SETMASK, &s_->old, nullptr);
    throw;
  }
  const LaunchInfo launch = detect_launch();
  std::string prefix = launch.size > 1 ? "[rank " + std::to_string(launch.rank) + "] " : "";
  s_->waiter = std::thread([sfd = s_->signals->get(), efd = s_->stop->get(), prefix = std::move(prefix)] {
    pollfd fds[2] = {{sfd, POLLIN, 0}, {efd, POLLIN, 0}};
    for (;;) {
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;  // cannot wait: the signals then act when the guard ends
      }
      if (fds[1].revents) return;
      signalfd_siginfo info{};
      if (::read(sfd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) end_by(static_cast<int>(info.ssi_signo), prefix);
    }
  });
}

SignalGuard::~SignalGuard() {
  const uint64_t one = 1;
  if (::write(s_->stop->get(), &one, sizeof one) == static_cast<ssize_t>(sizeof one)) s_->waiter.join();
  else s_->waiter.detach();  // cannot happen with an eventfd; never block the exit on it
  ::pthread_sigmask(SIG_SETMASK, &s_->old, nullptr);
}

}  // namespace zt
