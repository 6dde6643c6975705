// Collectives of the Communicator, measured and validated as nccl-tests does, so the numbers
// compare with the rest of the field: one row per size with time, algbw, busbw and #wrong, out of
// place then in place. The yardstick, measured by rank 0 in the same run, is memcpy bandwidth:
// over shared memory every byte a collective moves is at least one copy, so that is the limit.
// Beside it, each collective's traffic bound: the busbw at which the bytes a rank must read and
// write (a reduction reads every rank's block of its shard, a gather copies the peers' blocks)
// would take the whole time, at the rates all ranks reach streaming together
// ([Note: traffic bound]).
//
//   mpirun -np N collectives [--op all_gather|reduce_scatter|all_reduce|all] [--dtype f32|bf16|f16]
//       [--min-bytes 8] [--max-bytes 268435456] [--iters 20] [--warmup 5] [--check 1]
//       [--large-bytes 0 --large-iters 10]   (sizes above large-bytes run large-iters iterations)
//       [--across-groups G]   (the world as groups of G consecutive ranks; each collective runs over
//                              the ranks at the same place in every group, all such sets at once:
//                              hybrid sharding's replicas; the printed rows are rank 0's set's)
//
// size(B) is the large buffer, as in nccl-tests: n*count elements for all_gather and
// reduce_scatter (count is the per-rank block), count elements for all_reduce. algbw = size/time;
// busbw = algbw * 2(n-1)/n for all_reduce and (n-1)/n for the other two, the bytes each rank's
// link carries in a bandwidth-optimal algorithm. Time is the mean of `iters` operations issued
// together and then waited for, the largest over ranks.
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/process_group.hpp"

namespace {

using zt::Communicator, zt::DType, zt::MemCategory, zt::ReduceOp, zt::Tensor, zt::WorkPtr;

// Element i of rank r's input. Small integers, so every sum over ranks (|sum| <= 2n) is exact in
// bf16 and f16 as well, whatever the order of the reduction, up to 128 ranks. `seed` 1 (the check)
// differs from seed 0 (the timed runs), so stale results from the timed loop cannot pass the check.
float input_value(int r, int64_t i, int seed) {
  uint64_t h = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull ^
               static_cast<uint64_t>(2 * r + seed + 1) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 31;
  return static_cast<float>(static_cast<int>(h % 5) - 2);
}
constexpr float kUnwritten = -100.0f;  // outside the input range, exact in every dtype

// [Note: traffic bound] Per rank rates, read + write bytes a second, with every rank streaming at
// once: a copy and a sum of two arrays into a third, each the faster of plain stores and
// non-temporal ones (which skip reading the destination's lines first: glibc's memcpy switches
// to them for large copies, so the memcpy yardstick of 256 MiB has them and one of 64 MiB not).
struct Rates {
  double copy, sum;
};

// One collective: what nccl-tests keeps in its struct testColl.
struct Collective {
  const char* name;
  const char* redop;
  double (*bus_factor)(int n);
  bool in_full, out_full;  // the buffer holds n blocks of `count` elements (else one block)
  WorkPtr (*run)(Communicator& comm, const Tensor& in, const Tensor& out);
  // Element i of rank r's output when every rank j's input is input_value(j, ., seed).
  float (*expected)(int n, int r, int64_t count, int64_t i, int seed);
  // Seconds a rank spends, at `rates`, on the least it must read and write per byte of size(B):
  // a reduction of its 1/n reads n blocks and writes one; a gather copies the blocks it lacks.
  double (*least_time)(int n, bool in_place, const Rates& rates);
};

// A reduce-scatter of size 1: reads n blocks of 1/n and writes one.
double reduce_time(int n, const Rates& x) { return (1.0 + 1.0 / n) / x.sum; }
// Copying `blocks` blocks of 1/n: each read and written.
double copy_time(int n, double blocks, const Rates& x) { return 2.0 * blocks / n / x.copy; }

float sum_over_ranks(int n, int64_t i, int seed) {
  float s = 0;
  for (int j = 0; j < n; ++j) s += input_value(j, i, seed);
  return s;
}

const Collective kCollectives[] = {
    {"all_gather", "none", [](int n) { return (n - 1) / static_cast<double>(n); }, false, true,
     [](Communicator& c, const Tensor& in, const Tensor& out) { return c.all_gather_async(in, out); },
     [](int, int, int64_t count, int64_t i, int seed) { return input_value(static_cast<int>(i / count), i % count, seed); },
     [](int n, bool in_place, const Rates& x) { return copy_time(n, in_place ? n - 1 : n, x); }},
    {"reduce_scatter", "sum", [](int n) { return (n - 1) / static_cast<double>(n); }, true, false,
     [](Communicator& c, const Tensor& in, const Tensor& out) { return c.reduce_scatter_async(in, out, ReduceOp::sum); },
     [](int n, int r, int64_t count, int64_t i, int seed) { return sum_over_ranks(n, r * count + i, seed); },
     [](int n, bool, const Rates& x) { return reduce_time(n, x); }},
    {"all_reduce", "sum", [](int n) { return 2.0 * (n - 1) / n; }, false, false,
     [](Communicator& c, const Tensor& in, const Tensor& out) { return c.all_reduce_async(in, out, ReduceOp::sum); },
     [](int n, int, int64_t, int64_t i, int seed) { return sum_over_ranks(n, i, seed); },
     [](int n, bool, const Rates& x) { return reduce_time(n, x) + copy_time(n, n - 1, x); }},
};

[[noreturn]] void unsupported(DType t) {
  throw std::invalid_argument("collectives: --dtype " + std::string(zt::dtype_name(t)) + " (expected f32, bf16 or f16)");
}

float load(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return zt::bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::f16: return zt::f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: unsupported(t);
  }
}

void store(DType t, void* p, int64_t i, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = v; break;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = zt::f32_to_bf16(v); break;
    case DType::f16: static_cast<uint16_t*>(p)[i] = zt::f32_to_f16(v); break;
    default: unsupported(t);
  }
}

template <class F> void fill(const Tensor& t, F value) {
  void* p = t.raw();
  for (int64_t i = 0; i < t.numel(); ++i) store(t.dtype(), p, i, value(i));
}

template <class F> int64_t count_wrong(const Tensor& t, F expected) {
  const void* p = t.raw();
  int64_t wrong = 0;
  for (int64_t i = 0; i < t.numel(); ++i) wrong += load(t.dtype(), p, i) != expected(i);
  return wrong;
}

// One f32 scalar reduced over ranks (the time and the #wrong of a row).
float reduce_scalar(Communicator& comm, float v, ReduceOp op) {
  const Tensor t = Tensor::empty({1}, DType::f32, MemCategory::communication);
  t.fill(v);
  comm.all_reduce(t, op);
  return t.data<float>()[0];
}

struct Options {
  std::string op = "all";
  DType dtype = DType::f32;
  int64_t min_bytes = 8, max_bytes = int64_t{256} << 20, large_bytes = 0;
  int iters = 20, warmup = 5, large_iters = 10, across_groups = 1;
  bool check = true;
  bool prints = true;  // whether this set's rank 0 prints (--across-groups: rank 0's set only)
};

Options parse(int argc, char** argv) {
  Options o;
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || i + 1 >= argc)
      throw std::invalid_argument("collectives: expected --flag value, got '" + k + "'");
    flags[k.substr(2)] = argv[i + 1];
  }
  for (const auto& [k, v] : flags) {
    if (k == "op") o.op = v;
    else if (k == "dtype") o.dtype = zt::dtype_from_name(v);
    else if (k == "min-bytes") o.min_bytes = std::stoll(v);
    else if (k == "max-bytes") o.max_bytes = std::stoll(v);
    else if (k == "large-bytes") o.large_bytes = std::stoll(v);
    else if (k == "iters") o.iters = std::stoi(v);
    else if (k == "warmup") o.warmup = std::stoi(v);
    else if (k == "large-iters") o.large_iters = std::stoi(v);
    else if (k == "check") o.check = std::stoi(v) != 0;
    else if (k == "across-groups") o.across_groups = std::stoi(v);
    else throw std::invalid_argument("collectives: unknown flag --" + k);
  }
  if (o.dtype != DType::f32 && o.dtype != DType::bf16 && o.dtype != DType::f16) unsupported(o.dtype);
  const auto known = [&](const Collective& c) { return o.op == c.name; };
  if (o.op != "all" && std::none_of(std::begin(kCollectives), std::end(kCollectives), known))
    throw std::invalid_argument("collectives: unknown --op " + o.op + " (all_gather, reduce_scatter, all_reduce or all)");
  if (o.across_groups < 1) throw std::invalid_argument("collectives: --across-groups must be at least 1");
  if (o.min_bytes < 1 || o.min_bytes > o.max_bytes || o.iters < 1 || o.warmup < 0 || o.large_iters < 1)
    throw std::invalid_argument("collectives: need 1 <= min-bytes <= max-bytes, iters >= 1, warmup >= 0");
  return o;
}

// GB/s of one memcpy of `bytes`, counting bytes read plus bytes written, best of 5.
double memcpy_gbps(size_t bytes) {
  const Tensor a = Tensor::zeros({static_cast<int64_t>(bytes / 2)}, DType::u16, MemCategory::communication);
  const Tensor b = Tensor::zeros(a.shape(), DType::u16, MemCategory::communication);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.raw(), a.raw(), a.nbytes());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * static_cast<double>(a.nbytes()) / s / 1e9);
  }
  if (static_cast<volatile uint16_t*>(b.raw())[bytes / 4] != 0) std::printf(" ");  // keep the copy alive
  return best;
}

// [Note: traffic bound]: each rate the best of 3 trials that all ranks start together, on arrays
// of `bytes`; the fastest rank's, so the bound errs high.
Rates streaming_rates(Communicator& comm, int64_t bytes) {
  const int64_t n = std::max<int64_t>(bytes / 4, 1);
  const Tensor a = Tensor::zeros({n}, DType::f32, MemCategory::communication);
  const Tensor b = Tensor::zeros({n}, DType::f32, MemCategory::communication);
  const Tensor c = Tensor::zeros({n}, DType::f32, MemCategory::communication);
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* z = c.data<float>();
  auto best = [&](double moved, auto&& kernel) {
    double rate = 0;
    for (int trial = 0; trial < 3; ++trial) {
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      kernel();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rate = std::max(rate, moved / s / 1e9);
    }
    return static_cast<double>(reduce_scalar(comm, static_cast<float>(rate), ReduceOp::max));
  };
  const double nb = static_cast<double>(n) * 4;
  Rates r{};
  r.copy = best(2 * nb, [&] { std::memcpy(z, x, static_cast<size_t>(n) * 4); });
  r.sum = best(3 * nb, [&] {
    for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  });
#if defined(__SSE2__)
  const int64_t n4 = n / 4 * 4;  // Tensor storage is 64-byte aligned
  r.copy = std::max(r.copy, best(2 * nb, [&] {
    for (int64_t i = 0; i < n4; i += 4) _mm_stream_ps(z + i, _mm_load_ps(x + i));
    _mm_sfence();
  }));
  r.sum = std::max(r.sum, best(3 * nb, [&] {
    for (int64_t i = 0; i < n4; i += 4) _mm_stream_ps(z + i, _mm_add_ps(_mm_load_ps(x + i), _mm_load_ps(y + i)));
    _mm_sfence();
  }));
#endif
  if (static_cast<volatile float*>(z)[n / 2] != 0) std::printf(" ");  // keep the loops alive
  return r;
}

const char* nccl_type_name(DType t) { return t == DType::f32 ? "float" : t == DType::bf16 ? "bfloat16" : "half"; }

struct Mode {
  double us;
  int64_t wrong;  // -1: not checked
};

// Times `coll` on in -> out (views of the benchmark's buffers) and, with --check, validates it.
Mode measure(Communicator& comm, const Collective& coll, const Tensor& in, const Tensor& out, int64_t count,
             int iters, int warmup, bool check) {
  const int n = comm.size(), r = comm.rank();
  auto issue = [&](int k) {  // like nccl-tests: launch them all, then wait for all
    std::vector<WorkPtr> work;
    for (int i = 0; i < k; ++i) work.push_back(coll.run(comm, in, out));
    for (auto& w : work) w->wait();
  };
  // Fresh inputs each time: in place, repeated sums would grow to inf in f16.
  fill(in, [&](int64_t i) { return input_value(r, i, 0); });
  issue(warmup);
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  issue(iters);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  Mode m{reduce_scalar(comm, static_cast<float>(us), ReduceOp::max), -1};
  if (check) {
    fill(out, [](int64_t) { return kUnwritten; });  // in place, `in` then overwrites its part
    fill(in, [&](int64_t i) { return input_value(r, i, 1); });
    coll.run(comm, in, out)->wait();
    const int64_t wrong = count_wrong(out, [&](int64_t i) { return coll.expected(n, r, count, i, 1); });
    m.wrong = static_cast<int64_t>(reduce_scalar(comm, static_cast<float>(wrong), ReduceOp::sum));
  }
  return m;
}

// One table; returns the number of wrong elements over all rows.
int64_t run_collective(Communicator& comm, const Collective& coll, const Options& o, const Tensor& send,
                       const Tensor& recv, double memcpy_bw, const Rates& rates) {
  const int n = comm.size(), r = comm.rank();
  const bool root = r == 0 && o.prints;
  const size_t ws = zt::dtype_size(o.dtype);
  if (root) {
    std::printf("#\n# %s\n", coll.name);
    std::printf("# %10s  %12s  %8s  %6s           out-of-place                       in-place\n", "", "", "", "");
    std::printf("# %10s  %12s  %8s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop",
                "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("# %10s  %12s  %8s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  double bw_sum = 0, bw_max = 0, mode_max[2] = {0, 0};
  int rows = 0;
  int64_t wrong_total = 0;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    const int64_t elems = bytes / static_cast<int64_t>(ws);
    const int64_t count = coll.in_full || coll.out_full ? elems / n : elems;
    const int64_t in_n = coll.in_full ? n * count : count, out_n = coll.out_full ? n * count : count;
    const int64_t size = std::max(in_n, out_n) * static_cast<int64_t>(ws);
    const bool large = o.large_bytes > 0 && bytes > o.large_bytes;
    const int iters = large ? o.large_iters : o.iters, warmup = large ? std::min(o.warmup, iters) : o.warmup;
    if (root) std::printf("%12lld  %12lld  %8s  %6s", static_cast<long long>(size), static_cast<long long>(count),
                          nccl_type_name(o.dtype), coll.redop);
    for (bool in_place : {false, true}) {
      // In place, one buffer: the one-block side is block r of the n-block side (all_reduce: the same).
      const Tensor big = recv.view(0, {std::max(in_n, out_n)});
      auto place = [&](bool full) { return full || coll.in_full == coll.out_full ? big : big.view(r * count, {count}); };
      const Tensor in = in_place ? place(coll.in_full) : send.view(0, {in_n});
      const Tensor out = in_place ? place(coll.out_full) : recv.view(0, {out_n});
      const Mode m = measure(comm, coll, in, out, count, iters, warmup, o.check);
      const double algbw = static_cast<double>(size) / 1e3 / m.us, busbw = algbw * coll.bus_factor(n);
      bw_sum += busbw;
      bw_max = std::max(bw_max, busbw);
      mode_max[in_place] = std::max(mode_max[in_place], busbw);
      ++rows;
      wrong_total += std::max<int64_t>(m.wrong, 0);
      if (root) {
        const char* tf = m.us >= 10000 ? "%7.0f" : m.us >= 100 ? "%7.1f" : "%7.2f";
        char time[32], wrong[32];
        std::snprintf(time, sizeof time, tf, m.us);
        std::snprintf(wrong, sizeof wrong, m.wrong < 0 ? "N/A" : "%lld", static_cast<long long>(m.wrong));
        std::printf("  %7s  %6.2f  %6.2f  %5s", time, algbw, busbw, wrong);
      }
    }
    if (root) {
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (root) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total),
                wrong_total ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g\n", rows ? bw_sum / rows : 0.0);
    std::printf("# max busbw / memcpy: %.1f%% (%s max busbw %.2f GB/s, memcpy %.2f GB/s)\n", 100 * bw_max / memcpy_bw,
                coll.name, bw_max, memcpy_bw);
    // busbw is bus_factor(n) bytes a second per byte of size(B), and size(B) takes least_time.
    for (bool in_place : {false, true}) {
      if (n == 1) break;  // nothing moves
      const double bound = coll.bus_factor(n) / coll.least_time(n, in_place, rates);
      std::printf("# traffic bound, %s: busbw <= %.2f GB/s (%.1f%% of memcpy); measured max %.2f GB/s, %.1f%% of it\n",
                  in_place ? "in place" : "out of place", bound, 100 * bound / memcpy_bw, mode_max[in_place],
                  100 * mode_max[in_place] / bound);
    }
    std::fflush(stdout);
  }
  return wrong_total;
}

int run(Communicator& comm, const Options& o, double memcpy_bw) {
  const bool root = comm.rank() == 0 && o.prints;
  const Rates rates = streaming_rates(comm, std::max<int64_t>(o.max_bytes, int64_t{16} << 20));
  if (root) {
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    const std::string backend(comm.backend()), dtype(zt::dtype_name(o.dtype));
    std::printf("# ztrain collectives: nranks %d (%d on this host) backend %s host %s dtype %s\n", comm.size(),
                comm.local_size(), backend.c_str(), host, dtype.c_str());
    std::printf("# minBytes %lld maxBytes %lld step: 2(factor) warmup iters: %d iters: %d", static_cast<long long>(o.min_bytes),
                static_cast<long long>(o.max_bytes), o.warmup, o.iters);
    if (o.large_bytes > 0)  // warm-up too is capped at large-iters there
      std::printf(" (%d above %lld B)", o.large_iters, static_cast<long long>(o.large_bytes));
    std::printf(" validation: %d\n# memcpy bandwidth: %.2f GB/s (read+write)\n", o.check ? 1 : 0, memcpy_bw);
    std::printf("# streaming with all %d ranks at once, per rank (read+write): copy %.2f GB/s, sum of two %.2f GB/s\n",
                comm.size(), rates.copy, rates.sum);
    std::fflush(stdout);
  }
  // Two buffers of max-bytes, as nccl-tests allocates: every size and mode uses views of them.
  const int64_t elems = o.max_bytes / static_cast<int64_t>(zt::dtype_size(o.dtype));
  const Tensor send = Tensor::empty({elems}, o.dtype, MemCategory::communication);
  const Tensor recv = Tensor::empty({elems}, o.dtype, MemCategory::communication);
  int64_t wrong = 0;
  for (const Collective& c : kCollectives)
    if (o.op == "all" || o.op == c.name) wrong += run_collective(comm, c, o, send, recv, memcpy_bw, rates);
  return wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The yardstick comes first, while the other ranks block in MPI_Init: once the communicator
  // exists they would wait by polling, and take the cores from the copy.
  const double memcpy_bw = zt::detect_launch().rank == 0 ? memcpy_gbps(size_t{256} << 20) : 0;
  auto pg = zt::ProcessGroup::start(&argc, &argv);
  try {
    Options o = parse(argc, argv);
    Communicator& world = pg->world();
    if (o.across_groups == 1) return run(world, o, memcpy_bw);
    if (world.size() % o.across_groups != 0)
      throw std::invalid_argument("collectives: --across-groups " + std::to_string(o.across_groups) +
                                  " does not divide the " + std::to_string(world.size()) + " ranks");
    // Rank 0's set prints (its rank 0 is the world's); each set's yardstick is rank 0's memcpy.
    const std::unique_ptr<Communicator> across = world.split(world.rank() % o.across_groups, world.rank());
    o.prints = world.rank() == 0;
    if (o.prints)
      std::printf("# across groups of %d: %d sets of %d ranks run each collective at once; the rows are rank 0's set's\n",
                  o.across_groups, o.across_groups, across->size());
    const int wrong = run(*across, o, memcpy_bw);
    world.barrier();  // the other sets' rows are not printed, but they ran at once
    return wrong;
  } catch (const std::exception& e) {
    pg->fail(e.what());
  }
}
