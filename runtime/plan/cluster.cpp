#include "runtime/plan/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <nlohmann/json.hpp>

#include "files/json_text.hpp"
#include "runtime/config.hpp"

namespace zt {

namespace {

using nlohmann::json;

constexpr const char* kCollectives[] = {"all_gather", "reduce_scatter", "all_reduce"};

// Reads one JSON object's keys for a cluster file, naming the file and the key's path in every
// error.
class Reader {
 public:
  Reader(const std::string& file, const json& j, std::string path) : file_(file), j_(j), path_(std::move(path)) {
    if (!j_.is_object()) fail(path_.empty() ? "the file must hold a JSON object" : "must be an object");
  }
  // Refuses keys outside `known`.
  void only(std::initializer_list<const char*> known) const {
    for (const auto& item : j_.items()) {
      const std::string& k = item.key();
      if (std::none_of(known.begin(), known.end(), [&](const char* n) { return k == n; }))
        throw ConfigError("cluster " + file_ + ": unknown key '" + key(k) + "'");
    }
  }
  bool has(const char* k) const { return j_.contains(k); }
  double number(const char* k, double lo, double hi, bool required = true, double fallback = 0) const {
    if (!j_.contains(k)) {
      if (required) throw ConfigError("cluster " + file_ + ": '" + key(k) + "' is missing");
      return fallback;
    }
    const json& v = j_.at(k);
    if (!v.is_number()) throw ConfigError("cluster " + file_ + ": '" + key(k) + "' must be a number");
    const double x = v.get<double>();
    if (!(x >= lo && x <= hi))
      throw ConfigError("cluster " + file_ + ": '" + key(k) + "' must be in [" + fmt(lo) + ", " + fmt(hi) + "], got " + fmt(x));
    return x;
  }
  std::string string(const char* k, const std::string& fallback) const {
    if (!j_.contains(k)) return fallback;
    if (!j_.at(k).is_string()) throw ConfigError("cluster " + file_ + ": '" + key(k) + "' must be a string");
    return j_.at(k).get<std::string>();
  }
  Reader object(const char* k) const {
    if (!j_.contains(k)) throw ConfigError("cluster " + file_ + ": '" + key(k) + "' is missing");
    return Reader(file_, j_.at(k), key(k));
  }
  std::string key(const std::string& k) const { return path_.empty() ? k : path_ + "." + k; }
  [[noreturn]] void fail(const std::string& why) const {
    throw ConfigError("cluster " + file_ + ": " + (path_.empty() ? "" : "'" + path_ + "' ") + why);
  }

 private:
  static std::string fmt(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", x);
    return b;
  }
  const std::string& file_;
  const json& j_;
  std::string path_;
};

constexpr double kHuge = 1e30;

LinkCost read_cost(const Reader& r, bool required, const LinkCost& fallback) {
  LinkCost c;
  c.bandwidth = r.number("bandwidth", 1, kHuge, required, fallback.bandwidth);
  c.latency = r.number("latency", 0, 10, required, fallback.latency);
  return c;
}

Link read_link(const Reader& r, bool inter) {
  if (inter) r.only({"bandwidth", "latency", "per_node", "collectives"});
  else r.only({"bandwidth", "latency", "collectives"});
  Link l;
  l.cost = read_cost(r, true, {});
  if (inter) l.per_node = static_cast<int>(r.number("per_node", 1, 1024, false, 1));
  if (r.has("collectives")) {
    const Reader cs = r.object("collectives");
    cs.only({"all_gather", "reduce_scatter", "all_reduce"});
    for (int i = 0; i < 3; ++i) {
      if (!cs.has(kCollectives[i])) continue;
      const Reader one = cs.object(kCollectives[i]);
      one.only({"bandwidth", "latency"});
      l.per_collective[size_t(i)] = read_cost(one, false, l.cost);
    }
  }
  return l;
}

}  // namespace

int collective_index(TraceLane kind) {
  switch (kind) {
    case TraceLane::all_gather: return 0;
    case TraceLane::reduce_scatter: return 1;
    case TraceLane::all_reduce: return 2;
    default: throw std::logic_error("collective_index: not a collective: " + std::string(trace_lane_name(kind)));
  }
}

const LinkCost& Link::for_collective(TraceLane kind) const {
  const LinkCost& own = per_collective[size_t(collective_index(kind))];
  return own.bandwidth > 0 ? own : cost;
}

Cluster load_cluster(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cluster " + path + ": cannot open it");
  std::ostringstream text;
  text << in.rdbuf();
  JsonParsed<json> parsed = parse_json(text.str());  // [Note: JSON from files] in files/json_text.hpp
  if (!parsed.ok()) throw ConfigError("cluster " + path + ": not valid JSON: " + parsed.error);
  const json j = std::move(parsed.value);
  const Reader top(path, j, "");
  top.only({"name", "devices_per_node", "device", "links", "algorithm", "progress", "comment"});
  Cluster c;
  c.name = top.string("name", path);
  c.devices_per_node = static_cast<int>(top.number("devices_per_node", 1, 1 << 16));
  const Reader dev = top.object("device");
  dev.only({"flops", "memory_bandwidth", "efficiency", "step_overhead"});
  c.flops = dev.number("flops", 1, kHuge);
  c.memory_bandwidth = dev.number("memory_bandwidth", 1, kHuge);
  c.step_overhead = dev.number("step_overhead", 0, 3600, false, 0);
  if (dev.has("efficiency")) {
    const Reader eff = dev.object("efficiency");
    eff.only({"gemm", "attention", "memory"});
    const char* names[] = {"gemm", "attention", "memory"};
    for (size_t i = 0; i < 3; ++i) c.efficiency[i] = eff.number(names[i], 1e-4, 1, false, 1);
  }
  const Reader links = top.object("links");
  links.only({"intra", "inter"});
  c.intra = read_link(links.object("intra"), false);
  c.inter = links.has("inter") ? read_link(links.object("inter"), true) : c.intra;
  const std::string a = top.string("algorithm", "auto");
  if (a == "ring") c.algorithm = Algorithm::ring;
  else if (a == "tree") c.algorithm = Algorithm::tree;
  else if (a == "auto") c.algorithm = Algorithm::automatic;
  else throw ConfigError("cluster " + path + ": 'algorithm' must be ring, tree or auto, got '" + a + "'");
  const std::string p = top.string("progress", "async");
  if (p == "async") c.progress = Progress::async;
  else if (p == "polled") c.progress = Progress::polled;
  else throw ConfigError("cluster " + path + ": 'progress' must be async or polled, got '" + p + "'");
  return c;
}

double collective_seconds(const Cluster& c, TraceLane kind, const GroupShape& shape, double bytes) {
  const int n = shape.ranks;
  if (n <= 1) return 0;
  const LinkCost& in = c.intra.for_collective(kind);
  double bandwidth = in.bandwidth, inter_latency = 0;
  if (shape.nodes > 1) {
    const LinkCost& out = c.inter.for_collective(kind);
    const double share = static_cast<double>(c.inter.per_node) * shape.per_node / c.devices_per_node;
    bandwidth = out.bandwidth * share;
    if (shape.per_node > 1) bandwidth = std::min(bandwidth, in.bandwidth);
    inter_latency = out.latency;
  }
  // Of a ring's n - 1 steps, nodes - 1 cross between nodes.
  const double nn = n, inter_steps = shape.nodes - 1, intra_steps = nn - 1 - inter_steps;
  const double ring_latency = intra_steps * in.latency + inter_steps * inter_latency;
  if (kind != TraceLane::all_reduce) return ring_latency + (nn - 1) / nn * bytes / bandwidth;
  const double ring = 2 * ring_latency + 2 * (nn - 1) / nn * bytes / bandwidth;
  const double tree = 2 * ((shape.per_node - 1) * in.latency + std::ceil(std::log2(shape.nodes)) * inter_latency) +
                      2 * bytes / bandwidth;
  switch (c.algorithm) {
    case Algorithm::ring: return ring;
    case Algorithm::tree: return tree;
    default: return std::min(ring, tree);
  }
}

}  // namespace zt
