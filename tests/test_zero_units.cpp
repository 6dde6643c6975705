// The pieces of a ZeRO unit without ranks: the buffer plan ([Note: ZeRO buffers] in
// runtime/zero/buffer_plan.hpp) against the table it states, and a ShardedUnit built from it on a
// one-rank communicator holding exactly the planned buffers.
#include <doctest/doctest.h>

#include <memory>

#include "comm/communicator.hpp"
#include "runtime/zero/buffer_plan.hpp"
#include "runtime/zero/collectives.hpp"
#include "runtime/zero/sharded_unit.hpp"

namespace zt {
namespace {

using enum UnitBuffer;
using enum BufferLife;

BufferPlanInput input(int stage, DType wire = DType::f32, int world = 4, int rank = 1) {
  BufferPlanInput in;
  in.geo = shard_geometry(1000, world, rank);  // padded to 4 x 256
  in.stage = stage;
  in.persistent = stage < 3;
  in.wire = wire;
  return in;
}

// Bytes a rank holds from construction on, by category.
struct Held {
  size_t params = 0, grads = 0, optimizer = 0;
};
Held held(const BufferPlan& p) {
  Held h;
  for (const BufferSpec& b : p.buffers) {
    if (b.life != kept) continue;
    (b.category == MemCategory::parameters ? h.params : b.category == MemCategory::gradients ? h.grads : h.optimizer) +=
        b.bytes();
  }
  return h;
}

TEST_CASE("buffer plan, fp32: what each stage keeps, shards and gathers") {
  const int64_t P = 1024, S = 256;
  for (int stage = 0; stage <= 3; ++stage) {
    CAPTURE(stage);
    const BufferPlan p = plan_unit_buffers(input(stage));
    CHECK(p[full_params].life == (stage < 3 ? kept : on_use));
    CHECK(p[full_params].numel == P);
    CHECK(p[master].life == (stage < 3 ? view : kept));  // in fp32 the parameters are the master
    CHECK(p[master].numel == (stage == 0 ? P : S));
    if (stage == 1 || stage == 2) CHECK(p[master].offset == S);  // rank 1's slice
    CHECK(p[adam_m].numel == p[master].numel);
    CHECK(p[full_grads].life == (stage < 2 ? kept : on_use));
    CHECK(p[grad_shard].life == (stage < 2 ? view : kept));
    CHECK(p[grad_shard].numel == (stage == 0 ? P : S));
    for (UnitBuffer b : {shard16, wire_params, wire_grads, host_grads, host_shard16, upload}) CHECK_FALSE(p[b].exists());
    CHECK(p.gather_source() == master);
    // 16 bytes a parameter at stage 0, then the optimizer, the gradients and the parameters sharded.
    const Held h = held(p);
    CHECK(h.params == size_t(stage < 3 ? 4 * P : 4 * S));
    CHECK(h.grads == size_t(stage < 2 ? 4 * P : 4 * S));
    CHECK(h.optimizer == size_t(stage == 0 ? 8 * P : 8 * S));
  }
}

TEST_CASE("buffer plan, frozen: the parameters alone, whole or as the stage-3 shard gathered from") {
  const int64_t P = 1024, S = 256;
  for (DType wire : {DType::f32, DType::bf16})
    for (int stage = 0; stage <= 3; ++stage)
      for (bool replicated : {false, true}) {
        CAPTURE(stage);
        CAPTURE(replicated);
        CAPTURE(dtype_name(wire));
        BufferPlanInput in = input(stage, wire);
        in.frozen = true;
        in.persistent = stage < 3 || replicated;
        in.offload_states = true;  // a frozen unit has no optimizer to offload
        const BufferPlan p = plan_unit_buffers(in);
        const bool gathers = stage == 3 && !replicated;
        CHECK(p[full_params].life == (gathers ? on_use : kept));
        CHECK(p[full_params].numel == P);
        for (UnitBuffer b : {adam_m, adam_v, full_grads, grad_shard, wire_grads, host_grads, host_shard16, upload})
          CHECK_FALSE(p[b].exists());
        const Held h = held(p);
        CHECK(h.grads == 0);
        CHECK(h.optimizer == 0);
        if (!gathers) {
          CHECK_FALSE(p[master].exists());
          CHECK_FALSE(p[shard16].exists());
          CHECK(h.params == 4 * size_t(P));  // computing in f32 on the host, rounded to the wire
          continue;
        }
        // The shard in the wire dtype, as a trainable unit's (fp32: in the master's row, counted
        // as parameters), and the 16-bit buffer a gather fills.
        CHECK(p.gather_source() == (wire == DType::f32 ? master : shard16));
        CHECK(p[p.gather_source()].numel == S);
        CHECK(h.params == S * dtype_size(wire));
        CHECK(p[wire_params].exists() == (wire != DType::f32));
      }
}

TEST_CASE("buffer plan, bf16 over f32 compute: fp32 masters of their own, 16-bit shards and wire buffers") {
  for (int stage = 0; stage <= 3; ++stage) {
    CAPTURE(stage);
    const BufferPlan p = plan_unit_buffers(input(stage, DType::bf16));
    const int64_t M = stage == 0 ? 1024 : 256;
    CHECK(p[master].life == kept);
    CHECK(p[master].category == MemCategory::optimizer);  // 12 bytes a parameter with m and v, as DeepSpeed counts
    CHECK(p[shard16].life == kept);
    CHECK(p[shard16].numel == M);
    CHECK(p[shard16].dtype == DType::bf16);
    CHECK(p[wire_params].life == on_use);
    CHECK(p[wire_grads].life == on_use);
    CHECK(p[full_params].dtype == DType::f32);
    CHECK(p.gather_source() == shard16);
  }
}

TEST_CASE("buffer plan: computing in 16 bits, the shard is a slice of the full parameters below stage 3") {
  BufferPlanInput in = input(2, DType::bf16);
  in.narrow = true;
  const BufferPlan p = plan_unit_buffers(in);
  CHECK(p[full_params].dtype == DType::bf16);
  CHECK(p[shard16].life == view);
  CHECK(p[shard16].offset == 256);
  CHECK_FALSE(p[wire_params].exists());
  CHECK(p[grad_shard].dtype == DType::f32);  // gradient shards accumulate in f32
}

TEST_CASE("buffer plan: offload takes the optimizer's states and the stage-3 shard elsewhere") {
  BufferPlanInput in = input(3, DType::bf16);
  in.offload_states = true;
  in.offload_param = true;
  BufferPlan p = plan_unit_buffers(in);
  CHECK(p.param_offloaded);
  CHECK(p[master].life == elsewhere);
  CHECK_FALSE(p[adam_m].exists());
  CHECK(p[shard16].life == elsewhere);
  CHECK(held(p).optimizer == 0);
  CHECK_FALSE(p[host_grads].exists());
  in.on_device = true;  // [Note: offload from a device]: pinned host copies, a device copy to gather from
  p = plan_unit_buffers(in);
  CHECK(p[master].place == BufferPlace::host);
  CHECK(p[host_grads].place == BufferPlace::pinned);
  CHECK(p[shard16].place == BufferPlace::pinned);
  CHECK(p[upload].life == on_use);
  in.persistent = true;  // a persistent unit keeps its shard
  CHECK_FALSE(plan_unit_buffers(in).param_offloaded);
}

TEST_CASE("a ShardedUnit holds the buffers its plan names, views where the plan has views") {
  const std::unique_ptr<Communicator> self = make_self_communicator();
  ShardGroups groups(*self, ZeroConfig{});
  const OptimizerConfig opt;
  for (const DType wire : {DType::f32, DType::bf16})
    for (int stage = 0; stage <= 3; ++stage) {
      CAPTURE(stage);
      CAPTURE(dtype_name(wire));
      UnitOptions o;
      o.wire = wire;
      const ShardedUnit u("u", 1000, {{0, 600}}, stage, false, groups, opt, o);
      BufferPlanInput in = input(stage, wire, 1, 0);
      const BufferPlan p = plan_unit_buffers(in);
      CHECK(u.full_params().numel() == p[full_params].numel);
      CHECK(u.full_params().has_data() == (p[full_params].life == kept));
      CHECK(u.master().numel() == p[master].numel);
      CHECK(u.master().dtype() == p[master].dtype);
      CHECK(u.grad_shard().numel() == p[grad_shard].numel);
      CHECK(u.adam_m().defined() == p[adam_m].exists());
      if (p[master].life == view) CHECK(u.master().storage() == u.full_params().storage());
      else CHECK(u.master().storage() != u.full_params().storage());
      if (p[grad_shard].life == view) CHECK(u.grad_shard().storage() == u.full_grads().storage());
      CHECK(u.param_shard().dtype() == wire);
    }
}

}  // namespace
}  // namespace zt

namespace zt {
namespace {

TEST_CASE("a unit's gradients are held while its update runs behind the forward, and zeroed when it ends") {
  const std::unique_ptr<Communicator> self = make_self_communicator();
  ShardGroups groups(*self, ZeroConfig{});
  ShardedUnit u("u", 100, {}, 2, false, groups, OptimizerConfig{});
  u.grad_shard().fill(1.0f);
  u.mark_update_pending();
  CHECK(u.optimizer().state() == OptimizerShard::State::pending);
  CHECK(u.state() == ParamState::sharded);  // its kept full parameters are stale until the update ends
  u.begin_step();  // the next step begins while the update still reads the gradients
  CHECK(u.grad_shard().data<float>()[7] == 1.0f);
  u.begin_update();
  u.finish_update();
  CHECK(u.optimizer().state() == OptimizerShard::State::current);
  CHECK(u.grad_shard().data<float>()[7] == 0.0f);  // begin_step's zeroing, done now
  u.grad_shard().fill(1.0f);
  u.begin_step();  // nothing pending: zeroed at once
  CHECK(u.grad_shard().data<float>()[7] == 0.0f);
}

TEST_CASE("one rank in bf16: the gradients still take the wire's rounding") {
  const std::unique_ptr<Communicator> self = make_self_communicator();
  ShardGroups groups(*self, ZeroConfig{});
  UnitOptions o;
  o.wire = DType::bf16;
  ShardedUnit u("u", 100, {}, 0, false, groups, OptimizerConfig{}, o);
  const float x = 1.0f + 1.0f / 1024;  // between two bf16 values: rounds to 1
  u.full_grads().fill(x);
  u.start_reduce(true);
  CHECK_FALSE(u.reducing());
  CHECK(u.grad_shard().data<float>()[3] == 1.0f);
}

TEST_CASE("collectives over a one-rank shard group: the average is the buffer, the slice is the whole") {
  const std::unique_ptr<Communicator> self = make_self_communicator();
  ShardGroups groups(*self, ZeroConfig{});
  const ShardGeometry geo = shard_geometry(64, 1, 0);
  Tensor g = Tensor::zeros({geo.padded()}, DType::f32, MemCategory::gradients);
  g.fill(3.0f);
  reduce_grads(groups, g, geo, true)->wait();
  CHECK(g.data<float>()[5] == 3.0f);
  reduce_grads(groups, g, geo, false)->wait();
  CHECK(g.data<float>()[63] == 3.0f);
  Tensor shard = Tensor::zeros({geo.shard}, DType::f32, MemCategory::gradients);
  accumulate_into_shard(shard, g, cpu_allocator());
  accumulate_into_shard(shard, g, cpu_allocator());
  CHECK(shard.data<float>()[0] == 6.0f);
  const Tensor wide = Tensor::zeros({4}, DType::f32, MemCategory::other);
  wide.fill(1.0f + 1.0f / 1024);
  const Tensor low = round_through(wide, DType::bf16, MemCategory::other, cpu_allocator());
  CHECK(low.dtype() == DType::bf16);
  CHECK(wide.data<float>()[2] == 1.0f);
}

}  // namespace
}  // namespace zt
