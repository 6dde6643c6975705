// ScratchPaths: files and folders a run makes for itself and must not leave behind. [Note: scratch
// paths]
//
// [Note: scratch paths] Offload's swap files (<nvme_path>/ztrain-<pid>-<time>/rank<r>/*.swp) are
// scratch: the store that makes them removes them when it is destroyed. So are the temporary files
// a file written whole goes to before its rename (runtime/file_io.hpp's ReplacedFile). A run ended by SIGTERM
// or SIGINT (runtime/cli/signals.hpp) destroys nothing, so every owner of scratch paths registers
// them here while they exist, and the signal's handling removes whatever is registered before
// the process dies. Paths are registered before they are created (a signal in between finds
// nothing to remove, which is harmless), or registered and created in one step under the
// registry's lock, which the signal's removal takes and keeps until the process is gone: a file
// created by another thread just after the removal would otherwise stay. Paths are removed in the
// reverse order: files first, then their folders, each only if empty (another owner may still
// have a file there).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace zt {

class ScratchPaths {
 public:
  ScratchPaths();  // registered, holding nothing yet
  ~ScratchPaths();  // removes what it holds, newest first, and unregisters
  ScratchPaths(const ScratchPaths&) = delete;
  ScratchPaths& operator=(const ScratchPaths&) = delete;

  // A file, or a folder (removed only when empty), to remove at the end; before creating it.
  void add(std::string path);
  // The same, and `create` makes it while no signal's removal can run (see the note).
  void add(std::string path, const std::function<void()>& create);
  // Forgets every path without removing it: they are scratch no longer (renamed into place).
  void keep();

 private:
  friend size_t remove_scratch_paths();
  void remove_locked();  // with the registry's lock held
  std::vector<std::string> paths_;
};

// Removes every registered path, newest owner first (for the end of a run by a signal: the
// owners are never destroyed); returns how many were registered. Safe to call from any thread,
// not from a signal handler. The registry stays locked: nothing is registered (or created through
// add) after it, so the caller must be ending the process.
size_t remove_scratch_paths();

}  // namespace zt
