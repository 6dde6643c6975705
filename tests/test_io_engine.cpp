// The io_uring engine against real files in a fresh temporary folder: data written and read back
// at several configurations, many transfers in flight, lengths that are not whole pages, the end
// of the file, argument and kernel errors (EFBIG under RLIMIT_FSIZE, in a child process), tmpfs,
// registered buffers and files. Exits 77 (skipped) where the kernel refuses io_uring or the build
// has no engine, after running the PinnedBuffer and IoFile checks that need neither.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "offload/io_engine.hpp"
#include "tests/test_util.hpp"

using zt::AioConfig;
using zt::IoEngine;
using zt::IoError;
using zt::IoFile;
using zt::IoTransferPtr;
using zt::PinnedBuffer;
using zt::test::TempDir;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

void fill_random(void* p, size_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto* b = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(rng());
}

bool same(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

AioConfig config(int64_t block, int qd, int par, bool single_submit = false, bool overlap = true) {
  AioConfig c;
  c.block_size = block;
  c.queue_depth = qd;
  c.intra_op_parallelism = par;
  c.single_submit = single_submit;
  c.overlap_events = overlap;
  return c;
}

// The message of the IoError `f` throws, or "" if it throws none.
template <typename F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("buffer: page-aligned, rounded to whole pages, zeroed, movable") {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  PinnedBuffer b(page + 1);
  CHECK(b.size() == 2 * page);
  CHECK(reinterpret_cast<uintptr_t>(b.data()) % page == 0);
  CHECK(std::all_of(b.as<unsigned char>(), b.as<unsigned char>() + b.size(), [](unsigned char c) { return c == 0; }));
  void* p = b.data();
  PinnedBuffer moved(std::move(b));
  CHECK(moved.data() == p);
  CHECK(b.data() == nullptr);
  CHECK(b.size() == 0);
  PinnedBuffer unpinned(100, false);
  CHECK(unpinned.size() == page);
  CHECK_FALSE(unpinned.pinned());
  moved = std::move(unpinned);
  CHECK(moved.size() == page);
  CHECK(PinnedBuffer(0).data() == nullptr);
}

TEST_CASE("file: opening errors name the path and the errno") {
  TempDir dir;
  const std::string missing_dir = dir / "no/such/dir/shard.bin";
  std::string msg = io_error_of([&] { IoFile f(missing_dir, true); });
  CHECK(contains(msg, missing_dir));
  CHECK(contains(msg, "No such file or directory"));
  const std::string missing = dir / "absent.bin";
  msg = io_error_of([&] { IoFile f(missing, false); });
  CHECK(contains(msg, missing));
  CHECK(contains(msg, "ENOENT"));

  IoFile f(dir / "f.bin", true);
  CHECK(f.fd() >= 0);
  f.truncate(12345);
  CHECK(f.size() == 12345);
  f.sync();
  IoFile g(std::move(f));
  CHECK(f.fd() == -1);
  CHECK(g.size() == 12345);
}

TEST_CASE("engine: the configuration is checked") {
  CHECK(contains(io_error_of([] { IoEngine e(config(1000, 8, 1)); }), "block_size"));
  CHECK(contains(io_error_of([] { IoEngine e(config(0, 8, 1)); }), "block_size"));
  CHECK(contains(io_error_of([] { IoEngine e(config(4096, 0, 1)); }), "queue_depth"));
  CHECK(contains(io_error_of([] { IoEngine e(config(4096, 8, 0)); }), "intra_op_parallelism"));
}

TEST_CASE("engine: write then read back at several configurations") {
  TempDir dir;
  struct Case {
    AioConfig cfg;
    std::string name;
  };
  const std::vector<Case> cases = {
      {config(4096, 1, 1), "4 KiB, qd 1, 1 ring"},
      {config(4096, 4, 2), "4 KiB, qd 4, 2 rings"},
      {config(4096, 32, 3), "4 KiB, qd 32, 3 rings"},
      {config(MiB, 1, 1), "1 MiB, qd 1, 1 ring"},
      {config(MiB, 4, 3), "1 MiB, qd 4, 3 rings"},
      {config(MiB, 32, 2), "1 MiB, qd 32, 2 rings"},
      {config(64 * KiB, 8, 2, true), "64 KiB, qd 8, 2 rings, single_submit"},
      {config(4096, 8, 3, false, false), "4 KiB, qd 8, 3 rings, waves"},
      {config(MiB, 4, 1, true, false), "1 MiB, qd 4, 1 ring, single_submit, waves"},
  };
  const size_t bytes = 5 * MiB + 3 * 4096, split = 2 * MiB + 4096;
  PinnedBuffer src(bytes), dst(bytes);
  uint64_t seed = 1;
  for (const Case& c : cases) {
    CAPTURE(c.name);
    IoEngine engine(c.cfg);
    IoFile file(dir / "rw.bin", true);
    fill_random(src.data(), bytes, seed++);
    std::memset(dst.data(), 0, bytes);
    // Two regions, the second past a hole, so offsets other than 0 are exercised.
    IoTransferPtr w0 = engine.write(file, src.data(), split, 0);
    IoTransferPtr w1 = engine.write(file, src.as<char>() + split, bytes - split, 16 * MiB);
    w0->wait();
    w1->wait();
    CHECK(w0->bytes() == split);
    CHECK(w0->started_at() <= w0->completed_at());
    CHECK(w1->test());
    IoTransferPtr r1 = engine.read(file, dst.as<char>() + split, bytes - split, 16 * MiB);
    IoTransferPtr r0 = engine.read(file, dst.data(), split, 0);
    while (!r0->test()) std::this_thread::yield();
    r1->wait();
    CHECK(same(src.data(), dst.data(), bytes));
  }
}

TEST_CASE("engine: many transfers in flight over one file and several") {
  TempDir dir;
  IoEngine engine(config(64 * KiB, 8, 2));
  constexpr size_t kChunk = 256 * KiB;
  constexpr int kInOne = 64, kFiles = 4, kPerFile = 16;
  constexpr size_t kTotal = kChunk * (kInOne + kFiles * kPerFile);
  PinnedBuffer src(kTotal), dst(kTotal);
  fill_random(src.data(), kTotal, 42);
  std::vector<IoFile> files;
  files.emplace_back(dir / "one.bin", true);
  for (int f = 0; f < kFiles; ++f) files.emplace_back(dir / ("many" + std::to_string(f) + ".bin"), true);

  // Chunk i of the buffers goes to (file, offset): the first 64 to one file in shuffled order,
  // the rest spread over the others.
  struct Place {
    size_t file;
    uint64_t offset;
  };
  std::vector<Place> places;
  for (int i = 0; i < kInOne; ++i) places.push_back({0, uint64_t(i) * kChunk});
  for (int f = 0; f < kFiles; ++f)
    for (int i = 0; i < kPerFile; ++i) places.push_back({size_t(1 + f), uint64_t(i) * kChunk});
  std::vector<size_t> order(places.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));

  std::vector<IoTransferPtr> inflight;
  for (size_t i : order)
    inflight.push_back(engine.write(files[places[i].file], src.as<char>() + i * kChunk, kChunk, places[i].offset));
  for (auto& t : inflight) t->wait();
  inflight.clear();
  std::reverse(order.begin(), order.end());
  for (size_t i : order)
    inflight.push_back(engine.read(files[places[i].file], dst.as<char>() + i * kChunk, kChunk, places[i].offset));
  for (auto& t : inflight) t->wait();
  CHECK(same(src.data(), dst.data(), kTotal));
  CHECK(files[0].size() == kInOne * kChunk);
}

TEST_CASE("engine: lengths that are not whole pages") {
  TempDir dir;
  IoEngine engine(config(MiB, 8, 2));
  IoFile file(dir / "odd.bin", true);
  const std::vector<size_t> sizes = {1, 4095, 4097, MiB + 123};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t n = sizes[i];
    CAPTURE(n);
    PinnedBuffer src(n), dst(n);  // whole pages: room for the rounded length
    fill_random(src.data(), n, 100 + i);
    const uint64_t offset = uint64_t(i) * 2 * MiB;
    engine.write(file, src.data(), n, offset)->wait();
    std::memset(dst.data(), 0xAB, dst.size());
    engine.read(file, dst.data(), n, offset)->wait();
    CHECK(same(src.data(), dst.data(), n));
  }
}

TEST_CASE("engine: the end of the file") {
  TempDir dir;
  IoEngine engine(config(MiB, 4, 2));
  const std::string path = dir / "short.bin";
  IoFile file(path, true);
  PinnedBuffer src(2 * MiB), dst(4 * MiB);
  fill_random(src.data(), src.size(), 5);
  engine.write(file, src.data(), 8192, 0)->wait();
  file.truncate(5000);

  SUBCASE("a read whose rounded length passes the end, but not its bytes, succeeds") {
    engine.read(file, dst.data(), 5000, 0)->wait();
    CHECK(same(src.data(), dst.data(), 5000));
    engine.read(file, dst.data(), 100, 4096)->wait();
    CHECK(same(src.as<char>() + 4096, dst.data(), 100));
  }
  SUBCASE("a read past the end fails naming the file") {
    std::string msg = io_error_of([&] { engine.read(file, dst.data(), 6000, 0)->wait(); });
    CHECK(contains(msg, "end of file"));
    CHECK(contains(msg, path));
    msg = io_error_of([&] { engine.read(file, dst.data(), 4096, 8192)->wait(); });
    CHECK(contains(msg, "end of file"));
    CHECK(contains(msg, "offset 8192"));
  }
  SUBCASE("a transfer of several requests past the end fails as a whole") {
    file.truncate(0);
    engine.write(file, src.data(), MiB, 0)->wait();
    const std::string msg = io_error_of([&] { engine.read(file, dst.data(), 3 * MiB, 0)->wait(); });
    CHECK(contains(msg, "end of file"));
    CHECK(contains(msg, path));
    // and the engine goes on
    engine.read(file, dst.data(), MiB, 0)->wait();
    CHECK(same(src.data(), dst.data(), MiB));
  }
}

TEST_CASE("engine: misaligned offsets and addresses are refused up front") {
  TempDir dir;
  IoEngine engine(config(MiB, 4, 1));
  IoFile file(dir / "a.bin", true);
  if (!file.direct()) return;  // buffered files take any offset
  PinnedBuffer buf(8192);
  CHECK_THROWS_AS(engine.read(file, buf.data(), 4096, 512), std::invalid_argument);
  CHECK_THROWS_AS(engine.write(file, buf.data(), 4096, 100), std::invalid_argument);
  CHECK_THROWS_AS(engine.write(file, buf.as<char>() + 8, 4000, 0), std::invalid_argument);
  try {
    engine.read(file, buf.data(), 4096, 512);
  } catch (const std::invalid_argument& e) {
    CHECK(contains(e.what(), "offset 512"));
    CHECK(contains(e.what(), file.path()));
  }
}

TEST_CASE("engine: a write past RLIMIT_FSIZE fails with EFBIG") {
  TempDir dir;
  const std::string path = dir / "big.bin";
  // The limit is per process, so a child takes it; it reports through its exit status:
  // 0 the expected error, 1 none, 2 another message (printed), 3 another exception.
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 3;
    try {
      ::signal(SIGXFSZ, SIG_IGN);
      rlimit lim{MiB, MiB};
      if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(3);
      IoEngine engine(config(MiB, 4, 1));
      IoFile file(path, true);
      PinnedBuffer src(2 * MiB);
      try {
        engine.write(file, src.data(), 2 * MiB, 0)->wait();
        code = 1;
      } catch (const IoError& e) {
        const std::string msg = e.what();
        code = contains(msg, "File too large") && contains(msg, "EFBIG") && contains(msg, path) ? 0 : 2;
        if (code) std::fprintf(stderr, "child: %s\n", msg.c_str());
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("engine: tmpfs (/dev/shm) works, with O_DIRECT or buffered") {
  struct statfs sfs {};
  if (::statfs("/dev/shm", &sfs) != 0 || sfs.f_type != TMPFS_MAGIC || ::access("/dev/shm", W_OK) != 0) {
    MESSAGE("no writable tmpfs at /dev/shm");
    return;
  }
  std::string tmpl = "/dev/shm/ztrain_test_XXXXXX";
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  const std::filesystem::path shm = tmpl;
  {
    IoEngine engine(config(64 * KiB, 4, 2));
    IoFile file((shm / "t.bin").string(), true);
    // tmpfs takes O_DIRECT since Linux 6.6; older kernels refuse it and the file is buffered.
    if (!file.direct()) CHECK(file.alignment() == 1);
    const size_t n = 300 * KiB + 7;
    PinnedBuffer src(n), dst(n);
    fill_random(src.data(), n, 9);
    const uint64_t offset = file.direct() ? 8192 : 8193;  // a buffered file takes any offset
    engine.write(file, src.data(), n, offset)->wait();
    engine.read(file, dst.data(), n, offset)->wait();
    CHECK(same(src.data(), dst.data(), n));
  }
  std::filesystem::remove_all(shm);
}

TEST_CASE("engine: registered buffers, and transfers outside them") {
  TempDir dir;
  IoEngine engine(config(128 * KiB, 8, 2));
  IoFile file(dir / "reg.bin", true);
  PinnedBuffer reg(4 * MiB), plain(4 * MiB), check(4 * MiB);
  engine.register_buffer(reg);
  fill_random(reg.data(), reg.size(), 11);
  fill_random(plain.data(), plain.size(), 12);
  // All of the registered buffer, a piece from inside it, and a plain buffer.
  auto a = engine.write(file, reg.data(), 4 * MiB, 0);
  auto b = engine.write(file, reg.as<char>() + MiB + 4096, MiB, 8 * MiB);
  auto c = engine.write(file, plain.data(), 4 * MiB, 16 * MiB);
  a->wait();
  b->wait();
  c->wait();
  engine.read(file, check.data(), 4 * MiB, 0)->wait();
  CHECK(same(check.data(), reg.data(), 4 * MiB));
  engine.read(file, check.data(), MiB, 8 * MiB)->wait();
  CHECK(same(check.data(), reg.as<char>() + MiB + 4096, MiB));

  // Registering another buffer once transfers have run; reads land in both kinds.
  PinnedBuffer reg2(2 * MiB);
  engine.register_buffer(reg2);
  engine.read(file, reg2.data(), 2 * MiB, 16 * MiB)->wait();
  CHECK(same(reg2.data(), plain.data(), 2 * MiB));
  std::memset(reg.data(), 0, reg.size());
  auto r0 = engine.read(file, reg.as<char>() + 4096, 4 * MiB - 4096, 16 * MiB);
  auto r1 = engine.read(file, plain.data(), 4 * MiB, 0);
  r0->wait();
  r1->wait();
  fill_random(check.data(), 4 * MiB, 12);  // what `plain` held
  CHECK(same(reg.as<char>() + 4096, check.data(), 4 * MiB - 4096));
  fill_random(check.data(), 4 * MiB, 11);  // what `reg` held
  CHECK(same(plain.data(), check.data(), 4 * MiB));
}

TEST_CASE("engine: a descriptor number reused by another file reaches the new file") {
  // Registered files are keyed by the file, not its descriptor number, which the kernel hands
  // out again as soon as a file is closed.
  TempDir dir;
  IoEngine engine(config(64 * KiB, 4, 1));
  PinnedBuffer a(64 * KiB), b(64 * KiB), check(64 * KiB);
  fill_random(a.data(), a.size(), 1);
  fill_random(b.data(), b.size(), 2);
  int fd_a;
  {
    IoFile fa(dir / "a.bin", true);
    fd_a = fa.fd();
    engine.write(fa, a.data(), a.size(), 0)->wait();
  }
  {
    IoFile fb(dir / "b.bin", true);
    CHECK(fb.fd() == fd_a);  // what makes this test meaningful
    engine.write(fb, b.data(), b.size(), 0)->wait();
  }
  IoFile fa(dir / "a.bin", false), fb(dir / "b.bin", false);
  engine.read(fa, check.data(), check.size(), 0)->wait();
  CHECK(same(check.data(), a.data(), a.size()));
  engine.read(fb, check.data(), check.size(), 0)->wait();
  CHECK(same(check.data(), b.data(), b.size()));
}

TEST_CASE("engine: the destructor waits for what is in flight") {
  TempDir dir;
  IoFile file(dir / "d.bin", true);
  PinnedBuffer src(8 * MiB), dst(8 * MiB);
  fill_random(src.data(), src.size(), 3);
  std::vector<IoTransferPtr> ts;
  {
    IoEngine engine(config(256 * KiB, 2, 2));
    for (int i = 0; i < 8; ++i) ts.push_back(engine.write(file, src.as<char>() + i * MiB, MiB, uint64_t(i) * MiB));
  }
  for (auto& t : ts) CHECK(t->test());
  IoEngine engine(config(MiB, 8, 1));
  engine.read(file, dst.data(), dst.size(), 0)->wait();
  CHECK(same(src.data(), dst.data(), dst.size()));
}

TEST_CASE("engine: an empty transfer completes at once") {
  TempDir dir;
  IoEngine engine(config(MiB, 4, 1));
  IoFile file(dir / "e.bin", true);
  PinnedBuffer buf(4096);
  auto t = engine.read(file, buf.data(), 0, 0);
  CHECK(t->test());
  CHECK(t->bytes() == 0);
}

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  std::string why;
  if (!zt::io_engine_available()) {
    why = "this build has no io_uring engine";
  } else {
    try {
      IoEngine probe{AioConfig{}};
    } catch (const IoError& e) {
      why = e.what();
    }
  }
  if (why.empty()) return ctx.run();
  ctx.addFilter("test-case-exclude", "engine:*");
  const int rc = ctx.run();
  std::printf("skipped the engine tests: %s\n", why.c_str());
  return rc != 0 ? rc : 77;
}
