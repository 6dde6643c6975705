// The swap stores ([Note: swap store]) on real files: records of any size written and read back
// through host memory and through NVMe (the io_uring engine, O_DIRECT), a swap file changed or
// truncated behind the store's back (an error naming the file and the record, never wrong
// numbers), nvme_path missing or not a folder, and the folders removed once the last store of a
// run is gone. Exits 77 (skipped) where the kernel refuses io_uring or the build has no engine,
// after the checks that need neither.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "offload/checksum.hpp"
#include "offload/swap_store.hpp"
#include "tests/test_util.hpp"

using namespace zt;
using zt::test::TempDir;

namespace {

std::unique_ptr<IoEngine> engine;  // set in main when the kernel takes io_uring

std::vector<char> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<char> v(n);
  for (char& c : v) c = static_cast<char>(rng());
  return v;
}

// Record sizes around the page: under, at, over, and a few pages and a bit.
const std::vector<size_t> kSizes = {1, 4095, 4096, 4097, 3 * 4096 + 123, 100000};

void round_trip(SwapStore& s) {
  std::vector<size_t> ids;
  for (size_t i = 0; i < kSizes.size(); ++i) ids.push_back(s.add(std::to_string(i) + "th", kSizes[i]));
  PinnedBuffer buf(SwapStore::buffer_bytes(100000));
  std::vector<SwapOp> writes;
  std::vector<PinnedBuffer> srcs;
  for (size_t i = 0; i < ids.size(); ++i) {  // all in flight at once
    const auto data = random_bytes(kSizes[i], i);
    srcs.emplace_back(kSizes[i]);
    std::memcpy(srcs.back().data(), data.data(), kSizes[i]);
    writes.push_back(s.write(ids[i], srcs.back().data()));
  }
  for (SwapOp& w : writes) w.wait();
  for (size_t i = ids.size(); i-- > 0;) {  // read back in the other order
    std::memset(buf.data(), 0x5a, buf.size());
    s.read(ids[i], buf.data()).wait();
    const auto want = random_bytes(kSizes[i], i);
    CAPTURE(kSizes[i]);
    CHECK(std::memcmp(buf.data(), want.data(), kSizes[i]) == 0);
  }
}

}  // namespace

TEST_CASE("checksum: sensitive to every byte and to the length; the same fed in pieces") {
  auto data = random_bytes(1000, 7);
  const uint64_t h = checksum(data.data(), data.size());
  CHECK(h == checksum(data.data(), data.size()));
  for (size_t at : {0, 31, 32, 500, 999}) {
    data[at] ^= 1;
    CHECK(checksum(data.data(), data.size()) != h);
    data[at] ^= 1;
  }
  CHECK(checksum(data.data(), 999) != h);
  const std::vector<char> zeros(64, 0);
  CHECK(checksum(zeros.data(), 64) != checksum(zeros.data(), 32));
  for (size_t piece : {1, 7, 31, 32, 33, 100}) {  // fed in pieces: the one-shot value
    Checksum c;
    for (size_t at = 0; at < data.size(); at += piece) c.update(data.data() + at, std::min(piece, data.size() - at));
    CAPTURE(piece);
    CHECK(c.value() == h);
  }
}

TEST_CASE("host store: records in memory, used in place") {
  const size_t before = cpu_allocator().accounting().snapshot()[MemCategory::optimizer];
  {
    auto s = make_host_store(false, MemCategory::optimizer);
    round_trip(*s);
    CHECK(s->resident(0) != nullptr);
    CHECK(s->where() == "host memory");
    // Every record is charged, in whole pages.
    CHECK(cpu_allocator().accounting().snapshot()[MemCategory::optimizer] - before >= 100000 + 4097);
  }
  CHECK(cpu_allocator().accounting().snapshot()[MemCategory::optimizer] == before);
}

TEST_CASE("nvme store: records of any size through the io_uring engine") {
  if (!engine) return;
  TempDir d;
  {
    auto s = make_nvme_store(*engine, d.path.string(), "job/rank0", "optimizer.swp");
    CHECK(s->where() == d / "job/rank0/optimizer.swp");
    CHECK(s->resident(0) == nullptr);
    round_trip(*s);
    PinnedBuffer b(4096);
    CHECK_THROWS_AS(s->read(s->add("late", 10), b.data()), std::logic_error);  // never written
  }
  CHECK_FALSE(std::filesystem::exists(d / "job"));  // the file and the folders are gone
}

TEST_CASE("nvme store: a swap file changed or truncated behind its back") {
  if (!engine) return;
  TempDir d;
  auto s = make_nvme_store(*engine, d.path.string(), "job/rank0", "optimizer.swp");
  const size_t a = s->add("unit3[0:5000]", 20000), b = s->add("unit4[0:5000]", 20000);
  PinnedBuffer buf(SwapStore::buffer_bytes(20000));
  const auto data = random_bytes(20000, 1);
  std::memcpy(buf.data(), data.data(), data.size());
  s->write(a, buf.data()).wait();
  s->write(b, buf.data()).wait();

  // One byte of the second record flipped by someone else.
  const std::string file = d / "job/rank0/optimizer.swp";
  const int fd = ::open(file.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  const off_t at = static_cast<off_t>(SwapStore::buffer_bytes(20000)) + 1234;  // record b's offset + 1234
  char c = 0;
  REQUIRE(::pread(fd, &c, 1, at) == 1);
  c = static_cast<char>(c ^ 0x10);
  REQUIRE(::pwrite(fd, &c, 1, at) == 1);
  s->read(a, buf.data()).wait();  // the first record is intact
  CHECK(std::memcmp(buf.data(), data.data(), data.size()) == 0);
  auto error_reading_b = [&] {
    try {
      s->read(b, buf.data()).wait();
    } catch (const IoError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string msg = error_reading_b();
  CHECK(msg.find(file) != std::string::npos);
  CHECK(msg.find("unit4[0:5000]") != std::string::npos);
  CHECK(msg.find("checksum mismatch") != std::string::npos);

  // Truncated to the first record: reading the second is an error naming the file.
  REQUIRE(::ftruncate(fd, static_cast<off_t>(SwapStore::buffer_bytes(20000))) == 0);
  ::close(fd);
  msg = error_reading_b();
  CHECK(msg.find(file) != std::string::npos);
  CHECK(msg.find("end of file") != std::string::npos);
}

TEST_CASE("nvme store: a bad nvme_path, and folders shared by two stores") {
  if (!engine) return;
  TempDir d;
  auto error_of = [&](const std::string& root) {
    try {
      make_nvme_store(*engine, root, "job/rank0", "x.swp");
    } catch (const IoError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Built by appending: GCC 12 -O3 warns (-Wrestrict) on "literal" + std::string.
  std::string want = "offload: nvme_path '";
  want += d / "missing";
  want += "': No such file or directory";
  CHECK(error_of(d / "missing") == want);
  const std::string file = d.write("plain", "x");
  want = "offload: nvme_path '";
  want += file;
  want += "' is not a directory";
  CHECK(error_of(file) == want);

  // The optimizer's and the parameters' stores of one run share the folder: it goes with the last.
  auto one = make_nvme_store(*engine, d.path.string(), "job/rank0", "optimizer.swp");
  auto two = make_nvme_store(*engine, d.path.string(), "job/rank0", "params.swp");
  one.reset();
  CHECK(std::filesystem::exists(d / "job/rank0/params.swp"));
  CHECK_FALSE(std::filesystem::exists(d / "job/rank0/optimizer.swp"));
  two.reset();
  CHECK_FALSE(std::filesystem::exists(d / "job"));
}

int main(int argc, char** argv) {
  if (io_engine_available()) {
    try {
      engine = std::make_unique<IoEngine>(AioConfig{});
    } catch (const IoError& e) {
      std::printf("io_uring is not available here (%s): the NVMe cases are skipped\n", e.what());
    }
  }
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (rc != 0 || ctx.shouldExit()) return rc;
  const bool skipped = !engine;
  engine.reset();
  return skipped ? 77 : 0;
}
