#include "runtime/zero/buffer_plan.hpp"

namespace zt {

const char* unit_buffer_name(UnitBuffer b) {
  static const char* const kNames[kUnitBuffers] = {"full_params", "master",      "adam_m",     "adam_v",
                                                   "full_grads",  "grad_shard",  "shard16",    "wire_params",
                                                   "wire_grads",  "host_grads",  "host_shard16", "upload", "secondary"};
  return kNames[static_cast<int>(b)];
}

namespace {
BufferSpec spec(BufferLife life, int64_t n, DType t, MemCategory c, BufferPlace place = BufferPlace::unit) {
  BufferSpec s;
  s.life = life, s.numel = n, s.dtype = t, s.category = c, s.place = place;
  return s;
}
BufferSpec view_of(UnitBuffer of, int64_t offset, int64_t n, DType t, MemCategory c) {
  BufferSpec s = spec(BufferLife::view, n, t, c);
  s.of = of, s.offset = offset;
  return s;
}
}  // namespace

bool keeps_full_params(int64_t numel, bool frozen, const ZeroConfig& z) {
  return z.stage < 3 || numel < z.param_persistence_threshold || (frozen && z.frozen_params == "replicated");
}

BufferPlan plan_unit_buffers(const BufferPlanInput& in) {
  using enum UnitBuffer;
  using enum BufferLife;
  BufferPlan plan;
  const int stage = in.stage;
  const bool mixed = in.wire != DType::f32;
  const bool narrow = mixed && in.narrow;
  const bool staged = in.offload_states && in.on_device;  // the optimizer's states pass through the host
  plan.param_offloaded = in.offload_param && stage == 3 && !in.persistent;
  const bool param_host = plan.param_offloaded && in.on_device;
  const int64_t P = in.geo.padded(), S = in.geo.shard, M = stage == 0 ? P : S;  // M: the master's length
  const DType compute = narrow ? in.wire : DType::f32;
  constexpr MemCategory params = MemCategory::parameters, grads = MemCategory::gradients,
                        optimizer = MemCategory::optimizer;
  if (in.secondary_shard > 0) plan[secondary] = spec(kept, in.secondary_shard, in.wire, params);

  // The shard a stage-3 unit gathers from, n long: kept here, or the ParamOffload's; from a device
  // that one lives in page-locked host memory and the gather sends a device copy of it.
  auto shard_of = [&](int64_t n) {
    if (!plan.param_offloaded) return spec(kept, n, in.wire, params);
    if (!param_host) return spec(elsewhere, n, in.wire, params);
    plan[upload] = spec(on_use, n, in.wire, params);
    return spec(elsewhere, n, in.wire, params, BufferPlace::pinned);
  };
  if (in.frozen) {  // [Note: frozen units]: the parameters alone, whole or as the shard gathered from
    plan[full_params] = spec(in.persistent ? kept : on_use, P, compute, params);
    if (in.persistent) return plan;
    if (!mixed) {
      plan[master] = spec(plan.param_offloaded ? elsewhere : kept, S, DType::f32, params);
    } else {
      plan[shard16] = shard_of(S);
      if (!narrow) plan[wire_params] = spec(on_use, P, in.wire, params);
    }
    return plan;
  }
  // An offloaded master passes through host memory on its way to the store.
  const BufferPlace master_place = staged ? BufferPlace::host : BufferPlace::unit;

  plan[full_params] = spec(in.persistent ? kept : on_use, P, compute, params);
  if (mixed) {
    plan[master] = in.offload_states ? spec(elsewhere, M, DType::f32, optimizer, master_place)
                                     : spec(kept, M, DType::f32, optimizer);
    if (!narrow) {
      plan[shard16] = shard_of(M);
      plan[wire_params] = spec(on_use, P, in.wire, params);
      plan[wire_grads] = spec(on_use, P, in.wire, grads);
    } else if (stage == 0) {  // [Note: compute in 16 bits]: the shard is a slice of the full parameters
      plan[shard16] = view_of(full_params, 0, P, in.wire, params);
    } else if (stage < 3) {
      plan[shard16] = view_of(full_params, in.geo.begin(), S, in.wire, params);
    } else {
      plan[shard16] = shard_of(S);
    }
  } else if (stage == 0) {  // in fp32 the parameters are the master
    plan[master] = view_of(full_params, 0, P, DType::f32, params);
  } else if (stage < 3) {
    plan[master] = view_of(full_params, in.geo.begin(), S, DType::f32, params);
  } else {
    plan[master] = spec(plan.param_offloaded ? elsewhere : kept, S, DType::f32, params);
  }
  if (!in.offload_states) {
    plan[adam_m] = spec(kept, M, DType::f32, optimizer);
    plan[adam_v] = spec(kept, M, DType::f32, optimizer);
  }

  plan[full_grads] = spec(stage < 2 ? kept : on_use, P, compute, grads);
  if (stage == 0) plan[grad_shard] = view_of(full_grads, 0, P, compute, grads);
  else if (stage == 1) plan[grad_shard] = view_of(full_grads, in.geo.begin(), S, compute, grads);
  else plan[grad_shard] = spec(kept, S, DType::f32, grads);
  if (staged) {  // [Note: offload from a device]
    plan[host_grads] = spec(kept, M, DType::f32, grads, BufferPlace::pinned);
    plan[host_shard16] = spec(kept, M, in.wire, params, BufferPlace::pinned);
  }
  return plan;
}

}  // namespace zt
