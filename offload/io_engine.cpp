// The io_uring engine. [Note: io engine] in io_engine.hpp describes what it does; here is how.
//
// A transfer becomes one Transfer (the shared state its IoTransferPtr points to) holding all its
// requests in one vector, so a transfer costs one allocation whatever its size. Each ring gets one
// queue entry per transfer (its requests are every intra_op_parallelism-th one), and its worker
// thread takes requests from the queue into a fixed table of queue_depth slots, so nothing is
// allocated per request. The worker is the only thread that touches its io_uring: it creates it,
// registers buffers and files on it, submits, reaps and tears it down; other threads only append
// to its queue under its mutex.
#include <liburing.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "offload/errno_text.hpp"
#include "offload/io_engine.hpp"

namespace zt {

namespace {

using Clock = std::chrono::steady_clock;
using detail::errno_text;

// Registered-file slots per ring: enough for the files one training run keeps open; past that, a
// slot whose file has nothing in flight is reused, else the plain descriptor is used.
constexpr unsigned kFileSlots = 64;
// The kernel refuses to register a single buffer over 1 GiB, so larger ones register in pieces.
constexpr size_t kMaxRegisteredPiece = size_t(1) << 30;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// One block_size piece of a transfer. `len` is rounded up to the file's alignment; `need` is how
// much of it the caller asked for (less than `len` only in the last request of a transfer whose
// length was rounded), so a read that meets the end of the file after `need` bytes is complete.
struct Request {
  char* addr = nullptr;
  uint64_t offset = 0;
  uint32_t len = 0;
  uint32_t need = 0;
  uint32_t done = 0;
};

class Transfer final : public IoTransfer {
 public:
  Transfer(const IoFile& file, bool is_write, size_t bytes)
      : path(file.path()), fd(file.fd()), direct(file.direct()), is_write(is_write), bytes_(bytes),
        started_(Clock::now()) {}

  void wait() override {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return outstanding_ == 0; });
    if (!error_.empty()) throw IoError(error_);
  }
  bool test() override {
    std::lock_guard lk(mu_);
    if (outstanding_ > 0) return false;
    if (!error_.empty()) throw IoError(error_);
    return true;
  }
  size_t bytes() const override { return bytes_; }
  Clock::time_point started_at() const override { return started_; }
  Clock::time_point completed_at() const override {
    std::lock_guard lk(mu_);
    return completed_;
  }

  // Called by the workers: `n` requests are over, failed with `error` if it is not empty. The
  // first error is the one reported; the requests not yet started are then skipped.
  void finish(size_t n, std::string error = {}) {
    std::lock_guard lk(mu_);
    if (!error.empty() && error_.empty()) {
      error_ = std::move(error);
      failed.store(true, std::memory_order_relaxed);
    }
    outstanding_ -= n;
    if (outstanding_ == 0) {
      completed_ = Clock::now();
      cv_.notify_all();
    }
  }
  void set_outstanding(size_t n) { outstanding_ = n; }  // before any worker sees it

  // What a request failed on, naming the file, the range and why.
  std::string describe(const Request& r, const std::string& why) const {
    return std::string("io_uring ") + (is_write ? "write" : "read") + " of " + std::to_string(r.len - r.done) +
           " bytes at offset " + std::to_string(r.offset + r.done) + " of " + path + ": " + why;
  }

  const std::string path;
  const int fd;
  uint64_t file_serial = 0;
  const bool direct;
  const bool is_write;
  std::vector<Request> requests;
  std::atomic<bool> failed{false};

 private:
  const size_t bytes_;
  const Clock::time_point started_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t outstanding_ = 0;
  std::string error_;
  Clock::time_point completed_{};
};

// One ring and its worker thread. The public part (queue, stop, the buffer list to register) is
// guarded by mu; the rest belongs to the worker thread alone.
class Ring {
 public:
  explicit Ring(const AioConfig& cfg) : cfg_(cfg), slots_(size_t(cfg.queue_depth)) {
    for (int i = cfg.queue_depth - 1; i >= 0; --i) free_slots_.push_back(i);
    thread_ = std::thread([this] { run(); });
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return init_state_ != InitState::pending; });
  }
  ~Ring() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    work_cv_.notify_one();
    thread_.join();
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // Empty if the ring came up, else why not.
  const std::string& init_error() const { return init_error_; }

  // Requests first, first + stride, ... of `t`.
  void enqueue(std::shared_ptr<Transfer> t, size_t first, size_t stride) {
    {
      std::lock_guard lk(mu_);
      queue_.push_back(Work{std::move(t), first, stride});
    }
    work_cv_.notify_one();
  }

  // Replaces the registered buffer table with `bufs` and returns once the worker has done it
  // (which it does when nothing is in flight).
  void register_buffers(std::vector<iovec> bufs) {
    std::unique_lock lk(mu_);
    wanted_buffers_ = std::move(bufs);
    const uint64_t gen = ++wanted_gen_;
    work_cv_.notify_one();
    done_cv_.wait(lk, [&] { return done_gen_ >= gen; });
  }

 private:
  struct Work {
    std::shared_ptr<Transfer> t;
    size_t next, stride;
  };
  struct Slot {
    std::shared_ptr<Transfer> t;
    Request* r = nullptr;
    int file_slot = -1;  // index in the registered file table, or -1 for the plain descriptor
  };
  struct FileSlot {
    uint64_t serial = 0;  // 0: empty
    int in_flight = 0;
    uint64_t last_use = 0;
  };
  enum class InitState { pending, ok, failed };

  void run();
  bool init_ring();
  void take_locked(std::vector<int>& taken, std::vector<std::shared_ptr<Transfer>>& skipped);
  void apply_buffers(const std::vector<iovec>& bufs);
  int file_slot_for(const Transfer& t);
  void clear_files();
  void prep(int slot, bool first);
  void submit();
  void reap();
  void complete(int slot, int res);
  void release(int slot, std::string error);

  const AioConfig cfg_;
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits for work, stop or a registration
  std::condition_variable done_cv_;  // others wait for init and registrations
  std::deque<Work> queue_;
  bool stop_ = false;
  std::vector<iovec> wanted_buffers_;
  uint64_t wanted_gen_ = 0, done_gen_ = 0;
  InitState init_state_ = InitState::pending;
  std::string init_error_;

  // The worker's own.
  io_uring uring_{};
  std::vector<Slot> slots_;
  std::vector<int> free_slots_;
  int in_flight_ = 0;
  std::vector<int> unsubmitted_;  // prepared slots not yet taken by io_uring_submit
  std::vector<iovec> registered_;
  size_t last_buffer_ = 0;  // the registered buffer the last request used: usually the next's too
  bool files_ok_ = false;
  std::vector<FileSlot> files_;
  uint64_t file_clock_ = 0;
  int files_registered_ = 0;  // slots holding a file
  std::string broken_;  // set if submitting failed for good: every later request fails with it
};

bool Ring::init_ring() {
  const unsigned entries = unsigned(cfg_.queue_depth);
  // Only this thread submits and reaps, which lets the kernel skip cross-thread wake-ups
  // (SINGLE_ISSUER) and run completion work when the worker waits (DEFER_TASKRUN, 6.1+).
  io_uring_params p{};
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int ret = io_uring_queue_init_params(entries, &uring_, &p);
  if (ret == -EINVAL) ret = io_uring_queue_init(entries, &uring_, 0);
  if (ret < 0) {
    init_error_ = "io_uring is not available: io_uring_queue_init(" + std::to_string(entries) +
                  " entries) failed: " + errno_text(-ret) +
                  (ret == -EPERM || ret == -ENOSYS ? " (io_uring disabled by sysctl kernel.io_uring_disabled, "
                                                     "a seccomp filter, or a kernel without it)"
                                                   : "");
    return false;
  }
  // Registered files spare the kernel a descriptor lookup per request; a kernel that refuses
  // them only costs that, so the plain descriptors are used without a word.
  files_ok_ = io_uring_register_files_sparse(&uring_, kFileSlots) == 0;
  if (files_ok_) files_.resize(kFileSlots);
  return true;
}

void Ring::run() {
  const bool ok = init_ring();
  {
    std::lock_guard lk(mu_);
    init_state_ = ok ? InitState::ok : InitState::failed;
  }
  done_cv_.notify_all();
  if (!ok) return;
  struct Exit {  // the ring goes when the worker does, however it leaves
    io_uring* u;
    ~Exit() { io_uring_queue_exit(u); }
  } exit_guard{&uring_};

  std::vector<int> taken;
  std::vector<std::shared_ptr<Transfer>> skipped;  // one entry per request not started
  for (;;) {
    std::optional<std::pair<std::vector<iovec>, uint64_t>> registration;
    bool drop_files = false;
    {
      std::unique_lock lk(mu_);
      for (;;) {
        // The table is replaced whole, which must not happen under requests that use it: a
        // registration waits for what is in flight and holds new requests back meanwhile.
        const bool reg_pending = wanted_gen_ != done_gen_;
        if (reg_pending && in_flight_ == 0) {
          registration.emplace(wanted_buffers_, wanted_gen_);
          break;
        }
        if (!reg_pending && (cfg_.overlap_events || in_flight_ == 0)) take_locked(taken, skipped);
        if (in_flight_ > 0 || !taken.empty() || !skipped.empty()) break;
        if (stop_ && queue_.empty()) return;
        if (files_registered_) {
          drop_files = true;
          break;
        }
        work_cv_.wait(lk);
      }
    }
    if (drop_files) {
      drop_files = false;
      clear_files();
      continue;
    }
    if (registration) {
      apply_buffers(registration->first);
      {
        std::lock_guard lk(mu_);
        done_gen_ = registration->second;
      }
      done_cv_.notify_all();
      continue;
    }
    // Requests of a transfer that already failed are not started.
    for (auto& t : skipped) t->finish(1);
    skipped.clear();
    for (int s : taken) prep(s, true);
    taken.clear();
    submit();
    if (in_flight_ > 0) reap();
  }
}

// Moves queued requests into free slots. Called with mu_ held.
void Ring::take_locked(std::vector<int>& taken, std::vector<std::shared_ptr<Transfer>>& skipped) {
  while (!free_slots_.empty() && !queue_.empty()) {
    Work& w = queue_.front();
    Request* r = &w.t->requests[w.next];
    w.next += w.stride;
    const bool last = w.next >= w.t->requests.size();
    std::shared_ptr<Transfer> t = last ? std::move(w.t) : w.t;
    if (last) queue_.pop_front();
    // Requests of a transfer that already failed are not started.
    if (t->failed.load(std::memory_order_relaxed)) {
      skipped.push_back(std::move(t));
      continue;
    }
    const int s = free_slots_.back();
    free_slots_.pop_back();
    slots_[size_t(s)].t = std::move(t);
    slots_[size_t(s)].r = r;
    taken.push_back(s);
    ++in_flight_;
  }
}

void Ring::apply_buffers(const std::vector<iovec>& bufs) {
  if (!registered_.empty()) io_uring_unregister_buffers(&uring_);
  registered_.clear();
  last_buffer_ = 0;
  if (bufs.empty()) return;
  const int ret = io_uring_register_buffers(&uring_, bufs.data(), unsigned(bufs.size()));
  if (ret == 0) {
    registered_ = bufs;
    return;
  }
  // Fixed buffers only save the kernel pinning pages per request; transfers work without them.
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    size_t bytes = 0;
    for (const iovec& v : bufs) bytes += v.iov_len;
    std::fprintf(stderr, "ztrain: warning: io_uring refused to register %zu bytes of buffers (%s): transfers use them "
                 "unregistered\n", bytes, errno_text(-ret).c_str());
  }
}

// The registered file slot for the transfer's file, registering it on first use; -1 for the
// plain descriptor.
int Ring::file_slot_for(const Transfer& t) {
  if (!files_ok_) return -1;
  ++file_clock_;
  int victim = -1;
  for (size_t i = 0; i < files_.size(); ++i) {
    FileSlot& f = files_[i];
    if (f.serial == t.file_serial) {
      f.last_use = file_clock_;
      return int(i);
    }
    if (f.in_flight == 0 && (victim < 0 || f.last_use < files_[size_t(victim)].last_use)) victim = int(i);
  }
  if (victim < 0) return -1;
  int fd = t.fd;
  if (io_uring_register_files_update(&uring_, unsigned(victim), &fd, 1) != 1) return -1;
  if (files_[size_t(victim)].serial == 0) ++files_registered_;
  files_[size_t(victim)] = FileSlot{t.file_serial, 0, file_clock_};
  return victim;
}

// A registered file holds the file open in the kernel after its IoFile closed it, keeping a
// deleted file's blocks (on tmpfs, its memory) allocated; so an idle ring lets go of them all,
// and a file is registered again at its next burst of requests.
void Ring::clear_files() {
  std::vector<int> none(files_.size(), -1);
  io_uring_register_files_update(&uring_, 0, none.data(), unsigned(none.size()));
  std::fill(files_.begin(), files_.end(), FileSlot{});
  files_registered_ = 0;
}

// Fills one SQE for what is left of the slot's request (all of it the first time).
void Ring::prep(int s, bool first) {
  Slot& slot = slots_[size_t(s)];
  const Transfer& t = *slot.t;
  const Request& r = *slot.r;
  if (first) {
    slot.file_slot = file_slot_for(t);
    if (slot.file_slot >= 0) ++files_[size_t(slot.file_slot)].in_flight;
  }
  char* addr = r.addr + r.done;
  const unsigned len = r.len - r.done;
  const uint64_t off = r.offset + r.done;

  int buf = -1;
  const auto inside = [&](size_t i) {
    const char* base = static_cast<const char*>(registered_[i].iov_base);
    return addr >= base && addr + len <= base + registered_[i].iov_len;
  };
  if (!registered_.empty()) {
    if (inside(last_buffer_)) {
      buf = int(last_buffer_);
    } else {
      for (size_t i = 0; i < registered_.size(); ++i)
        if (inside(i)) {
          buf = int(i);
          last_buffer_ = i;
          break;
        }
    }
  }

  io_uring_sqe* sqe = io_uring_get_sqe(&uring_);  // never null: at most queue_depth are prepared
  const int fd = slot.file_slot >= 0 ? slot.file_slot : t.fd;
  if (t.is_write) {
    if (buf >= 0)
      io_uring_prep_write_fixed(sqe, fd, addr, len, off, buf);
    else
      io_uring_prep_write(sqe, fd, addr, len, off);
  } else {
    if (buf >= 0)
      io_uring_prep_read_fixed(sqe, fd, addr, len, off, buf);
    else
      io_uring_prep_read(sqe, fd, addr, len, off);
  }
  if (slot.file_slot >= 0) sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(sqe, uint64_t(s));
  unsubmitted_.push_back(s);
  if (cfg_.single_submit) submit();
}

void Ring::submit() {
  while (!unsubmitted_.empty()) {
    if (!broken_.empty()) {  // nothing is submitted on a ring that failed to submit
      for (int s : unsubmitted_) release(s, slots_[size_t(s)].t->describe(*slots_[size_t(s)].r, broken_));
      unsubmitted_.clear();
      return;
    }
    const int ret = io_uring_submit(&uring_);
    if (ret >= 0) {
      const auto n = std::min<ptrdiff_t>(ret, ptrdiff_t(unsubmitted_.size()));
      unsubmitted_.erase(unsubmitted_.begin(), unsubmitted_.begin() + n);
      if (ret == 0) std::this_thread::yield();
      continue;
    }
    if (ret == -EINTR || ret == -EAGAIN || ret == -EBUSY) {
      std::this_thread::yield();
      continue;
    }
    // Every other error of io_uring_enter is a misuse of the ring, not of a request.
    broken_ = "io_uring_submit failed: " + errno_text(-ret);
  }
}

void Ring::reap() {
  io_uring_cqe* cqe = nullptr;
  const int ret = io_uring_wait_cqe(&uring_, &cqe);
  if (ret < 0) return;  // -EINTR and the like: the caller's loop comes back here
  io_uring_cqe* cqes[64];
  const unsigned n = io_uring_peek_batch_cqe(&uring_, cqes, 64);
  for (unsigned i = 0; i < n; ++i) complete(int(io_uring_cqe_get_data64(cqes[i])), cqes[i]->res);
  io_uring_cq_advance(&uring_, n);
}

void Ring::complete(int s, int res) {
  Slot& slot = slots_[size_t(s)];
  Transfer& t = *slot.t;
  Request& r = *slot.r;
  if (res == -EAGAIN || res == -EINTR) return prep(s, false);
  if (res < 0) return release(s, t.describe(r, errno_text(-res)));
  if (res == 0) {
    if (t.is_write) return release(s, t.describe(r, "the write made no progress"));
    if (r.done >= r.need) return release(s, {});
    return release(s, t.describe(r, "unexpected end of file"));
  }
  r.done += uint32_t(res);
  // A read that met the end of the file inside the rounding has all that was asked.
  if (r.done >= r.len || (!t.is_write && r.done >= r.need)) return release(s, {});
  // O_DIRECT returns a byte count that is not a multiple of the alignment only at the end of the
  // file (or at RLIMIT_FSIZE for a write); the remainder could not be requested anyway.
  if (t.direct && r.done % IoFile::kDirectAlignment != 0) {
    if (!t.is_write) return release(s, t.describe(r, "unexpected end of file"));
    return release(s, t.describe(r, "short write, and the remainder is not aligned for O_DIRECT"));
  }
  prep(s, false);  // short: the rest of it
}

// The slot's request is over (failed if `error` is not empty).
void Ring::release(int s, std::string error) {
  Slot& slot = slots_[size_t(s)];
  if (slot.file_slot >= 0) --files_[size_t(slot.file_slot)].in_flight;
  std::shared_ptr<Transfer> t = std::move(slot.t);
  slot = Slot{};
  free_slots_.push_back(s);
  --in_flight_;
  t->finish(1, std::move(error));
}

}  // namespace

struct IoEngine::Impl {
  std::vector<std::unique_ptr<Ring>> rings;
  std::mutex mu;  // guards buffers and orders registrations
  std::vector<iovec> buffers;

  IoTransferPtr start(const AioConfig& cfg, bool is_write, const IoFile& file, uint64_t file_serial, void* buf,
                      size_t bytes, uint64_t offset);
};

IoEngine::IoEngine(const AioConfig& cfg) : cfg_(cfg), impl_(std::make_unique<Impl>()) {
  if (cfg.block_size <= 0 || cfg.block_size % int64_t(IoFile::kDirectAlignment) != 0 ||
      cfg.block_size > int64_t(kMaxRegisteredPiece))
    throw IoError("aio.block_size " + std::to_string(cfg.block_size) + " is not a positive multiple of " +
                  std::to_string(IoFile::kDirectAlignment) + " up to 1 GiB");
  if (cfg.queue_depth < 1) throw IoError("aio.queue_depth " + std::to_string(cfg.queue_depth) + " is below 1");
  if (cfg.intra_op_parallelism < 1)
    throw IoError("aio.intra_op_parallelism " + std::to_string(cfg.intra_op_parallelism) + " is below 1");
  for (int i = 0; i < cfg.intra_op_parallelism; ++i) {
    impl_->rings.push_back(std::make_unique<Ring>(cfg));
    if (!impl_->rings.back()->init_error().empty()) throw IoError(impl_->rings.back()->init_error());
  }
}

IoEngine::~IoEngine() = default;  // each Ring drains its queue and what is in flight, then exits

void IoEngine::register_buffer(const PinnedBuffer& buf) {
  if (!buf.data()) return;
  std::lock_guard lk(impl_->mu);
  char* base = buf.as<char>();
  for (size_t at = 0; at < buf.size(); at += kMaxRegisteredPiece)
    impl_->buffers.push_back(iovec{base + at, std::min(kMaxRegisteredPiece, buf.size() - at)});
  for (auto& ring : impl_->rings) ring->register_buffers(impl_->buffers);
}

IoTransferPtr IoEngine::Impl::start(const AioConfig& cfg, bool is_write, const IoFile& file, uint64_t file_serial,
                                    void* buf, size_t bytes, uint64_t offset) {
  const char* op = is_write ? "write" : "read";
  const auto where = [&] {
    return std::string("io_uring ") + op + " of " + std::to_string(bytes) + " bytes at offset " +
           std::to_string(offset) + " of " + file.path();
  };
  if (file.fd() < 0) throw std::invalid_argument(where() + ": the file is not open");
  const size_t align = file.alignment();
  if (offset % align != 0)
    throw std::invalid_argument(where() + ": the offset is not a multiple of " + std::to_string(align) +
                                " (O_DIRECT)");
  if (reinterpret_cast<uintptr_t>(buf) % align != 0)
    throw std::invalid_argument(where() + ": the buffer address is not a multiple of " + std::to_string(align) +
                                " (O_DIRECT)");

  auto t = std::make_shared<Transfer>(file, is_write, bytes);
  t->file_serial = file_serial;
  const size_t len = round_up(bytes, align);
  const size_t block = size_t(cfg.block_size);
  t->requests.resize((len + block - 1) / block);
  for (size_t i = 0; i < t->requests.size(); ++i) {
    Request& r = t->requests[i];
    const size_t at = i * block;
    r.addr = static_cast<char*>(buf) + at;
    r.offset = offset + at;
    r.len = uint32_t(std::min(block, len - at));
    r.need = uint32_t(std::min<size_t>(r.len, bytes - at));
  }
  t->set_outstanding(t->requests.size());
  if (t->requests.empty()) {
    t->finish(0);
    return t;
  }
  const size_t n = std::min(rings.size(), t->requests.size());
  for (size_t i = 0; i < n; ++i) rings[i]->enqueue(t, i, rings.size());
  return t;
}

IoTransferPtr IoEngine::read(const IoFile& file, void* dst, size_t bytes, uint64_t offset) {
  return impl_->start(cfg_, false, file, file.serial_, dst, bytes, offset);
}

IoTransferPtr IoEngine::write(const IoFile& file, const void* src, size_t bytes, uint64_t offset) {
  // The engine never writes through `src`; the cast lets reads and writes share one request type.
  return impl_->start(cfg_, true, file, file.serial_, const_cast<void*>(src), bytes, offset);
}

bool io_engine_available() { return true; }

}  // namespace zt
