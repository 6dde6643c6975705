// Sequential write and read bandwidth of the io_uring engine through O_DIRECT, as fio measures
// its own (bench/io_bench.sh runs both on the same file system): one file of --size bytes written
// from pinned memory, then read back, in transfers of --transfer bytes with --inflight of them
// outstanding. The engine keeps at most --queue-depth requests per ring in flight however many
// transfers are outstanding, so this is fio's --iodepth with one ring. No fsync: an O_DIRECT
// write is on the device when it completes, and fio --direct=1 does not sync either.
//   io_bench --dir DIR [--size BYTES] [--block-size BYTES] [--queue-depth N] [--parallel N]
//            [--repeat N] [--transfer BYTES] [--inflight N] [--mode write|read|both]
// --mode write leaves the file for a later --mode read with the same sizes (bench/io_bench.sh
// runs fio between them, so both programs see the device in the same state).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "offload/io_engine.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string dir = "/tmp";
  size_t size = size_t(1) << 30;
  size_t transfer = size_t(64) << 20;
  int inflight = 2;
  int repeat = 1;
  std::string mode = "both";  // write (and keep the file), read (the file a write left), both
  zt::AioConfig aio;
};

Args parse(int argc, char** argv) {
  Args a;
  a.aio.queue_depth = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--dir") a.dir = v;
    else if (k == "--size") a.size = std::stoull(v);
    else if (k == "--block-size") a.aio.block_size = std::stoll(v);
    else if (k == "--queue-depth") a.aio.queue_depth = std::stoi(v);
    else if (k == "--parallel") a.aio.intra_op_parallelism = std::stoi(v);
    else if (k == "--repeat") a.repeat = std::stoi(v);
    else if (k == "--transfer") a.transfer = std::stoull(v);
    else if (k == "--inflight") a.inflight = std::stoi(v);
    else if (k == "--mode") a.mode = v;
    else throw std::invalid_argument("unknown option " + k);
  }
  if (a.mode != "write" && a.mode != "read" && a.mode != "both")
    throw std::invalid_argument("--mode is write, read or both, not " + a.mode);
  if (a.size == 0 || a.transfer == 0 || a.transfer % 4096 != 0 || a.inflight < 1 || a.repeat < 1)
    throw std::invalid_argument("--size, --transfer (a multiple of 4096), --inflight and --repeat must be positive");
  return a;
}

// Seconds to move the whole file, keeping `inflight` transfers outstanding; transfer k uses
// buffer k % buffers.size().
double stream(zt::IoEngine& engine, const zt::IoFile& file, std::vector<zt::PinnedBuffer>& bufs, const Args& a,
              bool write) {
  std::deque<zt::IoTransferPtr> pending;
  const auto t0 = Clock::now();
  size_t k = 0;
  for (uint64_t off = 0; off < a.size; off += a.transfer, ++k) {
    if (pending.size() == size_t(a.inflight)) {
      pending.front()->wait();
      pending.pop_front();
    }
    const size_t n = std::min<uint64_t>(a.transfer, a.size - off);
    void* p = bufs[k % bufs.size()].data();
    pending.push_back(write ? engine.write(file, p, n, off) : engine.read(file, p, n, off));
  }
  for (auto& t : pending) t->wait();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void fill(zt::PinnedBuffer& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t w = 0; w < b.size() / 8; ++w) b.as<uint64_t>()[w] = rng();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    const bool do_write = a.mode != "read", do_read = a.mode != "write";
    zt::IoEngine engine(a.aio);
    // One buffer per outstanding transfer, registered so requests use fixed buffers.
    std::vector<zt::PinnedBuffer> bufs;
    for (int i = 0; i < a.inflight; ++i) {
      bufs.emplace_back(a.transfer);
      fill(bufs.back(), uint64_t(i));
      engine.register_buffer(bufs.back());
    }
    const std::string path = (std::filesystem::path(a.dir) / "ztrain_io_bench.bin").string();
    std::printf("# io_bench: %zu bytes, block %lld, queue depth %d, rings %d, transfers of %zu bytes, %d in flight\n",
                a.size, static_cast<long long>(a.aio.block_size), a.aio.queue_depth, a.aio.intra_op_parallelism,
                a.transfer, a.inflight);
    std::printf("# file %s\n%-4s %12s %12s\n", path.c_str(), "rep", "write GB/s", "read GB/s");
    std::vector<double> wr, rd;
    int wrong = 0;
    for (int r = 0; r < a.repeat; ++r) {
      if (do_write) std::filesystem::remove(path);  // every write pass allocates its blocks afresh, as fio's does
      zt::IoFile file(path, do_write);
      if (!file.direct())
        std::printf("# warning: %s is not O_DIRECT; reads may come from the page cache\n", a.dir.c_str());
      if (do_write) {
        // fio lays its file out before it starts the clock (fallocate=native by default): the
        // timed writes then fill allocated blocks rather than extend the file, which is the case
        // an offload file laid out at start-up is in.
        if (const int err = ::posix_fallocate(file.fd(), 0, off_t(a.size)); err != 0)
          throw zt::IoError("cannot fallocate " + std::to_string(a.size) + " bytes of " + path + ": " +
                            std::strerror(err));
        wr.push_back(double(a.size) / stream(engine, file, bufs, a, true) / 1e9);
      }
      if (do_read) {
        // Transfer k writes buffer k % inflight and reads back into it, so after the read each
        // buffer holds what it held before; cleared first, it shows whether its last read came back.
        for (auto& b : bufs) std::memset(b.data(), 0, b.size());
        rd.push_back(double(a.size) / stream(engine, file, bufs, a, false) / 1e9);
        zt::PinnedBuffer expect(a.transfer);
        const uint64_t last = (a.size - 1) / a.transfer;  // the last transfer's index
        for (size_t k = 0; k < bufs.size() && k <= last; ++k) {
          const uint64_t j = k + (last - k) / bufs.size() * bufs.size();  // the last one to use buffer k
          const size_t n = std::min<uint64_t>(a.transfer, a.size - j * a.transfer);
          fill(expect, uint64_t(k));
          wrong += std::memcmp(bufs[k].data(), expect.data(), n) != 0;
          fill(bufs[k], uint64_t(k));
        }
      }
      std::printf("%-4d %12.3f %12.3f\n", r + 1, do_write ? wr.back() : 0.0, do_read ? rd.back() : 0.0);
    }
    if (a.mode == "both") std::filesystem::remove(path);
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : v[v.size() / 2];
    };
    std::printf("median write_GBps %.3f read_GBps %.3f wrong %d\n", median(wr), median(rd), wrong);
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "io_bench: %s\n", e.what());
    return 1;
  }
}
