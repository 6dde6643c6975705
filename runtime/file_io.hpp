// Plain positioned file I/O for checkpoints and exports: a file descriptor that closes itself,
// whose errors are CheckpointErrors naming the path and errno, and the fsync-and-rename steps a
// crash-safe write needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace zt {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CheckpointFile {
 public:
  // open(2) flags; created files get mode 0644.
  CheckpointFile(const std::string& path, int flags);
  ~CheckpointFile();
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  void write_at(const void* p, size_t n, uint64_t off) const;
  // Reads n bytes at off; false at the end of the file before n bytes.
  bool read_at(void* p, size_t n, uint64_t off) const;
  void sync() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_;
};

[[noreturn]] void fail_errno(const std::string& what, const std::string& path);
void sync_dir(const std::string& dir);
// Writes `text` to `path` through path + ".tmp", fsynced, renamed over it.
void write_atomically(const std::string& path, const std::string& text);
// Renames `from` over `to`, then fsyncs the folder of `to`.
void rename_synced(const std::string& from, const std::string& to);

}  // namespace zt
