#include "runtime/checkpoint/checkpoint_writer.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>

#include "offload/io_engine.hpp"
#include "runtime/file_io.hpp"

namespace zt {

namespace {

// 8 MiB a buffer, eight of them: one region filling while the disk has several megabytes queued
// (io_uring splits each write into block_size requests, queue_depth of them in flight), and room
// for the four regions an offloaded save keeps open at once.
constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr int kBuffers = 8;
// Checksum and copy in cache-sized pieces, so the copy reads what the checksum just brought in.
constexpr size_t kChunk = size_t{256} << 10;

}  // namespace

struct RankFileWriter::Impl {
  struct Open {      // a region being written
    int buffer = -1;  // its staging buffer (-1: none yet)
    size_t filled = 0;
    uint64_t written = 0;  // bytes of the region handed to the disk
    uint64_t received = 0;
  };
  struct InFlight {
    int buffer;
    IoTransferPtr transfer;
  };

  std::string path;
  std::vector<std::pair<uint64_t, uint64_t>> regions;
  std::vector<Open> open;
  std::unique_ptr<IoEngine> engine;  // null: written with pwrite
  IoFile file;
  std::unique_ptr<CheckpointFile> plain;
  std::vector<PinnedBuffer> buffers;
  std::vector<int> free_buffers;
  std::deque<InFlight> in_flight;

  // Rethrows an I/O failure as a CheckpointError (the engine's messages name file and errno).
  template <class F> void guarded(F&& f) {
    try {
      f();
    } catch (const IoError& e) {
      throw CheckpointError(std::string("checkpoint: ") + e.what());
    }
  }

  int take_buffer() {
    if (free_buffers.empty()) retire_oldest();
    const int b = free_buffers.back();
    free_buffers.pop_back();
    return b;
  }

  void retire_oldest() {
    InFlight f = in_flight.front();
    in_flight.pop_front();
    free_buffers.push_back(f.buffer);  // back in the pool even if the write failed
    guarded([&] { f.transfer->wait(); });
  }

  // Writes region id's staged bytes (padded with zeros to the alignment) at its place.
  void submit(size_t id) {
    Open& o = open[id];
    if (o.buffer < 0 || o.filled == 0) return;
    const size_t bytes = (o.filled + kAlignment - 1) / kAlignment * kAlignment;
    char* data = buffers[size_t(o.buffer)].as<char>();
    std::memset(data + o.filled, 0, bytes - o.filled);
    const uint64_t at = regions[id].first + o.written;
    if (engine) {
      IoTransferPtr t;
      guarded([&] { t = engine->write(file, data, bytes, at); });
      in_flight.push_back({o.buffer, std::move(t)});
    } else {
      plain->write_at(data, bytes, at);
      free_buffers.push_back(o.buffer);
    }
    o.written += o.filled;
    o.buffer = -1;
    o.filled = 0;
  }

  void drain() {
    while (!in_flight.empty()) retire_oldest();
  }
};

RankFileWriter::RankFileWriter(const std::string& path, std::vector<std::pair<uint64_t, uint64_t>> regions,
                               const AioConfig& aio)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  m.regions = std::move(regions);
  m.open.resize(m.regions.size());
  if (io_engine_available()) {
    try {
      m.engine = std::make_unique<IoEngine>(aio);
    } catch (const IoError&) {
      m.engine.reset();  // the kernel refuses io_uring: plain writes of the same buffers
    }
  }
  if (m.engine) {
    m.guarded([&] { m.file = IoFile(path, true); });
  } else {
    m.plain = std::make_unique<CheckpointFile>(path, O_WRONLY | O_CREAT | O_TRUNC);
  }
  for (int b = 0; b < kBuffers; ++b) {
    m.buffers.emplace_back(kBufferBytes, false);
    m.free_buffers.push_back(b);
  }
  if (m.engine)
    for (const PinnedBuffer& b : m.buffers) m.engine->register_buffer(b);
}

RankFileWriter::~RankFileWriter() {
  for (auto& f : impl_->in_flight) {
    try {
      f.transfer->wait();
    } catch (const std::exception&) {  // reported by whoever failed first
    }
  }
}

void RankFileWriter::append(size_t id, const void* data, size_t n, Checksum& sum) {
  Impl& m = *impl_;
  Impl::Open& o = m.open.at(id);
  o.received += n;
  if (o.received > m.regions[id].second)
    throw CheckpointError("checkpoint: '" + m.path + "': a region got more bytes than its layout holds");
  const auto* src = static_cast<const char*>(data);
  while (n > 0) {
    if (o.buffer < 0) o.buffer = m.take_buffer();
    const size_t k = std::min({n, kChunk, kBufferBytes - o.filled});
    sum.update(src, k);
    std::memcpy(m.buffers[size_t(o.buffer)].as<char>() + o.filled, src, k);
    o.filled += k;
    src += k;
    n -= k;
    if (o.filled == kBufferBytes) m.submit(id);
  }
  if (o.received == m.regions[id].second) m.submit(id);  // the region is complete: its tail goes
}

void RankFileWriter::finish() {
  Impl& m = *impl_;
  for (size_t id = 0; id < m.open.size(); ++id)
    if (m.open[id].received != m.regions[id].second)
      throw CheckpointError("checkpoint: '" + m.path + "': a region was not written whole");
  m.drain();
  if (m.engine) m.guarded([&] { m.file.sync(); });
  else m.plain->sync();
}

}  // namespace zt
