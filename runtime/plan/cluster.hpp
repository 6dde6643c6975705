// A cluster as `ztrain simulate` sees it: devices per node, each device's compute and memory
// rates, and the links between devices within and across nodes, read from a JSON file
// (bench/clusters/ has examples; the README's `ztrain simulate` section lists the keys).
//
// [Note: collective cost] A collective of N bytes (the whole buffer, as nccl-tests sizes it) over
// n ranks on k nodes (m a node) costs, as NCCL's ring algorithm runs it and its tuner models it,
// latency + factor x N / busbw, where factor is (n-1)/n for an all-gather or a reduce-scatter and
// 2(n-1)/n for an all-reduce, and latency is, of the ring's n-1 steps (twice that for an
// all-reduce), k-1 at the inter link's latency and the rest at the intra link's. The tree
// algorithm (all-reduce only; "algorithm": "auto" or "tree") costs 2((m-1) intra latencies +
// ceil(log2 k) inter latencies) + 2 N / busbw, and "auto" takes the faster, as NCCL's tuner would.
// busbw, the bus bandwidth of nccl-tests, is the link's: within a node the intra link's; across
// nodes, where every node has `per_node` NICs of `bandwidth` each, shared by the groups that run
// the same collective at once (devices_per_node / m of them), the least of the intra link's
// (m > 1) and per_node x bandwidth x m / devices_per_node. A link may give its own (bandwidth,
// latency) per collective, as fitted from bench/collectives runs.
#pragma once

#include <array>
#include <string>

#include "runtime/trace.hpp"

namespace zt {

struct LinkCost {
  double bandwidth = 0;  // bytes/s: nccl-tests' bus bandwidth
  double latency = 0;    // seconds per algorithm step
};

struct Link {
  LinkCost cost;
  std::array<LinkCost, 3> per_collective{};  // all_gather, reduce_scatter, all_reduce; 0 bandwidth: `cost`
  int per_node = 1;                          // the inter link: NICs per node
  const LinkCost& for_collective(TraceLane kind) const;
};

enum class Algorithm : uint8_t { ring, tree, automatic };
// How collectives move while the device computes: async (NCCL's kernels beside the compute
// stream, or a progress thread on cores of their own) or polled (the host's compute threads take
// every core, so collectives advance only where the ZeRO scheduler tests them, at unit
// boundaries and waits, on the compute thread: ZeroConfig's comm_progress "poll").
enum class Progress : uint8_t { async, polled };

struct Cluster {
  std::string name;
  int devices_per_node = 1;
  double flops = 0;             // dense flop/s of one device
  double memory_bandwidth = 0;  // bytes/s of one device
  double step_overhead = 0;     // seconds a step of host work outside the model and the engine (data, loss)
  std::array<double, 3> efficiency{1, 1, 1};  // of gemm, attention (of flops), memory (of bandwidth)
  Link intra, inter;
  Algorithm algorithm = Algorithm::automatic;
  Progress progress = Progress::async;
};

// Reads `path`. ConfigError naming the file and the key for a missing, mistyped or out-of-range
// value, an unknown key, or a file that is not JSON.
Cluster load_cluster(const std::string& path);

// How a group's ranks lie on the nodes: n ranks, m of them on each of k nodes.
struct GroupShape {
  int ranks = 1, per_node = 1, nodes = 1;
};

// A collective's index in per-collective arrays: all_gather 0, reduce_scatter 1, all_reduce 2.
// std::logic_error for another lane.
int collective_index(TraceLane kind);

// Seconds for collective `kind` of `bytes` over `shape` ([Note: collective cost]); 0 for one rank.
double collective_seconds(const Cluster& c, TraceLane kind, const GroupShape& shape, double bytes);

}  // namespace zt
