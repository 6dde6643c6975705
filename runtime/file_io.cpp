#include "runtime/file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace zt {

void fail_errno(const std::string& what, const std::string& path) {
  throw CheckpointError("checkpoint: " + what + " '" + path + "': " + std::strerror(errno));
}

CheckpointFile::CheckpointFile(const std::string& path, int flags)
    : path_(path), fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {
  if (fd_ < 0) fail_errno((flags & O_CREAT) ? "cannot create" : "cannot open", path);
}

CheckpointFile::~CheckpointFile() {
  if (fd_ >= 0) ::close(fd_);
}

void CheckpointFile::write_at(const void* p, size_t n, uint64_t off) const {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, b, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail_errno("cannot write", path_);
    b += w, n -= static_cast<size_t>(w), off += static_cast<uint64_t>(w);
  }
}

bool CheckpointFile::read_at(void* p, size_t n, uint64_t off) const {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, b, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail_errno("cannot read", path_);
    if (r == 0) return false;
    b += r, n -= static_cast<size_t>(r), off += static_cast<uint64_t>(r);
  }
  return true;
}

void CheckpointFile::sync() const {
  if (::fsync(fd_) != 0) fail_errno("cannot fsync", path_);
}

void sync_dir(const std::string& dir) { CheckpointFile(dir, O_RDONLY | O_DIRECTORY).sync(); }

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    CheckpointFile f(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    f.write_at(text.data(), text.size(), 0);
    f.sync();
  }
  rename_synced(tmp, path);
}

void rename_synced(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail_errno("cannot rename into", to);
  const std::string parent = std::filesystem::path(to).parent_path().string();
  sync_dir(parent.empty() ? "." : parent);
}

}  // namespace zt
