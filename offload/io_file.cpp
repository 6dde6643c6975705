// IoFile: a file opened for the engine, with O_DIRECT where the file system takes it. Needs no
// io_uring, so it is built with or without liburing.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "offload/errno_text.hpp"
#include "offload/io_engine.hpp"

namespace zt {

namespace {

using detail::errno_text;

// Buffered I/O works everywhere but goes through the page cache (twice the memory traffic, and
// writes land later); one line per process says so without flooding a run with many files.
void warn_not_direct(const std::string& path) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::fprintf(stderr, "ztrain: warning: %s: the file system refuses O_DIRECT; offload files use buffered I/O\n",
               path.c_str());
}

// Identifies a file for the engine's registered-file tables: a closed file's descriptor number
// is soon reused by another file, so the number alone cannot say whether a slot is still valid.
std::atomic<uint64_t> next_serial{1};

}  // namespace

IoFile::IoFile(std::string path, bool create) : path_(std::move(path)) {
  const int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0);
  fd_ = ::open(path_.c_str(), flags | O_DIRECT, 0644);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL) {
    fd_ = ::open(path_.c_str(), flags, 0644);
    if (fd_ >= 0) warn_not_direct(path_);
  }
  if (fd_ < 0) throw IoError("cannot open " + path_ + ": " + errno_text(errno));
  serial_ = next_serial.fetch_add(1);
}

IoFile::IoFile(IoFile&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      direct_(std::exchange(o.direct_, false)),
      serial_(std::exchange(o.serial_, 0)) {}

IoFile& IoFile::operator=(IoFile&& o) noexcept {
  if (this != &o) {
    IoFile old(std::move(*this));  // closes what this held at scope exit
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    direct_ = std::exchange(o.direct_, false);
    serial_ = std::exchange(o.serial_, 0);
  }
  return *this;
}

IoFile::~IoFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t IoFile::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw IoError("cannot stat " + path_ + ": " + errno_text(errno));
  return static_cast<uint64_t>(st.st_size);
}

void IoFile::truncate(uint64_t bytes) {
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0)
    throw IoError("cannot truncate " + path_ + " to " + std::to_string(bytes) + " bytes: " + errno_text(errno));
}

void IoFile::sync() {
  if (::fsync(fd_) != 0) throw IoError("cannot fsync " + path_ + ": " + errno_text(errno));
}

}  // namespace zt
