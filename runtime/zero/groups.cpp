#include "runtime/zero/groups.hpp"

#include <stdexcept>
#include <utility>

#include "comm/process_group.hpp"

namespace zt {

int shard_group_ranks(const ZeroConfig& z, int world, int ranks_per_host) {
  int g = world;
  std::string key;
  if (z.hybrid) {
    g = z.shard_group_size > 0 ? z.shard_group_size : ranks_per_host;
    key = z.shard_group_size > 0 ? "zero_optimization.shard_group_size" : "the ranks per host (hybrid sharding's default group)";
  } else if (z.hpz_partition_size > 1) {
    g = z.hpz_partition_size;
    key = "zero_optimization.zero_hpz_partition_size";
  }
  if (g > world || world % g != 0)
    throw ConfigError("config: " + key + " is " + std::to_string(g) + ", which does not divide the world size " +
                      std::to_string(world) + " into groups of consecutive ranks");
  return g;
}

bool world_is_inter_group(const ZeroConfig& z, int world, int ranks_per_host, int group) {
  return group < world || (!z.hybrid && z.hpz_partition_size <= 1 && ranks_per_host != world);
}

std::shared_ptr<FollowUps::Item> FollowUps::add(WorkPtr first, std::function<WorkPtr()> then) {
  auto item = std::make_shared<Item>();
  item->first = std::move(first);
  item->then = std::move(then);
  queue_.push_back(item);
  return item;
}

void FollowUps::advance(const Item* until) {
  while (!queue_.empty()) {
    Item& head = *queue_.front();
    if (until && !until->second) head.first->wait();
    else if (!head.first->test()) return;
    head.second = head.then();
    head.then = nullptr;
    queue_.pop_front();
    if (&head == until) return;
  }
}

namespace {

// A gradient's reduction within the group and then over the replicas, as one Work.
class TwoLevelWork final : public Work {
 public:
  TwoLevelWork(FollowUps& queue, std::shared_ptr<FollowUps::Item> item) : queue_(queue), item_(std::move(item)) {}
  void wait() override {
    queue_.advance(item_.get());
    item_->second->wait();
  }
  bool test() override {
    if (!item_->second) queue_.advance();
    return item_->second && item_->second->test();
  }
  std::chrono::steady_clock::time_point completed_at() const override {
    return item_->second ? item_->second->completed_at() : std::chrono::steady_clock::time_point{};
  }

 private:
  FollowUps& queue_;
  std::shared_ptr<FollowUps::Item> item_;
};

}  // namespace

ShardGroups::ShardGroups(Communicator& world, const ZeroConfig& z) : world_(world) {
  const int n = world.size(), r = world.rank();
  if (z.hybrid && z.shard_group_size == 0 && n > 1) {
    // The default group, the ranks per host, must be the same everywhere: agreed before anything
    // may fail on one rank alone.
    const float here = static_cast<float>(world.local_size());
    if (world.all_reduce_value(here, ReduceOp::max) != -world.all_reduce_value(-here, ReduceOp::max)) {
      mark_failing_together(r == 0);
      throw ConfigError("config: the hosts hold different numbers of ranks, so hybrid sharding's default group (the "
                        "ranks per host) differs between them; set zero_optimization.shard_group_size");
    }
  }
  int g = n;
  try {
    g = shard_group_ranks(z, n, world.local_size());
  } catch (const ConfigError&) {
    if (n > 1) mark_failing_together(r == 0);  // every rank computed the same
    throw;
  }
  world_spans_ = world_is_inter_group(z, n, world.local_size(), g);
  if (g == n) return;  // one group: plain
  // Every rank takes part in both splits, in the same order.
  if (z.hybrid) {
    shard_ = world.split(r / g, r);
    replicas_ = world.split(r % g, r);
  } else {
    secondary_ = world.split(r / g, r);
  }
}

ShardGroups::ShardGroups(Communicator& world, std::unique_ptr<Communicator> shard, std::unique_ptr<Communicator> replicas,
                         std::unique_ptr<Communicator> secondary, bool world_spans)
    : world_(world),
      shard_(std::move(shard)),
      replicas_(std::move(replicas)),
      secondary_(std::move(secondary)),
      world_spans_(world_spans) {}

WorkPtr ShardGroups::then_over_replicas(WorkPtr first, const Tensor& slice) {
  if (!replicas_ || replicas_->size() == 1) return first;
  Communicator& over = *replicas_;
  auto item = follow_ups_.add(std::move(first), [&over, slice] { return over.all_reduce_async(slice, slice, ReduceOp::avg); });
  return std::make_shared<TwoLevelWork>(follow_ups_, std::move(item));
}

uint64_t ShardGroups::intra_bytes() const {
  uint64_t b = world_spans_ ? 0 : world_.bytes_sent();
  if (shard_) b += shard_->bytes_sent();
  if (secondary_) b += secondary_->bytes_sent();
  return b;
}

uint64_t ShardGroups::inter_bytes() const {
  uint64_t b = world_spans_ ? world_.bytes_sent() : 0;
  if (replicas_) b += replicas_->bytes_sent();
  return b;
}

std::string ShardGroups::describe() const {
  const std::string groups = std::to_string(world_.size() / shard().size()) + " groups of " + std::to_string(shard().size());
  if (replicas_) return "hybrid sharding: " + groups + " ranks (sharded within, replicated across)";
  if (secondary_)
    return "hpZ: secondary shards within " + std::to_string(world_.size() / secondary_->size()) + " groups of " +
           std::to_string(secondary_->size()) + " ranks";
  return "";
}

}  // namespace zt
