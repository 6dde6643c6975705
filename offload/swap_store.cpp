#include "offload/swap_store.hpp"

#include "offload/checksum.hpp"
#include "offload/scratch_paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <utility>

namespace zt {

SwapOp& SwapOp::operator=(SwapOp&& o) noexcept {
  if (this != &o) {
    this->~SwapOp();
    io_ = std::move(o.io_);
    after_ = std::move(o.after_);
  }
  return *this;
}

SwapOp::~SwapOp() {
  if (!io_) return;
  try {
    io_->wait();
  } catch (...) {  // the error that matters is already on its way
  }
}

void SwapOp::wait() {
  if (!io_) return;
  io_->wait();
  io_.reset();
  if (after_) std::exchange(after_, nullptr)();
}

bool SwapOp::test() {
  if (!io_) return true;
  if (!io_->test()) return false;
  wait();
  return true;
}

size_t SwapStore::buffer_bytes(size_t record_bytes) {
  const size_t a = IoFile::kDirectAlignment;
  return (record_bytes + a - 1) / a * a;
}

size_t SwapStore::add(std::string name, size_t bytes) {
  records_.push_back({std::move(name), bytes, end_});
  end_ += buffer_bytes(bytes);
  added(records_.size() - 1);
  return records_.size() - 1;
}

namespace {

// Bytes charged to one accounting category for as long as it lives.
class Charge {
 public:
  Charge(MemCategory c, size_t bytes) : c_(c), bytes_(bytes) { cpu_allocator().accounting().add(c_, bytes_); }
  Charge(Charge&& o) noexcept : c_(o.c_), bytes_(std::exchange(o.bytes_, 0)) {}
  Charge& operator=(Charge&&) = delete;
  ~Charge() {
    if (bytes_) cpu_allocator().accounting().sub(c_, bytes_);
  }

 private:
  MemCategory c_;
  size_t bytes_;
};

class HostStore final : public SwapStore {
 public:
  HostStore(bool pin, MemCategory c) : pin_(pin), category_(c) {}

  void* resident(size_t id) override { return buffers_.at(id).data(); }
  SwapOp write(size_t id, const void* src) override {
    std::memcpy(buffers_.at(id).data(), src, bytes(id));
    return {};
  }
  SwapOp read(size_t id, void* dst) override {
    std::memcpy(dst, buffers_.at(id).data(), bytes(id));
    return {};
  }
  std::string where() const override { return pin_ ? "host memory (pinned)" : "host memory"; }

 private:
  void added(size_t id) override {
    buffers_.emplace_back(bytes(id), pin_);
    charges_.emplace_back(category_, buffers_.back().size());
  }

  bool pin_;
  MemCategory category_;
  std::vector<PinnedBuffer> buffers_;
  std::vector<Charge> charges_;
};

class NvmeStore final : public SwapStore {
 public:
  NvmeStore(IoEngine& engine, const std::string& root, const std::string& dir, const std::string& file_name)
      : engine_(engine) {
    namespace fs = std::filesystem;
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0)
      throw IoError("offload: nvme_path '" + root + "': " + std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) throw IoError("offload: nvme_path '" + root + "' is not a directory");
    if (::access(root.c_str(), W_OK | X_OK) != 0)
      throw IoError("offload: nvme_path '" + root + "' is not writable: " + std::strerror(errno));
    // The folders below root, one by one; removed at the end where empty (another store of the
    // run may still have its file there), and so is the file: [Note: scratch paths].
    fs::path at = root;
    for (const fs::path& part : fs::path(dir)) {
      at /= part;
      scratch_.add(at.string());
      if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST)
        throw IoError("offload: cannot create '" + at.string() + "': " + std::strerror(errno));
    }
    path_ = (at / file_name).string();
    scratch_.add(path_);
    // A write past a file-size limit (RLIMIT_FSIZE) must fail with EFBIG, as a full disk fails
    // with ENOSPC, rather than kill the process with SIGXFSZ.
    std::signal(SIGXFSZ, SIG_IGN);
    file_ = IoFile(path_, true);
    file_.truncate(0);
  }

  ~NvmeStore() override { file_ = IoFile(); }  // then scratch_ removes the file and its folders

  void* resident(size_t) override { return nullptr; }

  SwapOp write(size_t id, const void* src) override {
    const Record& r = records_.at(id);
    const uint64_t sum = checksum(src, r.bytes);
    written_.at(id) = false;  // until this write has completed
    return SwapOp(engine_.write(file_, src, r.bytes, r.offset), [this, id, sum] {
      sums_[id] = sum;
      written_[id] = true;
    });
  }

  SwapOp read(size_t id, void* dst) override {
    const Record& r = records_.at(id);
    if (!written_.at(id))
      throw std::logic_error("offload: record " + r.name + " of " + path_ + " is read before it was written");
    return SwapOp(engine_.read(file_, dst, r.bytes, r.offset), [this, id, dst] {
      const Record& rec = records_[id];
      if (checksum(dst, rec.bytes) != sums_[id])
        throw IoError("offload: swap file " + path_ + ": record " + rec.name + " (" + std::to_string(rec.bytes) +
                      " bytes at offset " + std::to_string(rec.offset) +
                      ") does not hold what was written (checksum mismatch): the file was changed behind the run");
    });
  }

  std::string where() const override { return path_; }

 private:
  void added(size_t) override {
    sums_.push_back(0);
    written_.push_back(false);
  }

  IoEngine& engine_;
  ScratchPaths scratch_;  // the folders below root and the file, removed after the file is closed
  std::string path_;
  IoFile file_;
  std::vector<uint64_t> sums_;
  std::vector<char> written_;
};

// A transfer that completes when waited for.
class PlannedTransfer final : public IoTransfer {
 public:
  explicit PlannedTransfer(size_t bytes) : bytes_(bytes) {}
  void wait() override { done_ = true; }
  bool test() override { return done_; }
  size_t bytes() const override { return bytes_; }
  std::chrono::steady_clock::time_point started_at() const override { return {}; }
  std::chrono::steady_clock::time_point completed_at() const override { return {}; }

 private:
  size_t bytes_;
  bool done_ = false;
};

class MetaStore final : public SwapStore {
 public:
  MetaStore(Allocator& memory, bool host, MemCategory c) : memory_(memory), host_(host), category_(c) {}
  ~MetaStore() override {
    for (size_t id = 0; id < memory_of_.size(); ++id)
      if (memory_of_[id]) memory_.deallocate(memory_of_[id], buffer_bytes(bytes(id)), category_);
  }

  void* resident(size_t id) override { return host_ ? memory_of_.at(id) : nullptr; }
  SwapOp write(size_t id, const void*) override { return transfer(id); }
  SwapOp read(size_t id, void*) override { return transfer(id); }
  std::string where() const override { return host_ ? "host memory (planned)" : "NVMe (planned)"; }

 private:
  SwapOp transfer(size_t id) {
    if (host_) return {};
    return SwapOp(std::make_shared<PlannedTransfer>(bytes(id)), nullptr);
  }
  void added(size_t id) override {
    memory_of_.push_back(host_ ? memory_.allocate(buffer_bytes(bytes(id)), category_) : nullptr);
  }

  Allocator& memory_;
  bool host_;
  MemCategory category_;
  std::vector<void*> memory_of_;  // by record (host)
};

}  // namespace

std::unique_ptr<SwapStore> make_meta_store(Allocator& memory, bool host, MemCategory category) {
  return std::make_unique<MetaStore>(memory, host, category);
}

std::unique_ptr<SwapStore> make_host_store(bool pin_memory, MemCategory category) {
  return std::make_unique<HostStore>(pin_memory, category);
}

std::unique_ptr<SwapStore> make_nvme_store(IoEngine& engine, const std::string& root, const std::string& dir,
                                           const std::string& file_name) {
  return std::make_unique<NvmeStore>(engine, root, dir, file_name);
}

}  // namespace zt
