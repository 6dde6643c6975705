// Plain positioned file I/O for checkpoints and model files: a file descriptor that closes itself,
// whose errors are CheckpointErrors naming the path and errno, the fsync-and-rename steps a
// crash-safe write needs, and a file written whole under a temporary name ([Note: replacing a
// file]).
//
// [Note: replacing a file] A file written whole (train.save_model, `ztrain export`'s output, the
// trace, a checkpoint's meta.json and `latest`) goes to a temporary file beside its target (the
// same folder, so the same file system and an atomic rename), is fsynced and renamed over the
// target: a reader never sees half a file, and a failure leaves the old one. The temporary name is
// new (target.tmp-<pid>-<n>, created with O_EXCL), so no other file is clobbered, and it is
// removed when the write fails, or when a signal ends the run ([Note: scratch paths] in
// offload/scratch_paths.hpp). A killed process (SIGKILL, a crash) leaves its temporary file: a
// writer that alone writes into a folder (an export, `ztrain tokenize`, train.save_model) sweeps
// such files of dead processes from it first (remove_stale_temporaries). A target that exists and is not a regular file (a device, a
// folder, a FIFO) is refused: the rename would replace the node itself (as root, /dev/full became
// a plain file). A symbolic link is followed: the file it names is replaced, the link stays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "offload/scratch_paths.hpp"

namespace zt {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CheckpointFile {
 public:
  // open(2) flags; created files get mode 0644. `what` begins every error message ("checkpoint",
  // or the output's key: "train.save_model").
  CheckpointFile(const std::string& path, int flags, std::string what = "checkpoint");
  ~CheckpointFile();
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  void write_at(const void* p, size_t n, uint64_t off) const;
  // Writes at the end of a file opened with O_APPEND, in one write(2) where the kernel takes it
  // whole (a record never interleaves with another writer's, nor is cut by a kill between calls).
  void append(const void* p, size_t n) const;
  // Reads n bytes at off; false at the end of the file before n bytes.
  bool read_at(void* p, size_t n, uint64_t off) const;
  void sync() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_, what_;
  int fd_;
};

// CheckpointError "<what>: <action> '<path>': <strerror(errno)>".
[[noreturn]] void fail_errno(const std::string& action, const std::string& path, const std::string& what = "checkpoint");
void sync_dir(const std::string& dir);
// Writes `text` to `path` through a ReplacedFile; errors name `what` (the file's role).
void write_atomically(const std::string& path, const std::string& text, const std::string& what = "checkpoint");
// Rewrites `path` whole (through write_atomically) with the lines keep() accepts, in order; a last
// line without its newline (a write a kill cut short) goes. How a resumed run cuts a file it
// continues back to the step it resumed at (train.metrics, the CSV monitor's files).
void keep_lines(const std::string& path, const std::function<bool(const std::string&)>& keep, const std::string& what);
// Renames `from` over `to`, then fsyncs the folder of `to`.
void rename_synced(const std::string& from, const std::string& to);

// Where a write to `target` lands: the file a symbolic link names, else `target` itself.
std::string write_target(const std::string& target);
// CheckpointError "<what>: '<target>' is a <kind>, not a regular file: ..." when `target` exists
// and is not a regular file (after following links); nothing otherwise.
void check_replaceable(const std::string& target, const std::string& what);
// Creates the folders above `file` that are missing; CheckpointError naming the folder and errno.
void create_parent(const std::string& file, const std::string& what);
// `path` absolute, with links and `..` resolved as far as it exists.
std::filesystem::path resolved_path(const std::string& path);
// Whether `path` is `folder` or lies beneath it, compared resolved (neither needs to exist).
bool lies_within(const std::string& path, const std::string& folder);
// Removes from `folder` (not below it) the temporary files of [Note: replacing a file]
// (NAME.tmp-<pid>-<n>) whose process no longer runs on this host; returns how many. Only for a
// folder that one process writes at a time: a live writer on another host sharing it is not seen.
int remove_stale_temporaries(const std::string& folder);

// [Note: replacing a file]: creates the folders above `target` and a new temporary file beside
// it; commit() fsyncs it and renames it over the target. Destroyed uncommitted, it removes the
// temporary file. Errors name `what` and the path.
class ReplacedFile {
 public:
  ReplacedFile(const std::string& target, const std::string& what);
  ~ReplacedFile();
  ReplacedFile(const ReplacedFile&) = delete;
  ReplacedFile& operator=(const ReplacedFile&) = delete;

  CheckpointFile& file() { return *file_; }
  // For writers with their own stream on the temporary file (its data is fsynced by commit()).
  const std::string& temp_path() const { return temp_; }
  // The whole file written: fsyncs and closes it under its temporary name, for a writer that
  // renames several files into place only once all are complete (`ztrain tokenize`'s shards).
  void close();
  // close() if not yet, then renames it over the target.
  void commit();

 private:
  std::string target_, temp_, what_;
  ScratchPaths scratch_;  // the temporary file, removed if a signal ends the run before commit()
  std::unique_ptr<CheckpointFile> file_;
  bool committed_ = false;
};

}  // namespace zt
