// Which flat buffers one unit has on a rank, how long each is, and how long it lives: the rules of
// [Note: ZeRO buffers] as a table, read by ShardedUnit, which makes the buffers (on the meta
// device for `ztrain estimate`, runtime/plan/ghost_step.hpp).
//
// [Note: ZeRO buffers] Per unit and rank, by stage (S = the shard length, [Note: flat shards]):
//   stage | full parameters        | master (AdamW's params)    | full gradients        | gradient shard
//   0     | kept                   | the full parameters        | kept                  | the full gradients
//   1     | kept                   | own slice of the full ones | kept                  | own slice of them
//   2     | kept                   | own slice of the full ones | one micro-batch long  | own buffer of S
//   3     | gathered while in use  | own buffer of S            | one micro-batch long  | own buffer of S
// Stage 3 units under stage3_param_persistence_threshold keep their full parameters, like stage 2.
// Kept full parameters of stages 1-3 are all-gathered from the masters after each update.
// AdamW's m and v mirror the master. Offload takes them (and a master of its own) out of the unit
// ([Note: optimizer offload]) and, at stage 3, the shard it gathers from ([Note: parameter
// offload]). A frozen unit ([Note: frozen units]) has no master, states or gradients: it keeps its
// full parameters (stages 0-2, and stage 3 with frozen_params "replicated"), or at stage 3 its
// shard in the wire dtype, gathered while in use. The 16-bit buffers of [Note: mixed precision], [Note: compute in 16 bits] and [Note:
// offload from a device] (runtime/zero/sharded_unit.hpp) are rows of the same table, and so is
// hpZ's secondary shard of a stage-3 unit ([Note: shard groups] in runtime/zero/groups.hpp): its
// slice of the padded parameters within its group, in the wire dtype, kept.
#pragma once

#include <array>
#include <cstdint>

#include "runtime/config.hpp"
#include "runtime/zero/shard.hpp"
#include "tensor/allocator.hpp"
#include "tensor/dtype.hpp"

namespace zt {

enum class UnitBuffer : int {
  full_params,   // the model's parameters, padded (P)
  master,        // what AdamW updates (f32)
  adam_m,
  adam_v,
  full_grads,    // the model's gradients, padded (P)
  grad_shard,    // the gradients AdamW reads
  shard16,       // 16-bit wire: this rank's parameters rounded, the all-gather's source
  wire_params,   // 16-bit wire computing in f32: the all-gather's destination
  wire_grads,    // 16-bit wire computing in f32: the reduction's buffer
  host_grads,    // [Note: offload from a device]: the gradient shard, down on the host
  host_shard16,  // [Note: offload from a device]: the 16-bit shard the update writes, on the host
  upload,        // [Note: offload from a device]: the device copy of a host shard while it is gathered
  secondary,     // hpZ's secondary shard ([Note: shard groups] in runtime/zero/groups.hpp)
};
inline constexpr int kUnitBuffers = 13;
const char* unit_buffer_name(UnitBuffer b);

enum class BufferLife {
  none,       // the unit has no such buffer
  kept,       // allocated (zeroed) with the unit, for its life
  on_use,     // storage comes and goes: gathered, reduced, brought in ([Note: storage that comes and goes])
  view,       // a view of another of the unit's buffers (`of`, from `offset`)
  elsewhere,  // its data live in an offload's store; here metadata only (or a passing copy)
};

// Where a buffer's storage comes from: the unit's memory (its communicator's device), host
// memory, or page-locked host memory.
enum class BufferPlace { unit, host, pinned };

struct BufferSpec {
  BufferLife life = BufferLife::none;
  int64_t numel = 0;
  DType dtype = DType::f32;
  MemCategory category = MemCategory::other;
  BufferPlace place = BufferPlace::unit;
  UnitBuffer of = UnitBuffer::full_params;  // view only
  int64_t offset = 0;                       // view only
  bool exists() const { return life != BufferLife::none; }
  size_t bytes() const { return static_cast<size_t>(numel) * dtype_size(dtype); }
};

// What decides the buffers.
struct BufferPlanInput {
  ShardGeometry geo;
  int stage = 0;
  bool persistent = true;       // full parameters kept between uses (every unit below stage 3)
  DType wire = DType::f32;      // f32, or bf16/f16 ([Note: mixed precision])
  bool narrow = false;          // the unit's Backend computes in the wire dtype ([Note: compute in 16 bits])
  bool offload_states = false;  // [Note: optimizer offload]
  bool offload_param = false;   // [Note: parameter offload]: taken by non-persistent stage-3 units
  bool on_device = false;       // the unit's memory is not the host's ([Note: offload from a device])
  bool frozen = false;          // [Note: frozen units] in runtime/zero/sharded_unit.hpp
  int64_t secondary_shard = 0;  // hpZ: elements of the unit's secondary shard (0: none)
};

struct BufferPlan {
  std::array<BufferSpec, kUnitBuffers> buffers;
  bool param_offloaded = false;  // the shard it gathers from lives in a ParamOffload
  const BufferSpec& operator[](UnitBuffer b) const { return buffers[static_cast<size_t>(b)]; }
  BufferSpec& operator[](UnitBuffer b) { return buffers[static_cast<size_t>(b)]; }
  // The buffer an all-gather sends from: the 16-bit shard, or in fp32 the master.
  UnitBuffer gather_source() const {
    return (*this)[UnitBuffer::shard16].exists() ? UnitBuffer::shard16 : UnitBuffer::master;
  }
};

// Offload from a device needs a 16-bit wire (the caller refuses fp32 there, naming the unit).
BufferPlan plan_unit_buffers(const BufferPlanInput& in);

// Whether a unit of `numel` elements keeps its full parameters between uses (BufferPlanInput's
// `persistent`): every unit below stage 3; at stage 3 those under
// stage3_param_persistence_threshold, and frozen ones with frozen_params "replicated" ([Note:
// frozen units] in runtime/zero/sharded_unit.hpp).
bool keeps_full_params(int64_t numel, bool frozen, const ZeroConfig& z);

}  // namespace zt
