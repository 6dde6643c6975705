// SwapStore: where a rank's offloaded flat buffers live. [Note: swap store]
//
// [Note: swap store] A store holds records of fixed sizes, declared up front (a sub-group of a
// unit's optimizer states, a unit's parameter shard); each is written whole and read whole.
// - HostStore keeps them in host memory (page-aligned, locked with pin_memory) and hands out that
//   memory to work on in place: reads and writes are copies, and the offloaded optimizer updates
//   a record where it lies.
// - NvmeStore keeps them in one file under <nvme_path>/<job>/rank<r>/, each record at an offset
//   aligned for O_DIRECT, moved by the io_uring engine. A checksum of each record is taken as it
//   is written and checked when it is read back, so a swap file truncated or changed behind the
//   store's back ends the run with an error naming the file and the record, never with wrong
//   numbers. Swap files are scratch: a run makes its own and removes them at the end; nothing
//   outside the run ever reads them.
// Memory the store holds is charged to the accounting category it was given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "offload/aio_config.hpp"
#include "offload/io_engine.hpp"
#include "tensor/allocator.hpp"

namespace zt {

// A read or write in flight. wait() returns once it completed (a read: and its checksum held),
// else throws an IoError; test() says whether it completed, and throws likewise.
class SwapOp {
 public:
  SwapOp() = default;  // already complete
  SwapOp(IoTransferPtr io, std::function<void()> after) : io_(std::move(io)), after_(std::move(after)) {}
  SwapOp(SwapOp&&) = default;
  SwapOp& operator=(SwapOp&& o) noexcept;
  // One still in flight (an error is unwinding past it) is waited for, its outcome dropped: no
  // transfer outlives the op that owns it, so no buffer is freed under the kernel's feet.
  ~SwapOp();
  void wait();
  bool test();
  bool done() const { return !io_; }
  // The transfer behind it, while in flight (null for host copies): for the trace's I/O lane.
  const IoTransferPtr& transfer() const { return io_; }

 private:
  IoTransferPtr io_;
  std::function<void()> after_;  // runs once, after the transfer completed
};

class SwapStore {
 public:
  virtual ~SwapStore() = default;

  // Declares a record of `bytes` named `name` (for errors); returns its id.
  size_t add(std::string name, size_t bytes);
  size_t count() const { return records_.size(); }
  size_t bytes(size_t id) const { return records_.at(id).bytes; }
  const std::string& name(size_t id) const { return records_.at(id).name; }
  // Bytes a buffer needs to take record `id` (its size rounded up for O_DIRECT).
  static size_t buffer_bytes(size_t record_bytes);

  // The record's memory where it can be used in place (host), else null (move it with read/write).
  virtual void* resident(size_t id) = 0;
  // Copies `src` (bytes(id) of it) into the record / the record into `dst`; a buffer given to
  // them needs buffer_bytes(bytes(id)) of room.
  virtual SwapOp write(size_t id, const void* src) = 0;
  virtual SwapOp read(size_t id, void* dst) = 0;
  // A human description for logs: "host memory (pinned)", "/nvme/job/rank0/optimizer.swp".
  virtual std::string where() const = 0;

 protected:
  struct Record {
    std::string name;
    size_t bytes = 0;
    uint64_t offset = 0;  // in the store's space, aligned to IoFile::kDirectAlignment
  };
  // Called by add() once the record is in records_ with its offset.
  virtual void added(size_t id) = 0;
  std::vector<Record> records_;
  uint64_t end_ = 0;  // the next record's offset
};

// Host memory, one buffer per record (so a record can be used in place), charged to `category`.
std::unique_ptr<SwapStore> make_host_store(bool pin_memory, MemCategory category);

// A plan's store ([Note: the meta device] in tensor/meta_allocator.hpp), moving nothing: with
// `host`, a host store's records allocated from `memory` (charged to `category` there, whole
// pages, as HostStore holds them); else an NVMe store's, holding no memory and no file, whose
// reads and writes complete only when waited for (so a write holds its buffer as long as the
// rules allow, the estimate's bound). `memory` outlives the store.
std::unique_ptr<SwapStore> make_meta_store(Allocator& memory, bool host, MemCategory category);

// A swap file `file_name` in `root`/`dir` (`root` must exist and be writable; `dir`, relative,
// is created as needed), moved by `engine`, which outlives the store. The file is removed when
// the store is destroyed, and so are the folders of `dir` that are then empty.
std::unique_ptr<SwapStore> make_nvme_store(IoEngine& engine, const std::string& root, const std::string& dir,
                                           const std::string& file_name);

}  // namespace zt
