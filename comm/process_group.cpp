#include "comm/process_group.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <thread>

#ifdef ZT_HAVE_MPI
#include "comm/mpi_communicator.hpp"
#endif

namespace zt {

namespace {
#ifdef ZT_HAVE_MPI
constexpr bool kBuiltWithMpi = true;
// MPI's lifetime spans the process group's; held here because ProcessGroup's header does not
// know MPI.
std::unique_ptr<MpiSession>& mpi_session() {
  static std::unique_ptr<MpiSession> s;
  return s;
}
#else
constexpr bool kBuiltWithMpi = false;
#endif
}  // namespace

std::unique_ptr<ProcessGroup> ProcessGroup::start(int* argc, char*** argv, CommBackend backend) {
  const LaunchInfo launch = detect_launch();
  bool use_mpi = backend == CommBackend::mpi || (backend == CommBackend::automatic && launch.launcher != "none");
  if (use_mpi && !kBuiltWithMpi) {
    if (backend == CommBackend::mpi || launch.size > 1)
      throw CommError("launched as rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.size) +
                      " (" + launch.launcher + "), but this ztrain was built without MPI (meson -Dmpi=enabled)");
    use_mpi = false;  // one rank under a launcher: Self does the job
  }
  std::unique_ptr<ProcessGroup> pg(new ProcessGroup());
#ifdef ZT_HAVE_MPI
  if (use_mpi) {
    if (!mpi_session()) mpi_session() = std::make_unique<MpiSession>(argc, argv);
    pg->world_ = make_mpi_communicator();
    pg->mpi_ = true;
    if (pg->world_->size() > 1) {
      pg->ending_ = make_mpi_communicator();
      pg->ending_->set_progress(CommProgress::poll);  // idle until the end: no thread of its own
    }
    return pg;
  }
#endif
  (void)argc;
  (void)argv;
  pg->world_ = make_self_communicator();
  return pg;
}

ProcessGroup::~ProcessGroup() {
  if (ending_) {
    ending_->set_timeout(world_->timeout());
    try {
      ending_->barrier();
    } catch (const CommError&) {
      fail("rank " + std::to_string(rank()) + ": the other ranks did not reach the end of the run within " +
           std::to_string(world_->timeout().count()) + " ms (a rank hangs, was stopped, or runs other steps)");
    }
    ending_.reset();
  }
  world_.reset();  // its progress thread ends before MPI does
#ifdef ZT_HAVE_MPI
  if (mpi_) mpi_session().reset();
#endif
}

namespace {
std::atomic<Together> g_together{Together::no};
}  // namespace

void mark_failing_together(bool own) { g_together = own ? Together::own : Together::echoed; }
Together failing_together() { return g_together; }
void forget_failing_together() { g_together = Together::no; }

std::string ProcessGroup::prefix() const { return size() > 1 ? "[rank " + std::to_string(rank()) + "] " : ""; }

void write_line(int fd, std::string_view line) {
  std::string whole(line);
  whole += '\n';
  for (size_t done = 0; done < whole.size();) {
    const ssize_t n = ::write(fd, whole.data() + done, whole.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere left to say it
    done += static_cast<size_t>(n);
  }
}

void ProcessGroup::log(std::string_view line) const { write_line(STDOUT_FILENO, prefix() + std::string(line)); }

void ProcessGroup::fail(std::string_view what, int code) {
  write_line(STDERR_FILENO, prefix() + "error: " + std::string(what));
#ifdef ZT_HAVE_MPI
  if (mpi_ && size() > 1) {
    // [Note: failing together]: ranks that abort at once can crash mpirun, and failures that are
    // not agreed still come together: the ranks a stopped rank left waiting all time out within
    // a few milliseconds, and the stopped rank itself, continued by mpirun to be ended, finds its
    // own deadline passed. So the aborts are spread out by rank: the first one ends the job, and
    // mpirun's SIGTERM ends the later ones while they wait (their errors are said already).
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + 20 * std::min(rank(), 100)));
    mpi_abort_job(code);
  }
#endif
  std::exit(code);
}

}  // namespace zt
