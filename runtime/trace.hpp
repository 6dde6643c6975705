// Trace: spans of time per lane (compute, each collective, I/O, the optimizer) recorded on every
// rank and merged into one Chrome trace ("Trace Event Format" JSON) that chrome://tracing and
// Perfetto open: one process per rank ("rank r"), one thread per lane, complete ("X") events with
// ts/dur in microseconds from the earliest event of the job. The same spans answer how much
// communication ran while compute was busy (hidden_share), which the benchmark reports.
//
// [Note: overlapping spans on a lane] Complete events on one thread must nest; asynchronous
// collectives on one lane (prefetching block3's and block4's all_gather) overlap without nesting,
// which the viewers draw wrongly or drop. Spans that nest (a step around its blocks) share a row;
// one that would cross another goes to the lane's next free row. Row 0 of a lane has tid = lane, row
// k has tid = lane + k * kTraceLanes and is named "<lane> #<k+1>". Without such overlaps tid = lane.
//
// [Note: trace clocks] Spans are steady_clock time points. When every rank of the communicator is
// on one host they share that clock and are written as recorded. Across hosts the clocks have
// unrelated origins, so write() first aligns them at a barrier: each rank takes the moment it
// leaves the barrier as a common origin, which is off by the barrier's release skew (microseconds
// on a fast network), not by anything that grows with the run.
//
// [Note: trace write errors] write() is collective but only rank 0 touches the file, after every
// collective of the call is done: the other ranks return as soon as their events are sent, and an
// I/O error throws std::runtime_error on rank 0 alone, which ends the job the usual way ([Note:
// failing the job] in comm/process_group.hpp). Nothing rank 0 sees can leave the others waiting.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "offload/io_engine.hpp"

namespace zt {

enum class TraceLane : uint8_t { compute, all_gather, reduce_scatter, all_reduce, io, optimizer };
inline constexpr int kTraceLanes = 6;
std::string_view trace_lane_name(TraceLane lane);

class Trace;
// An I/O transfer (offload's reads and writes) as a span on the io lane, from its submission to its
// completion; nothing without a trace or a transfer (host-memory copies have none).
void trace_transfer(Trace* trace, const std::string& name, const IoTransferPtr& io);

class Trace {
 public:
  using clock = std::chrono::steady_clock;

  // `rank` is the pid in the written file (the world rank, also when write() runs on a split).
  explicit Trace(int rank);
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  int rank() const { return rank_; }

  // Thread-safe (the MPI progress thread may record). `name` e.g. "forward block3",
  // "all_gather block3". Throws std::invalid_argument naming the span when end < begin.
  void span(TraceLane lane, std::string name, clock::time_point begin, clock::time_point end);

  // Records [construction, close() or destruction) on a lane. A Scope on a null Trace records
  // nothing, so code that may run without --trace holds a Trace* and pays one branch.
  class Scope {
   public:
    Scope(Trace* trace, TraceLane lane, std::string name);
    ~Scope() { close(); }
    Scope(Scope&& o) noexcept;
    Scope& operator=(Scope&&) = delete;
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    // Ends the span now; later calls and the destructor do nothing.
    void close() noexcept;

   private:
    Trace* trace_;
    TraceLane lane_;
    std::string name_;
    clock::time_point begin_;
  };
  Scope scope(TraceLane lane, std::string name) { return Scope(this, lane, std::move(name)); }

  size_t size() const;
  void clear();

  // Collective over `comm` (every rank calls it, with the same path or not; only rank 0's is
  // used): rank 0 writes every rank's events as one JSON file at `path`, through a temporary file
  // and a rename so a reader never sees half a file ([Note: replacing a file] in
  // runtime/file_io.hpp). See [Note: trace write errors], [Note: trace clocks], [Note:
  // overlapping spans on a lane].
  void write(Communicator& comm, const std::string& path) const;

  // This rank's share of the time on `comm_lane` (a collective's or I/O) during which compute ran
  // (the compute or the optimizer lane): |union(comm spans) ∩ union(compute spans)| /
  // |union(comm spans)|; 0 without time on `comm_lane`.
  double hidden_share(TraceLane comm_lane) const;
  double busy_seconds(TraceLane lane) const;  // |union of the lane's spans|

  struct Event {
    TraceLane lane;
    std::string name;
    int64_t begin_ns, end_ns;  // clock::time_since_epoch
  };

 private:
  std::vector<Event> snapshot() const;
  std::vector<std::pair<int64_t, int64_t>> intervals(TraceLane lane) const;  // [begin_ns, end_ns) of its spans

  int rank_;
  mutable std::mutex m_;
  std::vector<Event> events_;
};

}  // namespace zt
