#include "runtime/trace.hpp"

#include "runtime/file_io.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace zt {

void trace_transfer(Trace* trace, const std::string& name, const IoTransferPtr& io) {
  if (!trace || !io) return;
  trace->span(TraceLane::io, name, io->started_at(), std::max(io->started_at(), io->completed_at()));
}

std::string_view trace_lane_name(TraceLane lane) {
  switch (lane) {
    case TraceLane::compute: return "compute";
    case TraceLane::all_gather: return "all_gather";
    case TraceLane::reduce_scatter: return "reduce_scatter";
    case TraceLane::all_reduce: return "all_reduce";
    case TraceLane::io: return "io";
    case TraceLane::optimizer: return "optimizer";
  }
  return "?";
}

namespace {

using Interval = std::pair<int64_t, int64_t>;

// Sorted, disjoint, non-empty intervals covering the same time as `v`.
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second)
      out.back().second = std::max(out.back().second, i.second);
    else
      out.push_back(i);
  }
  return out;
}

int64_t total(const std::vector<Interval>& v) {
  int64_t t = 0;
  for (const Interval& i : v) t += i.second - i.first;
  return t;
}

// |a ∩ b| of two merged() lists.
int64_t overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t t = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    t += std::max<int64_t>(0, std::min(a[i].second, b[j].second) - std::max(a[i].first, b[j].first));
    if (a[i].second < b[j].second) ++i; else ++j;
  }
  return t;
}

// ---- the bytes one rank sends -------------------------------------------------------------------
// Host byte order: the ranks of one job run the same binary on the same architecture.
// header: magic u32, rank i32, count u64; then per event: tid u32, name bytes u32, begin i64
// (ns from the rank's clock origin), dur i64 (ns), the name.
constexpr uint32_t kMagic = 0x5a545452;  // "ZTTR"

struct WireEvent {
  uint32_t tid;
  int64_t begin_ns, dur_ns;
  std::string name;
};

template <class T> void put(std::string& out, T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

struct Reader {
  const char* p;
  const char* end;
  int from;  // the rank whose bytes these are, for the message
  template <class T> T get() {
    T v;
    need(sizeof v);
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  std::string str(size_t n) {
    need(n);
    std::string s(p, n);
    p += n;
    return s;
  }
  void need(size_t n) const {
    if (static_cast<size_t>(end - p) < n)
      throw std::runtime_error("trace: the events from rank " + std::to_string(from) + " are cut short");
  }
};

// [Note: overlapping spans on a lane] Sorted by begin, longest first, each span goes on the first
// row of its lane where it nests inside what is still open there (or nothing is).
std::vector<WireEvent> to_wire(std::vector<Trace::Event> events, int64_t origin_ns) {
  std::sort(events.begin(), events.end(), [](const Trace::Event& a, const Trace::Event& b) {
    return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.end_ns > b.end_ns;
  });
  std::vector<std::vector<std::vector<int64_t>>> open(kTraceLanes);  // lane -> row -> stack of ends
  std::vector<WireEvent> out;
  out.reserve(events.size());
  for (Trace::Event& e : events) {
    auto& rows = open[static_cast<size_t>(e.lane)];
    size_t row = 0;
    for (; row < rows.size(); ++row) {
      auto& stack = rows[row];
      while (!stack.empty() && stack.back() <= e.begin_ns) stack.pop_back();
      if (stack.empty() || stack.back() >= e.end_ns) break;
    }
    if (row == rows.size()) rows.emplace_back();
    rows[row].push_back(e.end_ns);
    out.push_back({static_cast<uint32_t>(static_cast<size_t>(e.lane) + row * kTraceLanes), e.begin_ns - origin_ns,
                   e.end_ns - e.begin_ns, std::move(e.name)});
  }
  return out;
}

std::string serialize(int rank, const std::vector<WireEvent>& events) {
  std::string out;
  put(out, kMagic);
  put(out, static_cast<int32_t>(rank));
  put(out, static_cast<uint64_t>(events.size()));
  for (const WireEvent& e : events) {
    put(out, e.tid);
    put(out, static_cast<uint32_t>(e.name.size()));
    put(out, e.begin_ns);
    put(out, e.dur_ns);
    out += e.name;
  }
  return out;
}

struct RankEvents {
  int rank;
  std::vector<WireEvent> events;
};

RankEvents deserialize(const char* data, size_t bytes, int from) {
  Reader r{data, data + bytes, from};
  if (r.get<uint32_t>() != kMagic)
    throw std::runtime_error("trace: the events from rank " + std::to_string(from) + " are not a trace");
  RankEvents out{r.get<int32_t>(), {}};
  const uint64_t n = r.get<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    WireEvent e;
    e.tid = r.get<uint32_t>();
    const uint32_t len = r.get<uint32_t>();
    e.begin_ns = r.get<int64_t>();
    e.dur_ns = r.get<int64_t>();
    e.name = r.str(len);
    out.events.push_back(std::move(e));
  }
  return out;
}

// ---- the JSON -----------------------------------------------------------------------------------

// Microseconds with nanosecond digits, exactly (ns >= 0).
void append_us(std::string& s, int64_t ns) {
  s += std::to_string(ns / 1000);
  const int frac = static_cast<int>(ns % 1000);
  s += '.';
  s += static_cast<char>('0' + frac / 100);
  s += static_cast<char>('0' + frac / 10 % 10);
  s += static_cast<char>('0' + frac % 10);
}

std::string quoted(const std::string& s) {
  // Names are ours, but a bad UTF-8 byte must not make the whole file unreadable.
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string thread_name(uint32_t tid) {
  std::string name(trace_lane_name(static_cast<TraceLane>(tid % kTraceLanes)));
  if (tid >= static_cast<uint32_t>(kTraceLanes)) name += " #" + std::to_string(tid / kTraceLanes + 1);
  return name;
}

void write_json(std::ostream& out, const std::vector<RankEvents>& ranks, bool aligned) {
  int64_t earliest = INT64_MAX;
  for (const RankEvents& r : ranks)
    for (const WireEvent& e : r.events) earliest = std::min(earliest, e.begin_ns);

  out << "{\"traceEvents\": [\n";
  bool first = true;
  std::string line;
  const auto emit = [&](const std::string& l) {
    out << (first ? "" : ",\n") << l;
    first = false;
  };
  for (const RankEvents& r : ranks) {
    const std::string pid = std::to_string(r.rank);
    emit("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + pid + ", \"tid\": 0, \"args\": {\"name\": \"rank " +
         pid + "\"}}");
    emit("{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " + pid + ", \"tid\": 0, \"args\": {\"sort_index\": " +
         pid + "}}");
    std::vector<uint32_t> tids;
    for (const WireEvent& e : r.events) tids.push_back(e.tid);
    std::sort(tids.begin(), tids.end());
    tids.erase(std::unique(tids.begin(), tids.end()), tids.end());
    for (uint32_t tid : tids) {
      const std::string t = std::to_string(tid);
      // Rows of one lane side by side, lanes in enum order.
      const std::string sort = std::to_string((tid % kTraceLanes) * 1000 + tid / kTraceLanes);
      emit("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid + ", \"tid\": " + t +
           ", \"args\": {\"name\": " + quoted(thread_name(tid)) + "}}");
      emit("{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": " + pid + ", \"tid\": " + t +
           ", \"args\": {\"sort_index\": " + sort + "}}");
    }
    for (const WireEvent& e : r.events) {
      line = "{\"name\": " + quoted(e.name) + ", \"ph\": \"X\", \"pid\": " + pid + ", \"tid\": " + std::to_string(e.tid) +
             ", \"ts\": ";
      append_us(line, e.begin_ns - earliest);
      line += ", \"dur\": ";
      append_us(line, e.dur_ns);
      line += '}';
      emit(line);
    }
  }
  out << "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"ranks\": " << ranks.size()
      << ", \"clock\": \"" << (aligned ? "steady_clock, aligned at a barrier" : "steady_clock of one host")
      << "\"}}\n";
}

[[noreturn]] void write_failed(const std::string& path, const std::string& why) {
  throw std::runtime_error("trace: cannot write '" + path + "': " + why);
}

void write_file(const std::string& path, const std::vector<RankEvents>& ranks, bool aligned) {
  // [Note: replacing a file] in runtime/file_io.hpp; removed again unless committed.
  ReplacedFile file(path, "trace: cannot write '" + path + "'");
  std::ofstream out;
  errno = 0;
  out.open(file.temp_path(), std::ios::binary | std::ios::trunc);
  if (!out) write_failed(path, "cannot open '" + file.temp_path() + "'" + (errno ? std::string(": ") + std::strerror(errno) : ""));
  write_json(out, ranks, aligned);
  errno = 0;
  out.close();
  if (!out) write_failed(path, "writing '" + file.temp_path() + "' failed" + (errno ? std::string(": ") + std::strerror(errno) : ""));
  file.commit();
}

}  // namespace

// ---- Trace --------------------------------------------------------------------------------------

Trace::Trace(int rank) : rank_(rank) {}

void Trace::span(TraceLane lane, std::string name, clock::time_point begin, clock::time_point end) {
  if (end < begin) throw std::invalid_argument("trace: span '" + name + "' ends before it begins");
  const auto ns = [](clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  Event e{lane, std::move(name), ns(begin), ns(end)};
  std::lock_guard lock(m_);
  events_.push_back(std::move(e));
}

Trace::Scope::Scope(Trace* trace, TraceLane lane, std::string name)
    : trace_(trace), lane_(lane), name_(trace ? std::move(name) : std::string()), begin_(clock::now()) {}

Trace::Scope::Scope(Scope&& o) noexcept
    : trace_(std::exchange(o.trace_, nullptr)), lane_(o.lane_), name_(std::move(o.name_)), begin_(o.begin_) {}

void Trace::Scope::close() noexcept {
  if (!trace_) return;
  Trace* t = std::exchange(trace_, nullptr);
  // This may run while an exception unwinds; losing one span beats std::terminate on bad_alloc.
  try {
    t->span(lane_, std::move(name_), begin_, clock::now());
  } catch (...) {
  }
}

size_t Trace::size() const {
  std::lock_guard lock(m_);
  return events_.size();
}

void Trace::clear() {
  std::lock_guard lock(m_);
  events_.clear();
}

std::vector<Trace::Event> Trace::snapshot() const {
  std::lock_guard lock(m_);
  return events_;
}

void Trace::write(Communicator& comm, const std::string& path) const {
  // [Note: trace clocks]
  const bool aligned = comm.local_size() != comm.size();
  int64_t origin_ns = 0;
  if (aligned) {
    comm.barrier();
    origin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
  }
  const std::string bytes = serialize(rank_, to_wire(snapshot(), origin_ns));

  // Byte counts first, so the payloads can be padded to the largest ([Note: collective shapes]).
  // A count that does not fit is sent as -1 so that every rank throws, rather than one leaving.
  const int n = comm.size();
  Tensor count = Tensor::empty({1}, DType::i32, MemCategory::communication);
  Tensor counts = Tensor::empty({n}, DType::i32, MemCategory::communication);
  count.data<int32_t>()[0] = bytes.size() > static_cast<size_t>(INT32_MAX) ? -1 : static_cast<int32_t>(bytes.size());
  comm.all_gather(count, counts);
  int64_t most = 0;
  for (int r = 0; r < n; ++r) {
    const int32_t c = counts.data<int32_t>()[r];
    if (c < 0)
      throw std::runtime_error("trace: rank " + std::to_string(r) + " has over 2 GiB of events for '" + path + "'");
    most = std::max<int64_t>(most, c);
  }

  const int64_t words = (most + 3) / 4;
  Tensor mine = Tensor::zeros({words}, DType::i32, MemCategory::communication);
  Tensor all = Tensor::empty({words * n}, DType::i32, MemCategory::communication);
  std::memcpy(mine.raw(), bytes.data(), bytes.size());
  comm.all_gather(mine, all);
  if (comm.rank() != 0) return;  // [Note: trace write errors]

  std::vector<RankEvents> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(deserialize(static_cast<const char*>(all.raw()) + static_cast<size_t>(r * words) * 4,
                                static_cast<size_t>(counts.data<int32_t>()[r]), r));
  write_file(path, ranks, aligned);
}

std::vector<std::pair<int64_t, int64_t>> Trace::intervals(TraceLane lane) const {
  std::vector<Interval> v;
  std::lock_guard lock(m_);
  for (const Event& e : events_)
    if (e.lane == lane) v.emplace_back(e.begin_ns, e.end_ns);
  return v;
}

double Trace::busy_seconds(TraceLane lane) const { return static_cast<double>(total(merged(intervals(lane)))) * 1e-9; }

double Trace::hidden_share(TraceLane comm_lane) const {
  const std::vector<Interval> comm = merged(intervals(comm_lane));
  const int64_t busy = total(comm);
  if (busy == 0) return 0.0;
  // The optimizer lane is compute too: AdamW's spans are its arithmetic alone (offloaded, one span
  // a sub-group, without the waits on I/O between them).
  std::vector<Interval> compute = intervals(TraceLane::compute), optimizer = intervals(TraceLane::optimizer);
  compute.insert(compute.end(), optimizer.begin(), optimizer.end());
  return static_cast<double>(overlap(comm, merged(std::move(compute)))) / static_cast<double>(busy);
}

}  // namespace zt
