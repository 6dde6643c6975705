// runtime/trace: spans recorded from several threads, the merged Chrome trace every rank's events
// reach (read back with nlohmann::json), rows for spans that overlap on a lane, hidden_share and
// busy_seconds on spans of known times, and write errors that throw on rank 0 while the other
// ranks carry on.
//
// Run under `mpirun -np N test_trace` (every rank runs every test case, in the same order) or alone.
// As in test_comm.cpp, test cases that call write() only CHECK (never REQUIRE) until their
// collectives are done, so no rank leaves a test case early and strands the others.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/process_group.hpp"
#include "runtime/trace.hpp"
#include "test_util.hpp"

using namespace zt;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

ProcessGroup* g_pg = nullptr;
Communicator& world() { return g_pg->world(); }

constexpr TraceLane kLanes[] = {TraceLane::compute, TraceLane::all_gather, TraceLane::reduce_scatter,
                                TraceLane::all_reduce, TraceLane::io, TraceLane::optimizer};

// Time points at whole microseconds from a fixed origin, so expected ts/dur are exact. The origin is
// an hour back so that spans built from it never meet the spans Scopes record now.
struct Clock {
  Trace::clock::time_point base = Trace::clock::now() - 1h;
  Trace::clock::time_point at_us(int64_t us) const { return base + std::chrono::microseconds(us); }
  Trace::clock::time_point at_ms(int64_t ms) const { return at_us(ms * 1000); }
};

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, "cannot read " << path);
  return json::parse(in);
}

// The trace's events of phase `ph` on process `pid`.
std::vector<json> events(const json& trace, const std::string& ph, int pid) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == ph && e.at("pid") == pid) out.push_back(e);
  return out;
}

// The name a metadata event of `kind` gives (pid, tid), or "" when there is none.
std::string meta_name(const json& trace, const std::string& kind, int pid, int tid) {
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == kind && e.at("pid") == pid && (kind != "thread_name" || e.at("tid") == tid))
      return e.at("args").at("name").get<std::string>();
  return "";
}

// What one rank records for the merge test: per lane l, l+1 spans "r<rank> <lane> <i>" of
// (100 * i + rank + 1) µs starting at 10000 * l + 600 * i µs (one after another, so each lane keeps
// tid = lane), `rank` extra compute spans so that payloads differ in size, and spans from 4 threads
// at once.
constexpr int kThreads = 4, kPerThread = 25;

// "r<rank> ", built by appending: GCC 12 at -O3 warns (-Wrestrict, a false positive, GCC bug
// 105329) on "literal" + std::to_string(...).
std::string rank_prefix(int rank) {
  std::string s = "r";
  s += std::to_string(rank);
  s += ' ';
  return s;
}

void record(Trace& t, int rank, const Clock& c) {
  for (int l = 0; l < kTraceLanes; ++l)
    for (int i = 0; i <= l; ++i) {
      const std::string name = rank_prefix(rank) + std::string(trace_lane_name(kLanes[l])) + " " + std::to_string(i);
      const int64_t b = 10000 * l + 600 * i, d = 100 * i + rank + 1;
      t.span(kLanes[l], name, c.at_us(b), c.at_us(b + d));
    }
  for (int i = 0; i < rank; ++i) {
    const std::string name = rank_prefix(rank) + "extra " + std::to_string(i);
    t.span(TraceLane::compute, name, c.at_us(5000 + 10 * i), c.at_us(5000 + 10 * i + 5));
  }
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&t, k] {
      for (int i = 0; i < kPerThread; ++i) {
        auto s = t.scope(TraceLane::io, "thread " + std::to_string(k) + " read " + std::to_string(i));
        std::this_thread::sleep_for(1us);
      }
    });
  for (std::thread& th : threads) th.join();
}

}  // namespace

TEST_CASE("lane names") {
  CHECK(trace_lane_name(TraceLane::compute) == "compute");
  CHECK(trace_lane_name(TraceLane::all_gather) == "all_gather");
  CHECK(trace_lane_name(TraceLane::reduce_scatter) == "reduce_scatter");
  CHECK(trace_lane_name(TraceLane::all_reduce) == "all_reduce");
  CHECK(trace_lane_name(TraceLane::io) == "io");
  CHECK(trace_lane_name(TraceLane::optimizer) == "optimizer");
}

TEST_CASE("spans from several threads, scopes, clear") {
  Trace t(g_pg->rank());
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k)
    threads.emplace_back([&t, k] {
      for (int i = 0; i < 500; ++i) {
        if (i % 2) {
          auto s = t.scope(kLanes[k % kTraceLanes], "scope");
        } else {
          const auto now = Trace::clock::now();
          t.span(kLanes[k % kTraceLanes], "span", now, now + 1us);
        }
      }
    });
  for (std::thread& th : threads) th.join();
  CHECK(t.size() == 8 * 500);

  // close() ends the span early; a moved-from Scope and a Scope on no Trace record nothing.
  t.clear();
  CHECK(t.size() == 0);
  {
    auto a = t.scope(TraceLane::optimizer, "step");
    auto b = std::move(a);
    b.close();
    CHECK(t.size() == 1);
    Trace::Scope none(nullptr, TraceLane::compute, "nothing");
  }
  CHECK(t.size() == 1);
  CHECK(t.busy_seconds(TraceLane::optimizer) >= 0.0);

  const auto now = Trace::clock::now();
  CHECK_THROWS_WITH_AS(t.span(TraceLane::compute, "backwards", now, now - 1ms),
                       doctest::Contains("'backwards' ends before it begins"), std::invalid_argument);
}

TEST_CASE("hidden_share and busy_seconds") {
  Clock c;
  Trace t(0);
  CHECK(t.hidden_share(TraceLane::all_gather) == 0.0);
  CHECK(t.busy_seconds(TraceLane::compute) == 0.0);

  // comm [0,10) ms, compute [5,20) ms: half the comm time is hidden.
  t.span(TraceLane::all_gather, "ag", c.at_ms(0), c.at_ms(10));
  t.span(TraceLane::compute, "fwd", c.at_ms(5), c.at_ms(20));
  CHECK(t.hidden_share(TraceLane::all_gather) == doctest::Approx(0.5));
  CHECK(t.busy_seconds(TraceLane::all_gather) == doctest::Approx(0.010));
  CHECK(t.busy_seconds(TraceLane::compute) == doctest::Approx(0.015));
  CHECK(t.hidden_share(TraceLane::reduce_scatter) == 0.0);  // no time on that lane

  // Overlapping comm spans count once: comm covers [0,12) ms, 7 ms of it under compute.
  t.span(TraceLane::all_gather, "ag2", c.at_ms(5), c.at_ms(10));
  t.span(TraceLane::all_gather, "ag3", c.at_ms(8), c.at_ms(12));
  CHECK(t.busy_seconds(TraceLane::all_gather) == doctest::Approx(0.012));
  CHECK(t.hidden_share(TraceLane::all_gather) == doctest::Approx(7.0 / 12.0));

  // Overlapping compute counts once too; compute spans in comm gaps add nothing.
  t.span(TraceLane::compute, "bwd", c.at_ms(6), c.at_ms(9));
  t.span(TraceLane::compute, "gap", c.at_ms(30), c.at_ms(40));
  CHECK(t.hidden_share(TraceLane::all_gather) == doctest::Approx(7.0 / 12.0));
  CHECK(t.busy_seconds(TraceLane::compute) == doctest::Approx(0.025));

  // Several disjoint pieces on both lanes: comm [100,110) [120,130), compute [105,125) -> 10/20.
  Trace u(0);
  u.span(TraceLane::reduce_scatter, "a", c.at_ms(100), c.at_ms(110));
  u.span(TraceLane::reduce_scatter, "b", c.at_ms(120), c.at_ms(130));
  u.span(TraceLane::compute, "c", c.at_ms(105), c.at_ms(125));
  u.span(TraceLane::compute, "zero", c.at_ms(101), c.at_ms(101));
  CHECK(u.hidden_share(TraceLane::reduce_scatter) == doctest::Approx(0.5));
  CHECK(u.hidden_share(TraceLane::all_reduce) == 0.0);

  // I/O under AdamW's spans (the optimizer lane counts as compute): io [0,10), adamw [2,4) [6,7).
  Trace o(0);
  o.span(TraceLane::io, "read", c.at_ms(0), c.at_ms(10));
  o.span(TraceLane::optimizer, "adamw 0", c.at_ms(2), c.at_ms(4));
  o.span(TraceLane::optimizer, "adamw 1", c.at_ms(6), c.at_ms(7));
  CHECK(o.hidden_share(TraceLane::io) == doctest::Approx(0.3));
}

TEST_CASE("write merges every rank into one trace") {
  const int rank = world().rank(), n = world().size();
  test::TempDir dir;
  const std::string path = dir / "trace.json";
  Trace t(rank);
  Clock c;
  record(t, rank, c);
  // Overlapping collectives on one lane: b crosses a (second row), c nests in a (first row).
  t.span(TraceLane::all_gather, "overlap a", c.at_ms(100), c.at_ms(110));
  t.span(TraceLane::all_gather, "overlap b", c.at_ms(105), c.at_ms(115));
  t.span(TraceLane::all_gather, "overlap c", c.at_ms(101), c.at_ms(103));
  t.span(TraceLane::all_gather, "overlap d", c.at_ms(106), c.at_ms(116));  // crosses both: third row
  t.span(TraceLane::compute, "ns", c.at_us(50), c.at_us(50) + 1234567ns);
  const size_t recorded = t.size();

  try {
    t.write(world(), path);
  } catch (const std::exception& e) {
    FAIL_CHECK("write threw: " << e.what());
  }
  CHECK(t.size() == recorded);  // writing keeps the events
  if (rank != 0) {
    CHECK(!std::filesystem::exists(path));
    return;
  }
  CHECK(!std::filesystem::exists(path + ".tmp"));
  const json trace = read_json(path);
  CHECK(trace.at("displayTimeUnit") == "ms");
  REQUIRE(trace.at("traceEvents").is_array());

  double earliest = 1e300;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") earliest = std::min(earliest, e.at("ts").get<double>());
  CHECK(earliest == 0.0);

  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(meta_name(trace, "process_name", r, 0) == "rank " + std::to_string(r));
    const std::vector<json> xs = events(trace, "X", r);
    CHECK(xs.size() == recorded - static_cast<size_t>(rank) + static_cast<size_t>(r));
    std::map<std::string, const json*> by_name;
    std::set<int> tids;
    for (const json& e : xs) {
      by_name[e.at("name").get<std::string>()] = &e;
      tids.insert(e.at("tid").get<int>());
      CHECK(e.at("ts").get<double>() >= 0.0);
      CHECK(e.at("dur").get<double>() >= 0.0);
    }
    const auto ev = [&](const std::string& name) -> const json& {
      const auto it = by_name.find(name);
      REQUIRE_MESSAGE(it != by_name.end(), "no event named '" << name << "'");
      return *it->second;
    };
    for (int tid : tids) {
      CAPTURE(tid);
      const std::string lane(trace_lane_name(kLanes[tid % kTraceLanes]));
      CHECK(meta_name(trace, "thread_name", r, tid) == (tid < kTraceLanes ? lane : lane + " #" + std::to_string(tid / kTraceLanes + 1)));
    }

    // Every lane's spans, on tid = lane, with the recorded durations and offsets.
    const std::string prefix = rank_prefix(r);
    for (int l = 0; l < kTraceLanes; ++l) {
      const std::string lane(trace_lane_name(kLanes[l]));
      const json& first = ev(prefix + lane + " 0");
      for (int i = 0; i <= l; ++i) {
        const json& e = ev(prefix + lane + " " + std::to_string(i));
        CHECK(e.at("tid") == l);
        CHECK(e.at("dur").get<double>() == doctest::Approx(100 * i + r + 1).epsilon(1e-12));
        CHECK(e.at("ts").get<double>() - first.at("ts").get<double>() == doctest::Approx(600 * i).epsilon(1e-9));
      }
    }
    for (int i = 0; i < r; ++i) {
      const json& e = ev(prefix + "extra " + std::to_string(i));
      CHECK(e.at("tid") == 0);
      CHECK(e.at("dur").get<double>() == 5.0);
    }
    for (int k = 0; k < kThreads; ++k)
      for (int i = 0; i < kPerThread; ++i) {
        CHECK(ev("thread " + std::to_string(k) + " read " + std::to_string(i)).at("dur").get<double>() >= 0.001);
      }

    // [Note: overlapping spans on a lane]
    const int ag = static_cast<int>(TraceLane::all_gather);
    CHECK(ev("overlap a").at("tid") == ag);
    CHECK(ev("overlap c").at("tid") == ag);
    CHECK(ev("overlap b").at("tid") == ag + kTraceLanes);
    CHECK(ev("overlap d").at("tid") == ag + 2 * kTraceLanes);
    CHECK(meta_name(trace, "thread_name", r, ag + 2 * kTraceLanes) == "all_gather #3");
    CHECK(ev("overlap b").at("ts").get<double>() - ev("overlap a").at("ts").get<double>() ==
          doctest::Approx(5000).epsilon(1e-9));
    CHECK(ev("ns").at("dur").get<double>() == doctest::Approx(1234.567).epsilon(1e-12));
  }
  CHECK(events(trace, "X", n).empty());
}

TEST_CASE("write with nothing recorded, and on a communicator of one") {
  const int rank = world().rank();
  test::TempDir dir;
  Trace empty(rank);
  try {
    empty.write(world(), dir / "empty.json");
  } catch (const std::exception& e) {
    FAIL_CHECK("write threw: " << e.what());
  }
  if (rank == 0) {
    const json trace = read_json(dir / "empty.json");
    CHECK(trace.at("traceEvents").size() == static_cast<size_t>(2 * world().size()));  // process name and order
    CHECK(events(trace, "X", 0).empty());
  }

  // Every rank writes its own file through a Self communicator; pid is still the Trace's rank.
  Trace t(rank);
  Clock c;
  t.span(TraceLane::optimizer, "adamw", c.at_ms(1), c.at_ms(3));
  auto self = make_self_communicator();
  t.write(*self, dir / "own.json");
  const json trace = read_json(dir / "own.json");
  const std::vector<json> xs = events(trace, "X", rank);
  REQUIRE(xs.size() == 1);
  CHECK(xs[0].at("tid") == static_cast<int>(TraceLane::optimizer));
  CHECK(xs[0].at("ts") == 0.0);
  CHECK(xs[0].at("dur") == 2000.0);
  CHECK(meta_name(trace, "thread_name", rank, static_cast<int>(TraceLane::optimizer)) == "optimizer");
}

TEST_CASE("write errors throw on rank 0 and leave the other ranks in step") {
  const int rank = world().rank();
  test::TempDir dir;
  Trace t(rank);
  Clock c;
  t.span(TraceLane::compute, "forward", c.at_ms(0), c.at_ms(1));

  // Root can write anywhere a file can be opened, so the failures come from the path itself: a
  // folder that is a regular file (open fails), and an existing folder (the rename fails).
  const std::string not_dir = dir.write("plain", "x") + "/trace.json";
  const std::string is_dir = dir / "folder";
  std::filesystem::create_directories(is_dir + "/inside");
  for (const std::string& path : {not_dir, is_dir}) {
    CAPTURE(path);
    if (rank == 0)
      CHECK_THROWS_WITH_AS(t.write(world(), path), doctest::Contains(("trace: cannot write '" + path + "'").c_str()),
                           std::runtime_error);
    else
      CHECK_NOTHROW(t.write(world(), path));
    CHECK(!std::filesystem::exists(path + ".tmp"));
    // Still in step: the next collective completes on every rank.
    CHECK_NOTHROW(world().barrier());
  }
  CHECK(std::filesystem::is_directory(is_dir + "/inside"));

  // And a write after the failures works.
  const std::string good = dir / "good.json";
  CHECK_NOTHROW(t.write(world(), good));
  if (rank == 0) CHECK(events(read_json(good), "X", world().size() - 1).size() == 1);
}

int main(int argc, char** argv) {
  std::unique_ptr<ProcessGroup> pg;
  try {
    pg = ProcessGroup::start(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test_trace: cannot start the process group: %s\n", e.what());
    return 1;
  }
  g_pg = pg.get();
  // A rank that falls out of step fails its operation rather than hanging the test.
  pg->world().set_timeout(60s);

  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  const int res = ctx.run();

  // Every rank exits non-zero if any rank failed.
  int failed = res != 0 ? 1 : 0;
  if (!ctx.shouldExit() || res != 0) {
    try {
      Tensor f = Tensor::empty({1}, DType::i32);
      f.data<int32_t>()[0] = failed;
      pg->world().all_reduce(f, ReduceOp::max);
      failed = f.data<int32_t>()[0];
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%sthe final failure all_reduce threw: %s\n", pg->prefix().c_str(), e.what());
      failed = 1;
    }
  }
  if (failed != 0 && res == 0) std::fprintf(stderr, "%sanother rank failed\n", pg->prefix().c_str());
  return failed;
}
