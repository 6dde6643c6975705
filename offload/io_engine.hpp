// The io_uring engine: asynchronous reads and writes of whole shards (or sub-groups of them)
// between page-aligned host buffers and files on NVMe. [Note: io engine]
//
// [Note: io engine] A transfer is cut into block_size requests, spread round-robin over
// intra_op_parallelism rings; each ring has a thread of its own that keeps up to queue_depth
// requests in flight (overlap_events: a new one as each completes; else in waves of queue_depth),
// submits them in one batch (single_submit: one io_uring_submit per request), waits for one
// completion and peeks the rest. A short read or write is resubmitted for the remainder, -EAGAIN
// is retried, any other error fails the transfer with an IoError naming the file, offset, length
// and errno; the other requests of a failed transfer that have not started are not started.
// Requests inside a buffer handed to register_buffer() travel as fixed buffers; files travel as
// fixed files, registered on a ring at first use and let go when the ring is next idle (so a
// closed file is not held open). Files are opened with O_DIRECT; where the file system refuses
// it (tmpfs before Linux 6.6) they fall back to buffered I/O with a one-line warning. With O_DIRECT every request's offset, length and address
// must be multiples of the file's alignment: transfers round their length up to it, so a buffer
// must have room for the rounded length (PinnedBuffer sizes are whole pages) and a file's regions
// are laid out at aligned offsets by its users.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "offload/aio_config.hpp"

namespace zt {

class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Page-aligned host memory of at least `bytes` (rounded up to whole pages), zeroed, and locked
// in memory with mlock where the limits permit (else one warning per process; the buffer still
// works). Move-only; frees on destruction.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes, bool pin = true);
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  size_t size() const { return size_; }  // the rounded size
  bool pinned() const { return locked_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  bool locked_ = false;
};

// A file the engine reads and writes: opened (created if asked) read-write with O_DIRECT, or
// buffered where O_DIRECT is refused. Errors name the path and errno. Move-only; closes on
// destruction.
class IoFile {
 public:
  IoFile() = default;
  IoFile(std::string path, bool create);
  IoFile(IoFile&& o) noexcept;
  IoFile& operator=(IoFile&& o) noexcept;
  IoFile(const IoFile&) = delete;
  IoFile& operator=(const IoFile&) = delete;
  ~IoFile();

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  bool direct() const { return direct_; }
  // Offsets, lengths and addresses of requests must be multiples of this (1 when buffered).
  size_t alignment() const { return direct_ ? kDirectAlignment : 1; }
  uint64_t size() const;           // the file's current size (fstat)
  void truncate(uint64_t bytes);   // ftruncate
  void sync();                     // fsync

  static constexpr size_t kDirectAlignment = 4096;

 private:
  friend class IoEngine;  // reads serial_

  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  uint64_t serial_ = 0;  // unique per open in this process: keys the engine's registered files
};

// One transfer in flight. wait() blocks until every request of it completed, then throws its
// IoError if one failed; test() says whether it completed (and throws likewise).
class IoTransfer {
 public:
  virtual ~IoTransfer() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
  virtual size_t bytes() const = 0;
  // When it was submitted and when its last request completed (for the --trace I/O lane).
  virtual std::chrono::steady_clock::time_point started_at() const = 0;
  virtual std::chrono::steady_clock::time_point completed_at() const = 0;
};
using IoTransferPtr = std::shared_ptr<IoTransfer>;

class IoEngine {
 public:
  // Sets up intra_op_parallelism rings of queue_depth entries and their threads; IoError if the
  // kernel refuses io_uring (the message says so) or the config is invalid (block_size not a
  // positive multiple of 4096, queue_depth or intra_op_parallelism < 1).
  explicit IoEngine(const AioConfig& cfg);
  ~IoEngine();  // waits for what is in flight, then tears the rings down
  IoEngine(const IoEngine&) = delete;
  IoEngine& operator=(const IoEngine&) = delete;

  // Makes transfers from or into `buf` use fixed buffers. At most a few dozen; call before
  // transfers that use them. A buffer must stay alive while registered (until the engine dies).
  // Returns once every ring has it, which waits for what each ring has in flight. Where the
  // kernel refuses (pinned-memory limits), one warning per process and the buffers stay plain.
  void register_buffer(const PinnedBuffer& buf);

  // Reads `bytes` at `offset` of `file` into `dst` / writes them from `src`. The file must
  // outlive the transfer. Reading past the end of the file fails with an IoError; a read whose
  // rounded length passes the end but whose `bytes` all exist succeeds. std::invalid_argument
  // if an offset or address is not aligned for the file.
  IoTransferPtr read(const IoFile& file, void* dst, size_t bytes, uint64_t offset);
  IoTransferPtr write(const IoFile& file, const void* src, size_t bytes, uint64_t offset);

  const AioConfig& config() const { return cfg_; }

 private:
  struct Impl;
  AioConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

// Whether this build has the io_uring engine (liburing found at configure time). Without it,
// IoEngine's constructor throws an IoError saying so.
bool io_engine_available();

}  // namespace zt
