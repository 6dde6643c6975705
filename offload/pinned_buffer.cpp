// PinnedBuffer: page-aligned, zeroed host memory, locked with mlock where the limits allow.
// Needs no io_uring, so it is built with or without liburing.
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "offload/io_engine.hpp"

namespace zt {

namespace {

// Unpinned buffers still work (the kernel pins pages for the duration of each O_DIRECT request),
// so a refused mlock is worth one line per process, not one per buffer.
void warn_mlock_refused(size_t bytes, int err) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  rlimit lim{};
  std::string limit = "unknown";
  if (::getrlimit(RLIMIT_MEMLOCK, &lim) == 0)
    limit = lim.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(lim.rlim_cur) + " bytes";
  std::fprintf(stderr,
               "ztrain: warning: mlock of %zu bytes refused (RLIMIT_MEMLOCK %s: %s): offload buffers are not "
               "pinned\n",
               bytes, limit.c_str(), std::strerror(err));
}

}  // namespace

PinnedBuffer::PinnedBuffer(size_t bytes, bool pin) {
  if (bytes == 0) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t rounded = (bytes + page - 1) / page * page;
  void* p = nullptr;
  if (const int err = ::posix_memalign(&p, page, rounded); err != 0)
    throw IoError("cannot allocate " + std::to_string(rounded) + " bytes of page-aligned memory: " +
                  std::strerror(err));
  std::memset(p, 0, rounded);
  data_ = p;
  size_ = rounded;
  if (pin) {
    if (::mlock(data_, size_) == 0)
      locked_ = true;
    else
      warn_mlock_refused(size_, errno);
  }
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      locked_(std::exchange(o.locked_, false)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    PinnedBuffer old(std::move(*this));  // frees what this held at scope exit
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    locked_ = std::exchange(o.locked_, false);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (!data_) return;
  if (locked_) ::munlock(data_, size_);
  std::free(data_);
}

}  // namespace zt
