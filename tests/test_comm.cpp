// Every collective of every Communicator, element by element: the world communicator (MPI under
// mpirun, Self without it), make_self_communicator(), and sub-communicators from split(). Checked
// against [Note: collective shapes] in comm/communicator.hpp: every dtype, in place and out of
// place, per-rank counts that are multiples of nothing, many operations outstanding at once, bf16
// and f16 reductions rounded once from f32, shape errors, and timeouts.
//
// Run under `mpirun -np N test_comm` (every rank runs every test case, in the same order) or
// alone. The suite "timeout" leaves an operation that can never complete on a communicator of its
// own, so it only runs when asked for: `test_comm --test-suite=timeout`.
//
// Every rank must issue the same collectives in the same order, so test cases only CHECK (never
// REQUIRE) once collectives have started, and an exception from a collective is recorded as a
// failure of that operation rather than leaving the test case on one rank.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/process_group.hpp"
#include "tensor/dtype.hpp"
#include "tensor/tensor.hpp"

using namespace zt;
using namespace std::chrono_literals;

namespace {

ProcessGroup* g_pg = nullptr;
std::unique_ptr<Communicator> g_self;

Communicator& world() { return g_pg->world(); }

struct NamedComm {
  const char* name;
  Communicator* comm;
};
// The communicators every sweep runs on.
std::vector<NamedComm> comms() { return {{"world", &world()}, {"self", g_self.get()}}; }

// 150001: several steps of a shared-memory collective, the last one short ([Note: shared-memory
// collectives] in comm/shm_channel.hpp: 256 KiB a region a step).
constexpr int64_t kCounts[] = {0, 1, 2, 3, 7, 1000, 4099, 150001};
constexpr DType kFloats[] = {DType::f32, DType::bf16, DType::f16};
constexpr DType kMoved[] = {DType::f32, DType::bf16, DType::f16, DType::i32};  // gathered, broadcast
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};
constexpr int64_t kGuard = 8;  // elements of sentinel on both sides of every buffer

// ---- element access in any dtype ----------------------------------------------------------------

// What dtype `dt` holds for the f32 value `v` (one rounding, to nearest even).
float stored(DType dt, float v) {
  switch (dt) {
    case DType::f32: return v;
    case DType::bf16: return bf16_to_f32(f32_to_bf16(v));
    case DType::f16: return f16_to_f32(f32_to_f16(v));
    case DType::i32: return static_cast<float>(static_cast<int32_t>(v));
    case DType::u16: return static_cast<float>(static_cast<uint16_t>(v));
  }
  return v;
}

void put(const Tensor& t, int64_t i, float v) {
  char* p = static_cast<char*>(t.raw()) + i * static_cast<int64_t>(dtype_size(t.dtype()));
  switch (t.dtype()) {
    case DType::f32: std::memcpy(p, &v, 4); break;
    case DType::i32: { const int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
    case DType::bf16: { const uint16_t x = f32_to_bf16(v); std::memcpy(p, &x, 2); break; }
    case DType::f16: { const uint16_t x = f32_to_f16(v); std::memcpy(p, &x, 2); break; }
    case DType::u16: { const uint16_t x = static_cast<uint16_t>(v); std::memcpy(p, &x, 2); break; }
  }
}

float get(const Tensor& t, int64_t i) {
  const char* p = static_cast<const char*>(t.raw()) + i * static_cast<int64_t>(dtype_size(t.dtype()));
  float f;
  int32_t x32;
  uint16_t x16;
  switch (t.dtype()) {
    case DType::f32: std::memcpy(&f, p, 4); return f;
    case DType::i32: std::memcpy(&x32, p, 4); return static_cast<float>(x32);
    case DType::bf16: std::memcpy(&x16, p, 2); return bf16_to_f32(x16);
    case DType::f16: std::memcpy(&x16, p, 2); return f16_to_f32(x16);
    case DType::u16: std::memcpy(&x16, p, 2); return static_cast<float>(x16);
  }
  return 0;
}

// Raw bit patterns: `poison` fills outputs before an operation (NaN for the float dtypes), `guard`
// the sentinel elements around every buffer, which no operation may touch.
uint32_t poison_bits(DType dt) {
  switch (dt) {
    case DType::bf16: return 0x7fde;
    case DType::f16: return 0x7ede;
    case DType::u16: return 0xdead;
    default: return 0x7fc0dead;
  }
}
uint32_t guard_bits(DType dt) {
  switch (dt) {
    case DType::bf16: return 0xffbe;
    case DType::f16: return 0xfebe;
    case DType::u16: return 0xbeef;
    default: return 0xffc0beef;
  }
}

void fill_bits(const Tensor& t, uint32_t bits) {
  char* p = static_cast<char*>(t.raw());
  const size_t es = dtype_size(t.dtype());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (es == 4) {
      std::memcpy(p + i * 4, &bits, 4);
    } else {
      const uint16_t b = static_cast<uint16_t>(bits);
      std::memcpy(p + i * 2, &b, 2);
    }
  }
}

bool all_bits(const Tensor& t, uint32_t bits) {
  const char* p = static_cast<const char*>(t.raw());
  const size_t es = dtype_size(t.dtype());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (es == 4) {
      uint32_t b;
      std::memcpy(&b, p + i * 4, 4);
      if (b != bits) return false;
    } else {
      uint16_t b;
      std::memcpy(&b, p + i * 2, 2);
      if (b != static_cast<uint16_t>(bits)) return false;
    }
  }
  return true;
}

// A buffer of n elements (t) between kGuard sentinel elements on either side; t starts poisoned.
struct Buf {
  Tensor whole, t;
  Buf(DType dt, int64_t n) : whole(Tensor::empty({n + 2 * kGuard}, dt)), t(whole.view(kGuard, {n})) {
    fill_bits(whole, guard_bits(dt));
    fill_bits(t, poison_bits(dt));
  }
  bool guards_intact() const {
    return all_bits(whole.view(0, {kGuard}), guard_bits(whole.dtype())) &&
           all_bits(whole.view(kGuard + t.numel(), {kGuard}), guard_bits(whole.dtype()));
  }
};
using BufPtr = std::shared_ptr<Buf>;

// ---- inputs and expected outputs ----------------------------------------------------------------

// Rank `r`'s input element `i`: k/8 with |k| <= 30 for the float dtypes (exact in bf16 and f16, and
// so are sums of them over a few ranks: the f32 sum is exact in any order), k*65537 for i32 (the
// high half-word matters too). `salt` makes each operation's data its own.
float value(DType dt, int r, int64_t i, int salt) {
  const int64_t k = (r * 37 + i * 11 + salt * 5 + 3) % 61 - 30;
  if (dt == DType::i32) return static_cast<float>(k * 65537);
  return static_cast<float>(k) / 8.0f;
}

// The reduction over ranks 0..n-1 of f(j), in f32: exact for sum and max of the values above.
float reduce_exact(ReduceOp op, int n, const std::function<float(int)>& f) {
  float acc = f(0);
  for (int j = 1; j < n; ++j) acc = op == ReduceOp::max ? std::max(acc, f(j)) : acc + f(j);
  if (op == ReduceOp::avg) acc /= static_cast<float>(n);
  return acc;
}
// avg as sum times 1/n, the other way an implementation may divide; for f32 either is accepted
// (for bf16 and f16 the two round to the same value for these inputs).
float avg_by_reciprocal(int n, const std::function<float(int)>& f) {
  float acc = 0;
  for (int j = 0; j < n; ++j) acc += f(j);
  return acc * (1.0f / static_cast<float>(n));
}

std::string fmt(float v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

// t must hold stored(dtype, want[i]) at every i (or stored(dtype, alt[i]) where alt is given).
// Counts the elements that do not and shows the first few.
void check_values(const Tensor& t, const std::vector<float>& want, const std::string& what,
                  const std::vector<float>* alt = nullptr) {
  const DType dt = t.dtype();
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float got = get(t, i), exp = stored(dt, want[static_cast<size_t>(i)]);
    if (got == exp) continue;
    if (alt && got == stored(dt, (*alt)[static_cast<size_t>(i)])) continue;
    if (bad < 4) first += "\n    [" + std::to_string(i) + "] expected " + fmt(exp) + ", got " + fmt(got);
    ++bad;
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << t.numel() << " elements wrong" << first);
}

std::string label(const char* comm, const Communicator& c, const std::string& op, DType dt, int64_t count,
                  bool inplace, bool show_place = true) {
  std::ostringstream s;
  s << g_pg->prefix() << comm << " (rank " << c.rank() << " of " << c.size() << ") " << op << " "
    << dtype_name(dt) << " count " << count;
  if (show_place) s << (inplace ? " in place" : " out of place");
  return s.str();
}

// ---- one operation: buffers, how to start it, how to check it -----------------------------------

struct Case {
  std::string what;
  std::function<WorkPtr()> start;
  std::function<void()> check;
};

Case all_gather_case(const char* name, Communicator& c, DType dt, int64_t count, bool inplace, int salt) {
  const int n = c.size(), r = c.rank();
  auto out = std::make_shared<Buf>(dt, n * count);
  auto in_buf = std::make_shared<Buf>(dt, inplace ? 0 : count);
  const Tensor in = inplace ? out->t.view(r * count, {count}) : in_buf->t;
  for (int64_t i = 0; i < count; ++i) put(in, i, value(dt, r, i, salt));
  Case k;
  k.what = label(name, c, "all_gather", dt, count, inplace);
  k.start = [&c, in, out] { return c.all_gather_async(in, out->t); };
  k.check = [=, what = k.what] {
    std::vector<float> want;
    for (int j = 0; j < n; ++j)
      for (int64_t i = 0; i < count; ++i) want.push_back(value(dt, j, i, salt));
    check_values(out->t, want, what);
    if (!inplace) {
      std::vector<float> mine;
      for (int64_t i = 0; i < count; ++i) mine.push_back(value(dt, r, i, salt));
      check_values(in, mine, what + " (input afterwards)");
    }
    CHECK_MESSAGE(out->guards_intact(), what << ": wrote outside the output");
    CHECK_MESSAGE(in_buf->guards_intact(), what << ": wrote outside the input");
  };
  return k;
}

Case reduce_scatter_case(const char* name, Communicator& c, DType dt, int64_t count, ReduceOp op, bool inplace,
                         int salt) {
  const int n = c.size(), r = c.rank();
  auto in = std::make_shared<Buf>(dt, n * count);
  auto out_buf = std::make_shared<Buf>(dt, inplace ? 0 : count);
  for (int64_t i = 0; i < n * count; ++i) put(in->t, i, value(dt, r, i, salt));
  const Tensor out = inplace ? in->t.view(r * count, {count}) : out_buf->t;
  Case k;
  k.what = label(name, c, "reduce_scatter " + std::string(reduce_op_name(op)), dt, count, inplace);
  k.start = [&c, in, out, op] { return c.reduce_scatter_async(in->t, out, op); };
  k.check = [=, what = k.what] {
    std::vector<float> want, alt;
    for (int64_t i = 0; i < count; ++i) {
      const auto f = [&](int j) { return value(dt, j, r * count + i, salt); };
      want.push_back(reduce_exact(op, n, f));
      alt.push_back(op == ReduceOp::avg ? avg_by_reciprocal(n, f) : want.back());
    }
    check_values(out, want, what, dt == DType::f32 ? &alt : nullptr);
    if (!inplace) {
      std::vector<float> mine;
      for (int64_t i = 0; i < n * count; ++i) mine.push_back(value(dt, r, i, salt));
      check_values(in->t, mine, what + " (input afterwards)");
    }
    CHECK_MESSAGE(in->guards_intact(), what << ": wrote outside the input");
    CHECK_MESSAGE(out_buf->guards_intact(), what << ": wrote outside the output");
  };
  return k;
}

Case all_reduce_case(const char* name, Communicator& c, DType dt, int64_t count, ReduceOp op, bool inplace,
                     int salt) {
  const int n = c.size(), r = c.rank();
  auto in = std::make_shared<Buf>(dt, count);
  auto out_buf = std::make_shared<Buf>(dt, inplace ? 0 : count);
  for (int64_t i = 0; i < count; ++i) put(in->t, i, value(dt, r, i, salt));
  const Tensor out = inplace ? in->t : out_buf->t;
  Case k;
  k.what = label(name, c, "all_reduce " + std::string(reduce_op_name(op)), dt, count, inplace);
  k.start = [&c, in, out, op] { return c.all_reduce_async(in->t, out, op); };
  k.check = [=, what = k.what] {
    std::vector<float> want, alt;
    for (int64_t i = 0; i < count; ++i) {
      const auto f = [&](int j) { return value(dt, j, i, salt); };
      want.push_back(reduce_exact(op, n, f));
      alt.push_back(op == ReduceOp::avg ? avg_by_reciprocal(n, f) : want.back());
    }
    check_values(out, want, what, dt == DType::f32 ? &alt : nullptr);
    if (!inplace) {
      std::vector<float> mine;
      for (int64_t i = 0; i < count; ++i) mine.push_back(value(dt, r, i, salt));
      check_values(in->t, mine, what + " (input afterwards)");
    }
    CHECK_MESSAGE(in->guards_intact(), what << ": wrote outside the input");
    CHECK_MESSAGE(out_buf->guards_intact(), what << ": wrote outside the output");
  };
  return k;
}

Case broadcast_case(const char* name, Communicator& c, DType dt, int64_t count, int root, int salt) {
  const int r = c.rank();
  auto buf = std::make_shared<Buf>(dt, count);
  if (r == root)
    for (int64_t i = 0; i < count; ++i) put(buf->t, i, value(dt, root, i, salt));
  Case k;
  k.what = label(name, c, "broadcast from " + std::to_string(root), dt, count, true, false);
  k.start = [&c, buf, root] { return c.broadcast_async(buf->t, root); };
  k.check = [=, what = k.what] {
    std::vector<float> want;
    for (int64_t i = 0; i < count; ++i) want.push_back(value(dt, root, i, salt));
    check_values(buf->t, want, what);
    CHECK_MESSAGE(buf->guards_intact(), what << ": wrote outside the buffer");
  };
  return k;
}

Case barrier_case(const char* name, Communicator& c) {
  Case k;
  k.what = g_pg->prefix() + name + " barrier";
  k.start = [&c] { return c.barrier_async(); };
  k.check = [] {};
  return k;
}

// Blocking: start, wait, check. An exception fails this operation only.
void run(const Case& k) {
  try {
    k.start()->wait();
  } catch (const std::exception& e) {
    FAIL_CHECK(k.what << " threw: " << e.what());
    return;
  }
  k.check();
}

}  // namespace

// ---- identity ---------------------------------------------------------------------------------------

TEST_CASE("rank, size, local rank, backend") {
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  CHECK(n >= 1);
  CHECK(r >= 0);
  CHECK(r < n);
  CHECK(g_pg->rank() == r);
  CHECK(g_pg->size() == n);
  // MPI_Comm_split_type's hosts are the launcher's (on one host: every rank, in rank order).
  const LaunchInfo launch = detect_launch();
  const bool told = launch.launcher != "none";
  CHECK(w.local_size() == (told ? launch.local_size : n));
  CHECK(w.local_rank() == (told ? launch.local_rank : r));
  if (n > 1) {
    CHECK(w.backend() == "mpi");
    CHECK(g_pg->uses_mpi());
    CHECK(g_pg->prefix() == "[rank " + std::to_string(r) + "] ");
  } else {
    CHECK_MESSAGE((w.backend() == "mpi" || w.backend() == "self"), "backend " << w.backend());
    CHECK(g_pg->uses_mpi() == (w.backend() == "mpi"));
    CHECK(g_pg->prefix() == "");
  }
  // The ranks are 0..n-1, each once.
  Tensor mine = Tensor::empty({1}, DType::i32), all = Tensor::empty({n}, DType::i32);
  mine.data<int32_t>()[0] = r;
  w.all_gather(mine, all);
  for (int j = 0; j < n; ++j) CHECK(all.data<int32_t>()[j] == j);

  Communicator& s = *g_self;
  CHECK(s.rank() == 0);
  CHECK(s.size() == 1);
  CHECK(s.local_rank() == 0);
  CHECK(s.local_size() == 1);
  CHECK(s.backend() == "self");

  CHECK(reduce_op_name(ReduceOp::sum) == "sum");
  CHECK(reduce_op_name(ReduceOp::avg) == "avg");
  CHECK(reduce_op_name(ReduceOp::max) == "max");
}

// ---- every collective, every dtype, in place and not, every count ---------------------------------

TEST_CASE("all_gather: every element, every dtype and count, in place and out of place") {
  int salt = 0;
  for (const auto& [name, c] : comms())
    for (DType dt : kMoved)
      for (bool inplace : {false, true})
        for (int64_t count : kCounts) run(all_gather_case(name, *c, dt, count, inplace, ++salt));
}

TEST_CASE("reduce_scatter: sum, avg and max, every float dtype and count, in place and out of place") {
  int salt = 100;
  for (const auto& [name, c] : comms())
    for (ReduceOp op : kOps)
      for (DType dt : kFloats)
        for (bool inplace : {false, true})
          for (int64_t count : kCounts) run(reduce_scatter_case(name, *c, dt, count, op, inplace, ++salt));
}

TEST_CASE("all_reduce: sum, avg and max, every float dtype and count, in place and out of place") {
  int salt = 200;
  for (const auto& [name, c] : comms())
    for (ReduceOp op : kOps)
      for (DType dt : kFloats)
        for (bool inplace : {false, true})
          for (int64_t count : kCounts) run(all_reduce_case(name, *c, dt, count, op, inplace, ++salt));
  // Past kLargeAllReduceBytes an all-reduce outside the shared-memory channel runs as a ring in
  // f32 over 2-3 ranks ([Note: ring all-reduce]; 3 more elements than the threshold pad the last
  // chunk), or from a staged copy over more.
  const int64_t ring = static_cast<int64_t>(kLargeAllReduceBytes / sizeof(float)) + 3;
  for (const auto& [name, c] : comms())
    for (ReduceOp op : kOps)
      for (DType dt : kFloats)
        for (bool inplace : {false, true}) run(all_reduce_case(name, *c, dt, ring, op, inplace, ++salt));
  // The short form reduces in place.
  Communicator& w = world();
  Tensor t = Tensor::empty({5});
  for (int i = 0; i < 5; ++i) t.data<float>()[i] = static_cast<float>(w.rank() * 10 + i);
  w.all_reduce(t, ReduceOp::sum);
  const int n = w.size();
  for (int i = 0; i < 5; ++i) CHECK(t.data<float>()[i] == static_cast<float>(10 * n * (n - 1) / 2 + n * i));
}

TEST_CASE("broadcast: from every root, every dtype and count") {
  int salt = 300;
  for (const auto& [name, c] : comms())
    for (int root = 0; root < c->size(); ++root)
      for (DType dt : kMoved)
        for (int64_t count : kCounts) run(broadcast_case(name, *c, dt, count, root, ++salt));
}

TEST_CASE("barrier: nobody leaves before the last rank arrives") {
  for (const auto& [name, c] : comms())
    for (int i = 0; i < 5; ++i) run(barrier_case(name, *c));
  Communicator& w = world();
  if (w.size() < 2) return;
  // The last rank arrives 300 ms late; nobody may leave the barrier before that.
  const int late = w.size() - 1;
  w.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  if (w.rank() == late) std::this_thread::sleep_for(300ms);
  w.barrier();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK_MESSAGE(ms >= 250, g_pg->prefix() << "left the barrier after " << ms << " ms; rank " << late
                                          << " arrived after 300 ms");
}

TEST_CASE("bytes sent: each collective counts what a ring sends, a refused one nothing, one rank nothing") {
  for (const NamedComm& named : comms()) {  // (no structured bindings: clang's lambdas cannot capture them)
    Communicator* const c = named.comm;
    CAPTURE(named.name);
    const auto n = static_cast<uint64_t>(c->size());
    const int64_t shard = 96;  // f32 elements a rank contributes
    const Tensor small = Tensor::zeros({shard}), large = Tensor::zeros({shard * c->size()});
    const uint64_t b = shard * 4;
    auto sent = [&](const std::function<void()>& f) {
      const uint64_t before = c->bytes_sent();
      f();
      return c->bytes_sent() - before;
    };
    CHECK(sent([&] { c->all_gather_async(small, large)->wait(); }) == (n - 1) * b);
    CHECK(sent([&] { c->reduce_scatter_async(large, small, ReduceOp::sum)->wait(); }) == (n - 1) * b);
    CHECK(sent([&] { c->all_reduce_async(large, large, ReduceOp::sum)->wait(); }) == 2 * (n - 1) * (b * n) / n);  // the buffer is n shards
    CHECK(sent([&] { c->broadcast_async(small, 0)->wait(); }) == (n > 1 ? b : 0));
    CHECK(sent([&] { c->barrier(); }) == 0);
    const Tensor ints = Tensor::zeros({shard * c->size()}, DType::i32);
    CHECK(sent([&] { CHECK_THROWS_AS(c->all_gather_async(small, ints), std::invalid_argument); }) == 0);
  }
}

// ---- integer reductions: exact, or refused with a clear message -----------------------------------

TEST_CASE("reductions of i32 and u16 are exact or refused with std::invalid_argument naming the dtype") {
  for (const auto& [name, c] : comms()) {
    const int n = c->size(), r = c->rank();
    for (DType dt : {DType::i32, DType::u16})
      for (ReduceOp op : kOps)
        for (bool scatter : {false, true}) {
          const int64_t count = 7;
          Buf in(dt, scatter ? n * count : count), out(dt, count);
          for (int64_t i = 0; i < in.t.numel(); ++i) put(in.t, i, static_cast<float>((r * 13 + i * 7) % 50));
          const std::string what =
              label(name, *c, std::string(scatter ? "reduce_scatter " : "all_reduce ") +
                                  std::string(reduce_op_name(op)), dt, count, false);
          try {
            if (scatter)
              c->reduce_scatter(in.t, out.t, op);
            else
              c->all_reduce(in.t, out.t, op);
          } catch (const std::invalid_argument& e) {
            const std::string msg = e.what();
            CHECK_MESSAGE(msg.find(dtype_name(dt)) != std::string::npos,
                          what << ": refused, but the message does not name " << dtype_name(dt) << ": " << msg);
            CHECK_MESSAGE(msg.find(scatter ? "reduce_scatter" : "all_reduce") != std::string::npos,
                          what << ": refused, but the message does not name the operation: " << msg);
            if (r == 0 && c == &world()) MESSAGE(what << ": refused: " << msg);
            continue;
          } catch (const std::exception& e) {
            FAIL_CHECK(what << ": threw something other than std::invalid_argument: " << e.what());
            continue;
          }
          if (op == ReduceOp::avg) {  // no single right answer for an integer mean; just report
            if (r == 0 && c == &world()) MESSAGE(what << ": accepted; element 0 = " << get(out.t, 0));
            continue;
          }
          std::vector<float> want;
          for (int64_t i = 0; i < count; ++i) {
            const int64_t at = scatter ? r * count + i : i;
            want.push_back(reduce_exact(op, n, [&](int j) { return static_cast<float>((j * 13 + at * 7) % 50); }));
          }
          check_values(out.t, want, what);
          CHECK(out.guards_intact());
        }
  }
}

// ---- rounding: accumulate in f32, round once ------------------------------------------------------

// With n ranks, one rank contributes `big` and the others `small` each: the f32 sum is exact, but
// adding `small` to `big` in bf16 (or f16) one at a time loses it every time.
TEST_CASE("bf16 and f16 reductions accumulate in f32 and round once") {
  struct Pattern {
    float big, small;
  };
  const Pattern bf16_patterns[] = {{256, 1}, {256, 0.75f}, {-256, -1}, {256, 1.25f}, {128, 0.5f}, {256, -1}, {1024, 3}, {512, 1.5f}};
  const Pattern f16_patterns[] = {{2048, 1}, {2048, 0.75f}, {-2048, -1}, {2048, 1.25f}, {1024, 0.5f}, {2048, -1}, {8192, 3}, {4096, 1.5f}};
  constexpr int64_t kPer = 4;  // each pattern 4 times, the big value on rank e % n
  for (const auto& [name, c] : comms()) {
    const int n = c->size(), r = c->rank();
    for (DType dt : {DType::bf16, DType::f16}) {
      const Pattern* pats = dt == DType::bf16 ? bf16_patterns : f16_patterns;
      const int64_t count = 8 * kPer;
      const auto contrib = [&](int j, int64_t e) {
        const Pattern p = pats[(e % count) / kPer];
        return j == e % n ? p.big : p.small;
      };
      // The test means something only if rounding each addition would give other results.
      if (n >= 3 && dt == DType::bf16) {
        int differ = 0;
        for (int64_t e = 0; e < count; ++e) {
          float naive = contrib(0, e);
          for (int j = 1; j < n; ++j) naive = stored(dt, naive + contrib(j, e));
          differ += naive != stored(dt, reduce_exact(ReduceOp::sum, n, [&](int j) { return contrib(j, e); }));
        }
        CHECK(differ > 0);
      }
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
        for (bool inplace : {false, true}) {
          {  // all_reduce
            Buf in(dt, count), out(dt, inplace ? 0 : count);
            for (int64_t e = 0; e < count; ++e) put(in.t, e, contrib(r, e));
            const Tensor o = inplace ? in.t : out.t;
            const std::string what = label(name, *c, "rounding all_reduce " + std::string(reduce_op_name(op)), dt, count, inplace);
            std::vector<float> want;
            for (int64_t e = 0; e < count; ++e) want.push_back(reduce_exact(op, n, [&](int j) { return contrib(j, e); }));
            try {
              c->all_reduce(in.t, o, op);
              check_values(o, want, what);
            } catch (const std::exception& ex) {
              FAIL_CHECK(what << " threw: " << ex.what());
            }
          }
          {  // reduce_scatter: rank r's chunk holds elements [r*count, (r+1)*count) of the pattern
            Buf in(dt, n * count), out(dt, inplace ? 0 : count);
            for (int64_t e = 0; e < n * count; ++e) put(in.t, e, contrib(r, e));
            const Tensor o = inplace ? in.t.view(r * count, {count}) : out.t;
            const std::string what = label(name, *c, "rounding reduce_scatter " + std::string(reduce_op_name(op)), dt, count, inplace);
            std::vector<float> want;
            for (int64_t e = 0; e < count; ++e)
              want.push_back(reduce_exact(op, n, [&](int j) { return contrib(j, r * count + e); }));
            try {
              c->reduce_scatter(in.t, o, op);
              check_values(o, want, what);
            } catch (const std::exception& ex) {
              FAIL_CHECK(what << " threw: " << ex.what());
            }
          }
        }
    }
  }
  // The examples from the note, spelled out: 4 ranks, 256 + 1 + 1 + 1 in bf16 is 260 (259 rounded to
  // even), not 256; 2048 + 1 + 1 + 1 in f16 is 2052.
  Communicator& w = world();
  if (w.size() == 4) {
    Tensor b = Tensor::empty({1}, DType::bf16), h = Tensor::empty({1}, DType::f16);
    put(b, 0, w.rank() == 0 ? 256.0f : 1.0f);
    put(h, 0, w.rank() == 0 ? 2048.0f : 1.0f);
    w.all_reduce(b, ReduceOp::sum);
    w.all_reduce(h, ReduceOp::sum);
    CHECK(get(b, 0) == 260.0f);
    CHECK(get(h, 0) == 2052.0f);
  }
}

// ---- many operations in flight ----------------------------------------------------------------------

namespace {
// 50 operations of every kind, dtype and size, on separate buffers.
std::vector<Case> mixed_cases(Communicator& c, const char* name, int salt) {
  std::vector<Case> cases;
  for (int i = 0; i < 50; ++i) {
    const int64_t count = kCounts[(i * 3) % 7];
    const bool inplace = (i / 5) % 2 == 1;
    const DType fdt = kFloats[i % 3];
    const ReduceOp op = kOps[(i / 2) % 3];
    switch (i % 5) {
      case 0: cases.push_back(all_gather_case(name, c, kMoved[i % 4], count, inplace, salt + i)); break;
      case 1: cases.push_back(reduce_scatter_case(name, c, fdt, count, op, inplace, salt + i)); break;
      case 2: cases.push_back(all_reduce_case(name, c, fdt, count, op, inplace, salt + i)); break;
      case 3: cases.push_back(broadcast_case(name, c, kMoved[i % 4], count, i % c.size(), salt + i)); break;
      default: cases.push_back(barrier_case(name, c)); break;
    }
  }
  return cases;
}

// Starts every case; an exception while starting fails the whole batch (the ranks would disagree).
std::vector<WorkPtr> start_all(const std::vector<Case>& cases) {
  std::vector<WorkPtr> works;
  for (const Case& k : cases) {
    try {
      works.push_back(k.start());
    } catch (const std::exception& e) {
      FAIL_CHECK(k.what << " threw when started: " << e.what());
      works.push_back(nullptr);
    }
  }
  return works;
}
}  // namespace

TEST_CASE("50 operations outstanding at once, waited for in reverse order") {
  for (const auto& named : comms()) {
    // Plain references: doctest's message macros capture `name` in a lambda, and clang 14
    // cannot capture a structured binding.
    const char* name = named.name;
    Communicator* c = named.comm;
    const std::vector<Case> cases = mixed_cases(*c, name, 1000);
    std::vector<WorkPtr> works = start_all(cases);
    for (size_t i = cases.size(); i-- > 0;) {
      if (!works[i]) continue;
      try {
        works[i]->wait();
      } catch (const std::exception& e) {
        FAIL_CHECK(cases[i].what << " (outstanding #" << i << ") threw: " << e.what());
        continue;
      }
      CHECK_MESSAGE(works[i]->test(), cases[i].what << ": test() false after wait()");
      cases[i].check();
    }
  }
}

TEST_CASE("50 operations outstanding at once, polled with test() until done") {
  for (const auto& named : comms()) {
    // Plain references: doctest's message macros capture `name` in a lambda, and clang 14
    // cannot capture a structured binding.
    const char* name = named.name;
    Communicator* c = named.comm;
    const std::vector<Case> cases = mixed_cases(*c, name, 2000);
    std::vector<WorkPtr> works = start_all(cases);
    std::vector<bool> done(cases.size(), false);
    size_t remaining = cases.size(), polls = 0, out_of_order = 0;
    for (size_t i = 0; i < works.size(); ++i)
      if (!works[i]) done[i] = true, --remaining;
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (remaining > 0 && std::chrono::steady_clock::now() < deadline) {
      for (size_t i = cases.size(); i-- > 0;) {  // latest first
        if (done[i]) continue;
        ++polls;
        if (!works[i]->test()) continue;
        done[i] = true;
        --remaining;
        // Operations start in issue order but may complete out of it; counted, not required.
        for (size_t j = 0; j < i; ++j)
          if (works[j] && !done[j] && !works[j]->test()) {
            ++out_of_order;
            break;
          }
      }
      std::this_thread::sleep_for(50us);
    }
    CHECK_MESSAGE(remaining == 0, g_pg->prefix() << name << ": " << remaining << " operations still not done after 120 s");
    for (size_t i = 0; i < cases.size(); ++i) {
      if (!works[i] || !done[i]) continue;
      try {
        works[i]->wait();  // done: returns at once
      } catch (const std::exception& e) {
        FAIL_CHECK(cases[i].what << " threw from wait() after test() was true: " << e.what());
        continue;
      }
      cases[i].check();
    }
    if (c == &world() && world().rank() == 0)
      MESSAGE(std::string(name) << ": " << polls << " test() calls; " << out_of_order << " completed before an earlier one");
  }
}

// ---- split --------------------------------------------------------------------------------------------

TEST_CASE("split: by rank parity, in reverse rank order") {
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  auto sub = w.split(r % 2, -r);
  REQUIRE(sub != nullptr);
  // Members with the same parity, ordered by key = -rank: the highest world rank first.
  std::vector<int> members;
  for (int j = n - 1; j >= 0; --j)
    if (j % 2 == r % 2) members.push_back(j);
  const int m = static_cast<int>(members.size());
  const int expect_rank = static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
  CHECK(sub->size() == m);
  CHECK(sub->rank() == expect_rank);
  CHECK(sub->backend() == w.backend());
  if (r == 0)  // not specified for a sub-communicator: within it, or the world's (the device index)
    MESSAGE("split: local_rank " << sub->local_rank() << ", local_size " << sub->local_size());

  // Who is who: gather the world ranks in sub-communicator order.
  Tensor mine = Tensor::empty({1}, DType::i32), all = Tensor::empty({sub->size()}, DType::i32);
  mine.data<int32_t>()[0] = r;
  sub->all_gather(mine, all);
  for (int j = 0; j < std::min(m, sub->size()); ++j) CHECK(all.data<int32_t>()[j] == members[static_cast<size_t>(j)]);

  // A sum over the members only.
  Tensor s = Tensor::empty({3});
  s.fill(static_cast<float>(r + 1));
  sub->all_reduce(s, ReduceOp::sum);
  float want = 0;
  for (int j : members) want += static_cast<float>(j + 1);
  for (int i = 0; i < 3; ++i) CHECK(s.data<float>()[i] == want);

  // The sweep on the sub-communicator, while world runs operations of its own.
  int salt = 3000;
  for (DType dt : kFloats)
    for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{4099}}) {
      const Case on_world = all_reduce_case("world", w, dt, count, ReduceOp::sum, false, ++salt);
      const Case cases[] = {all_gather_case("split", *sub, dt, count, false, ++salt),
                            reduce_scatter_case("split", *sub, dt, count, ReduceOp::avg, true, ++salt),
                            all_reduce_case("split", *sub, dt, count, ReduceOp::sum, false, ++salt),
                            broadcast_case("split", *sub, dt, count, sub->size() - 1, ++salt)};
      try {
        WorkPtr ww = on_world.start();
        std::vector<WorkPtr> ws;
        for (const Case& k : cases) ws.push_back(k.start());
        for (auto& x : ws) x->wait();
        ww->wait();
      } catch (const std::exception& e) {
        FAIL_CHECK(g_pg->prefix() << "split sweep threw: " << e.what());
        continue;
      }
      on_world.check();
      for (const Case& k : cases) k.check();
    }

  // Equal keys: ordered by rank. Color 0 for all: a duplicate of world.
  auto dup = w.split(0, 0);
  CHECK(dup->size() == n);
  CHECK(dup->rank() == r);
  run(all_reduce_case("dup", *dup, DType::bf16, 1000, ReduceOp::sum, true, 4000));
  run(all_gather_case("dup", *dup, DType::f16, 3, false, 4001));

  // Self splits into itself.
  auto self_sub = g_self->split(0, 0);
  CHECK(self_sub->size() == 1);
  CHECK(self_sub->rank() == 0);
  run(all_reduce_case("self split", *self_sub, DType::f32, 7, ReduceOp::avg, false, 4002));
}

// ---- argument errors ------------------------------------------------------------------------------------

TEST_CASE("wrong shapes, dtypes and roots throw std::invalid_argument naming the operation") {
  using doctest::Contains;
  for (const auto& named : comms()) {
    // Plain references: doctest's message macros capture `name` in a lambda, and clang 14
    // cannot capture a structured binding.
    const char* name = named.name;
    Communicator* cp = named.comm;
    CAPTURE(name);
    Communicator& c = *cp;
    const int64_t n = c.size();
    const Tensor small = Tensor::empty({3}), wrong_large = Tensor::empty({3 * n + 1}), large = Tensor::empty({3 * n});
    CHECK_THROWS_WITH_AS(c.all_gather(small, wrong_large), Contains("all_gather"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.all_gather(Tensor::empty({2}), large), Contains("all_gather"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.all_gather(small, Tensor::empty({3 * n}, DType::bf16)), Contains("all_gather"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.all_gather_async(small, wrong_large)->wait(), Contains("all_gather"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.reduce_scatter(wrong_large, small, ReduceOp::sum), Contains("reduce_scatter"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.reduce_scatter(large, Tensor::empty({2}), ReduceOp::avg), Contains("reduce_scatter"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.reduce_scatter(large, Tensor::empty({3}, DType::f16), ReduceOp::sum), Contains("reduce_scatter"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.all_reduce(small, Tensor::empty({4}), ReduceOp::sum), Contains("all_reduce"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.all_reduce(small, Tensor::empty({3}, DType::bf16), ReduceOp::max), Contains("all_reduce"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.broadcast(small, c.size()), Contains("broadcast"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.broadcast(small, -1), Contains("broadcast"), std::invalid_argument);
    // Still usable afterwards.
    run(all_reduce_case(name, c, DType::f32, 7, ReduceOp::sum, false, 5000));
  }
}

// ---- timeouts that must not fire -------------------------------------------------------------------------

TEST_CASE("timeout: a late rank within the timeout, and 0 meaning forever") {
  Communicator& w = world();
  auto dup = w.split(0, w.rank());
  CHECK(dup->timeout() == std::chrono::milliseconds(std::chrono::minutes(5)));  // the default
  dup->set_timeout(3s);
  CHECK(dup->timeout() == 3000ms);
  const int late = dup->size() - 1;
  for (std::chrono::milliseconds t : {3000ms, 0ms}) {
    dup->set_timeout(t);
    dup->barrier();
    if (dup->rank() == late) std::this_thread::sleep_for(700ms);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      run(all_reduce_case("dup", *dup, DType::f32, 7, ReduceOp::sum, false, 6000 + static_cast<int>(t.count())));
    } catch (const std::exception& e) {
      FAIL_CHECK(e.what());
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK_MESSAGE(s < 10, g_pg->prefix() << "timeout " << t.count() << " ms: the all_reduce took " << s << " s");
  }
}

// ---- the one that must fire: its own suite, run on its own ----------------------------------------------

TEST_SUITE("timeout") {
  TEST_CASE("timeout: an all_reduce that only rank 0 joins throws CommError after the timeout") {
    Communicator& w = world();
    if (w.size() < 2) {
      MESSAGE("needs 2 or more ranks");
      return;
    }
    // Small, and large enough for the ring all-reduce across hosts ([Note: ring all-reduce]),
    // whose abandoned steps are cancelled or let go.
    const int64_t counts[] = {16, static_cast<int64_t>(kLargeAllReduceBytes / sizeof(float)) + 3};
    for (int64_t count : counts) {
      CAPTURE(count);
      // A duplicate of world: the operation stays in flight on it for good, world stays usable.
      std::unique_ptr<Communicator> dup = w.split(0, w.rank());
      dup->set_timeout(500ms);
      if (w.rank() == 0) {
        // The buffer must outlive the operation, which never completes.
        static std::vector<Tensor> keep;
        keep.push_back(Tensor::zeros({count}));
        const auto t0 = std::chrono::steady_clock::now();
        std::string msg;
        bool comm_error = false;
        try {
          dup->all_reduce(keep.back(), ReduceOp::sum);
        } catch (const CommError& e) {
          comm_error = true;
          msg = e.what();
        } catch (const std::exception& e) {
          msg = std::string("not a CommError: ") + e.what();
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK_MESSAGE(comm_error, "expected CommError, got: " << (msg.empty() ? "no exception" : msg));
        CHECK_MESSAGE(msg.find("did not complete") != std::string::npos, "message: " << msg);
        CHECK_MESSAGE(msg.find("all_reduce") != std::string::npos, "message should name the operation: " << msg);
        CHECK_MESSAGE(s >= 0.45, "threw after " << s << " s, timeout 0.5 s");
        CHECK_MESSAGE(s <= 2.5, "threw after " << s << " s, timeout 0.5 s");
        MESSAGE("CommError after " << s << " s: " << msg);
      }
      // World is a different communicator and still works.
      run(all_reduce_case("world", w, DType::f32, 1000, ReduceOp::sum, false, 7000));
      // dup (with rank 0's operation still in flight) is destroyed here.
    }
  }
}

int main(int argc, char** argv) {
  std::unique_ptr<ProcessGroup> pg;
  try {
    pg = ProcessGroup::start(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test_comm: cannot start the process group: %s\n", e.what());
    return 1;
  }
  g_pg = pg.get();
  g_self = make_self_communicator();
  // A rank that falls out of step fails its operation rather than hanging the test.
  pg->world().set_timeout(120s);

  doctest::Context ctx;
  // The timeout suite runs only when a suite is named on the command line.
  bool suite_named = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--test-suite=", 0) == 0 || a.rfind("-ts=", 0) == 0 || a.rfind("--dt-test-suite=", 0) == 0 ||
        a.rfind("--dt-ts=", 0) == 0)
      suite_named = true;
  }
  if (!suite_named) ctx.addFilter("test-suite-exclude", "timeout");
  ctx.applyCommandLine(argc, argv);
  const int res = ctx.run();

  // Every rank exits non-zero if any rank failed.
  float failed = res != 0 ? 1.0f : 0.0f;
  if (!ctx.shouldExit() || res != 0) {
    try {
      Tensor t = Tensor::empty({1});
      t.data<float>()[0] = failed;
      pg->world().all_reduce(t, ReduceOp::max);
      failed = t.data<float>()[0];
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%sthe final failure count all_reduce threw: %s\n", pg->prefix().c_str(), e.what());
      failed = 1;
    }
  }
  if (failed != 0 && res == 0) std::fprintf(stderr, "%sanother rank failed\n", pg->prefix().c_str());
  g_self.reset();
  g_pg = nullptr;
  return failed != 0 ? 1 : 0;
}
