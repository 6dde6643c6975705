// The job's processes: how this process was launched, MPI's lifetime, the world communicator,
// rank-prefixed logging, and ending the whole job when one rank fails.
//
// [Note: failing the job] A rank that throws calls ProcessGroup::fail(): it prints
// "[rank r] error: ..." to stderr and MPI_Abort()s, and mpirun then ends every other rank, so the
// job exits non-zero naming the failed rank instead of hanging in the next collective. A rank that
// dies by a signal is noticed by mpirun itself, which ends the rest. A collective that does not
// complete within the communicator's timeout throws CommError, which ends the job the same way.
//
// [Note: ending together] MPI_Finalize waits for every rank, beyond any deadline: a rank that
// finished its run would wait there for good for one that hangs or was stopped after its last
// collective. So the ranks first meet in a barrier bounded by the world's timeout, on a
// communicator of its own (a rank still issuing the run's collectives on the world must not have
// them matched against the barrier); a rank that does not arrive in time fails the job.
//
// [Note: failing together] Some errors every rank raises at the same point: a check whose outcome
// the ranks reduced (runtime/agreed.hpp: reading the command line and the config, the checks of
// the settings, output paths, checkpoint I/O; the settings agreement), or one computed from values
// already reduced (a non-finite loss or gradient norm). No rank needs to end the others then, and
// several ranks calling MPI_Abort at once can crash mpirun itself (Open MPI 4.1 segfaults in its
// help-message aggregation, exit 139, with two ranks aborting together: a config error every rank
// saw did so about one time in two). The thrower marks such an error (mark_failing_together); the
// CLI then lets every rank end as a finished run does, through the end barrier and MPI_Finalize,
// with the error's status: the rank whose own failure it is prints it, the ranks that only learnt
// of it print nothing more.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "comm/communicator.hpp"

namespace zt {

// What the launcher told this process through its environment (Open MPI, PMIx, Slurm, MPICH/PMI).
struct LaunchInfo {
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string launcher = "none";  // "openmpi", "pmix", "slurm", "pmi" or "none"
};
LaunchInfo detect_launch();

enum class CommBackend { automatic, self, mpi };

// Writes `line` and a newline to the file descriptor in one write(2) (continuing only where a
// signal or a full pipe cut it short), so that the lines of ranks sharing a terminal or a pipe
// never interleave mid-line.
void write_line(int fd, std::string_view line);

// [Note: failing together]: the error about to be thrown is raised by every rank at this point;
// `own`: this rank's own failure (its message is the one to print), else another rank's echoed.
enum class Together { no, own, echoed };
void mark_failing_together(bool own);
// What the last mark said (Together::no if none was made).
Together failing_together();
// Back to Together::no: a library call starts afresh (runtime/api/), so an earlier call's mark
// does not describe a later error.
void forget_failing_together();

class ProcessGroup {
 public:
  // automatic: MPI when the build has it and the process was launched as one of several ranks
  // (or by mpirun at all), else self. Asking for mpi in a build without it, or being launched as
  // several ranks without MPI, is an error saying so.
  static std::unique_ptr<ProcessGroup> start(int* argc, char*** argv, CommBackend backend = CommBackend::automatic);
  // With several ranks, first waits for the others to end too ([Note: ending together]), within
  // world().timeout(); fails the job when they do not.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  Communicator& world() { return *world_; }
  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }
  bool uses_mpi() const { return mpi_; }

  // "[rank r] " when there are several ranks, "" otherwise.
  std::string prefix() const;
  void log(std::string_view line) const;  // stdout, with the prefix, in one write

  // [Note: failing the job] Never returns: several ranks abort the job, one rank exits(code).
  [[noreturn]] void fail(std::string_view what, int code = 1);

 private:
  ProcessGroup() = default;
  std::unique_ptr<Communicator> world_;
  std::unique_ptr<Communicator> ending_;  // [Note: ending together]; several MPI ranks only
  bool mpi_ = false;
};

}  // namespace zt
