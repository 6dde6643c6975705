// Ending on SIGTERM, SIGINT or SIGHUP without leaving scratch files behind. [Note: ending on a
// signal]
//
// [Note: ending on a signal] A run stopped by Ctrl-C (SIGINT), by `kill` or a batch system
// (SIGTERM), or by its terminal closing (SIGHUP) would die at once and leave offload's swap files
// and the temporary files of whole-file writes (a model being exported, a token shard: [Note:
// replacing a file] in runtime/file_io.hpp) behind ([Note: scratch paths] in
// offload/scratch_paths.hpp). So the signals are blocked in
// every thread (the guard blocks them in the main thread before any other thread exists, and
// threads inherit the mask) and one thread of the guard's waits for them on a signalfd. There,
// outside any signal handler, it may take locks and call anything: it removes the registered
// scratch paths, says which signal ended the run, and then dies by that same signal (its default
// action, unblocked in that thread alone), so the exit status is what the signal would have given
// (a shell's 128 + N) and mpirun reports it as such. Under mpirun a Ctrl-C reaches the ranks as
// SIGTERM. Nothing else is cleaned: a checkpoint being saved stays as a killed save leaves it
// ([Note: checkpoint layout]: `latest` names the previous one), and the next save removes its
// .tmp folder.
#pragma once

#include <memory>

namespace zt {

class SignalGuard {
 public:
  // Blocks the signals in the calling thread, which must be the only one so far, and starts the
  // waiting thread.
  SignalGuard();
  // Stops the waiting thread and unblocks the signals: one that arrived since acts as it would
  // have without the guard.
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace zt
