// The ZeRO scheduler's rules ([Note: ZeRO schedule] in runtime/zero/scheduler.hpp) without ranks:
// the tape's unit hooks drive it over units that log what it asks of them and complete each
// collective at once, so the decisions (what is gathered, kept, released, reduced, and in which
// order) are checked one by one. The collectives themselves run under mpirun in tests/test_zero.sh.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/zero/scheduler.hpp"
#include "runtime/zero/unit_group.hpp"

namespace zt {
namespace {

class LoggedUnit final : public ScheduledUnit {
 public:
  LoggedUnit(std::string name, int64_t numel, bool persistent, std::vector<std::string>& log)
      : name_(std::move(name)), numel_(numel), persistent_(persistent), log_(log) {}
  const std::string& name() const override { return name_; }
  int64_t numel() const override { return numel_; }
  bool persistent() const override { return persistent_; }
  ParamState state() const override { return state_; }
  void start_gather() override {
    REQUIRE(state_ == ParamState::sharded);
    state_ = ParamState::gathering;
    log_.push_back("gather " + name_);
  }
  bool gather_done() override { return state_ != ParamState::gathering; }  // completes when waited for
  void wait_gather() override {
    if (state_ == ParamState::gathering) state_ = ParamState::gathered;
  }
  void release() override {
    REQUIRE(state_ == ParamState::gathered);
    if (persistent_) return;  // as ShardedUnit: kept parameters stay
    state_ = ParamState::sharded;
    log_.push_back("release " + name_);
  }
  void prepare_grads() override {}
  void start_reduce(bool) override {
    reducing_ = true;
    log_.push_back("reduce " + name_);
  }
  bool reduce_done() override { return !reducing_; }
  void wait_reduce() override { reducing_ = false; }
  bool reducing() const override { return reducing_; }
  // After an update: kept parameters are stale until gathered again.
  void stale() { state_ = ParamState::sharded; }
  void set_gathered() { state_ = ParamState::gathered; }

 private:
  std::string name_;
  int64_t numel_;
  bool persistent_;
  std::vector<std::string>& log_;
  ParamState state_ = ParamState::sharded;
  bool reducing_ = false;
};

// Units a, b, c, ... of 10 elements each under `cfg`, persistent below stage 3 as the engine makes them.
struct Fixture {
  explicit Fixture(ZeroConfig cfg, int n = 3) {
    for (int i = 0; i < n; ++i)  // below stage 3 the engine's units keep their full parameters
      units.push_back(std::make_unique<LoggedUnit>(std::string(1, char('a' + i)), 10, cfg.stage < 3, log));
    std::vector<ScheduledUnit*> raw;
    for (auto& u : units) raw.push_back(u.get());
    scheduler = std::make_unique<ZeroScheduler>(raw, cfg);
    hooks = scheduler->hooks();
  }
  // One pass: forward over `order`, then backward in reverse; `recompute` units run forward again
  // just before their backward.
  void pass(const std::vector<int>& order, const std::vector<int>& recompute = {}) {
    scheduler->begin_pass(true);
    for (int u : order) {
      hooks.pre_forward(u);
      hooks.post_forward(u);
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      if (std::find(recompute.begin(), recompute.end(), *it) != recompute.end()) {
        hooks.pre_forward(*it);
        hooks.post_forward(*it);
      }
      hooks.pre_backward(*it);
      hooks.post_backward(*it);
    }
    scheduler->end_pass();
  }
  const LoggedUnit& unit(int i) const { return *units[size_t(i)]; }

  std::vector<std::string> log;
  std::vector<std::unique_ptr<LoggedUnit>> units;
  std::unique_ptr<ZeroScheduler> scheduler;
  UnitHooks hooks;
};

ZeroConfig stage3(int64_t prefetch) {
  ZeroConfig c;
  c.stage = 3;
  c.prefetch_bucket_size = prefetch;
  c.reduce_bucket_size = 1;  // each reduction waited for before the next starts
  return c;
}

// The log as one line, so that a failure shows it.
std::string joined(const std::vector<std::string>& log) {
  std::string s;
  for (const std::string& e : log) s += (s.empty() ? "" : ", ") + e;
  return s;
}

TEST_CASE("stage 3 without prefetch: each unit gathered before it runs, released after, reduced after its backward") {
  Fixture f(stage3(0));
  f.pass({0, 1, 2});
  CHECK(joined(f.log) ==
        "gather a, release a, gather b, release b, gather c, release c, "  // the first pass records
        "gather c, reduce c, release c, gather b, reduce b, release b, gather a, reduce a, release a");
  f.log.clear();
  f.pass({0, 1, 2});  // from the second, c stays gathered from its forward to its backward
  CHECK(joined(f.log) ==
        "gather a, release a, gather b, release b, gather c, "
        "reduce c, release c, gather b, reduce b, release b, gather a, reduce a, release a");
}

TEST_CASE("stage 3 prefetch: the next unit in the recorded order is gathered ahead, from the second pass") {
  Fixture f(stage3(10));
  f.pass({0, 1, 2});  // the first pass records the order: nothing to prefetch from
  f.log.clear();
  f.pass({0, 1, 2});
  // Every gather of a unit precedes its use, and no unit is gathered twice without a release.
  std::vector<int> gathered(3, 0);
  for (const std::string& e : f.log) {
    const int u = e.back() - 'a';
    if (e.starts_with("gather")) CHECK_MESSAGE(gathered[size_t(u)]++ == 0, e);
    if (e.starts_with("release")) CHECK_MESSAGE(gathered[size_t(u)]-- == 1, e);
  }
  // b is gathered while a runs, before a is released.
  const auto at = [&](const std::string& e) { return std::find(f.log.begin(), f.log.end(), e) - f.log.begin(); };
  CHECK(at("gather b") < at("release a"));
}

TEST_CASE("a unit out of the recorded order is refused by name") {
  Fixture f(stage3(0));
  f.pass({0, 1, 2});
  f.scheduler->begin_pass(true);
  f.hooks.pre_forward(0);
  f.hooks.post_forward(0);
  CHECK_THROWS_WITH_AS(f.hooks.pre_forward(2), "ZeRO schedule: unit c ran forward at position 1 where the recorded order has b",
                       std::logic_error);
}

TEST_CASE("a block recomputed just before its backward is gathered again, kept for the backward, and moves nothing") {
  for (const bool first_pass_too : {false, true}) {
    CAPTURE(first_pass_too);
    Fixture f(stage3(0));
    if (!first_pass_too) f.pass({0, 1, 2});
    f.log.clear();
    f.pass({0, 1, 2}, {1, 0});
    const std::string head = first_pass_too ? "gather a, release a, gather b, release b, gather c, release c, gather c, "
                                            : "gather a, release a, gather b, release b, gather c, ";
    // b's recompute and backward: one gather; a's likewise.
    CHECK(joined(f.log) == head + "reduce c, release c, gather b, reduce b, release b, gather a, reduce a, release a");
    // The next pass follows the same schedule: the recomputes recorded nothing.
    f.log.clear();
    f.pass({0, 1, 2});
    CHECK(joined(f.log) ==
          "gather a, release a, gather b, release b, gather c, "
          "reduce c, release c, gather b, reduce b, release b, gather a, reduce a, release a");
  }
}

TEST_CASE("a forward during backward of another unit than the next backward's is refused") {
  Fixture f(stage3(0));
  f.pass({0, 1, 2});
  f.scheduler->begin_pass(true);
  for (int u : {0, 1, 2}) {
    f.hooks.pre_forward(u);
    f.hooks.post_forward(u);
  }
  f.hooks.pre_backward(2);
  f.hooks.post_backward(2);
  CHECK_THROWS_WITH_AS(f.hooks.pre_forward(0), "ZeRO schedule: unit a ran forward at position 4 where the recorded order has b",
                       std::logic_error);
}

TEST_CASE("a unit that runs twice a pass: stages 0-1 reduce after its last backward, stages 2-3 after each") {
  for (const int stage : {0, 1, 2, 3}) {
    CAPTURE(stage);
    ZeroConfig c = stage3(0);
    c.stage = stage;
    Fixture f(c, 2);
    f.pass({0, 1, 0});  // a runs in the embedding and again in the head
    int reduced_a = 0;
    for (const std::string& e : f.log) reduced_a += e == "reduce a";
    CHECK(reduced_a == (stage >= 2 ? 2 : 1));
  }
}


TEST_CASE("a unit with its adapter unit: gathered, released and reduced together; kept adapters gathered once stale") {
  // Model units a and b; a.lora runs with a and is kept gathered (small), as LoRA's adapters are.
  std::vector<UnitLayout> layout{UnitLayout{"a", {}, 0, {}}, UnitLayout{"b", {}, 0, {}},
                                 UnitLayout{"a.lora", {}, 0, {}, 0}};
  std::vector<std::string> log;
  LoggedUnit a("a", 10, false, log), b("b", 10, false, log), lora("a.lora", 2, true, log);
  lora.set_gathered();
  std::vector<std::unique_ptr<UnitGroup>> groups;
  const std::vector<ScheduledUnit*> scheduled = schedule_units(layout, {&a, &b, &lora}, groups);
  REQUIRE(scheduled.size() == 2);
  REQUIRE(groups.size() == 1);
  CHECK(scheduled[1] == &b);
  CHECK(scheduled[0]->numel() == 10);  // what a gather brings: a, not its kept adapters
  CHECK_FALSE(scheduled[0]->persistent());
  ZeroScheduler s(scheduled, stage3(0));
  const UnitHooks h = s.hooks();
  auto pass = [&] {
    s.begin_pass(true);
    h.pre_forward(0), h.post_forward(0), h.pre_forward(1), h.post_forward(1);
    h.pre_backward(1), h.post_backward(1), h.pre_backward(0), h.post_backward(0);
    s.end_pass();
  };
  pass();
  CHECK(joined(log) == "gather a, release a, gather b, release b, gather b, reduce b, release b, "
                       "gather a, reduce a, reduce a.lora, release a");
  log.clear();
  lora.stale();  // the update
  s.gather_kept();  // the group is not kept whole: its stale adapters come with its next gather
  CHECK(log.empty());
  pass();
  CHECK(joined(log).starts_with("gather a, gather a.lora, release a, "));
}

}  // namespace
}  // namespace zt
