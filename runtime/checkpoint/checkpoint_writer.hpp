// Writes one rank file of a checkpoint ([Note: checkpoint layout] in runtime/checkpoint/checkpoint.hpp) at the
// disk's speed: [Note: direct checkpoint writes].
//
// [Note: direct checkpoint writes] Every region starts at a multiple of 4096 bytes in the file,
// so it can be written with O_DIRECT: the bytes go from a few page-aligned staging buffers
// straight to the device, without first filling the page cache and then flushing it at fsync
// (which halved the save's bandwidth). Pieces of a region are copied into the region's staging
// buffer (the checksum taken in the same pass, while the bytes are in cache); a full buffer is
// written through the io_uring engine while the next fills, several buffers in flight. The tail of
// a region is padded with zeros to the alignment. Regions may be open together (offloaded states
// arrive sub-group by sub-group: master, m and v interleaved), each with its buffer. Where the
// build has no io_uring engine or the kernel refuses it, the same buffers are written with
// pwrite; where the file system refuses O_DIRECT, through the page cache (IoFile warns once).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "offload/aio_config.hpp"
#include "offload/checksum.hpp"

namespace zt {

class RankFileWriter {
 public:
  static constexpr uint64_t kAlignment = 4096;

  // Creates `path`. regions[i] = (offset, bytes): offsets multiples of kAlignment, regions apart.
  // CheckpointError naming the path if it cannot be created.
  RankFileWriter(const std::string& path, std::vector<std::pair<uint64_t, uint64_t>> regions, const AioConfig& aio);
  ~RankFileWriter();  // waits for writes in flight (after a failure) before the buffers go
  RankFileWriter(const RankFileWriter&) = delete;
  RankFileWriter& operator=(const RankFileWriter&) = delete;

  // Appends n bytes to region `id` (its pieces come in order and back to back), adding them to
  // `sum` on the way. CheckpointError naming the path on a write error (a full disk, ...).
  void append(size_t id, const void* data, size_t n, Checksum& sum);
  // Writes what is staged, waits for every write and fsyncs. CheckpointError if a region got
  // fewer bytes than it has.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt
