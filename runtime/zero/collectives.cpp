#include "runtime/zero/collectives.hpp"

namespace zt {

WorkPtr all_gather_params(Communicator& group, const Tensor& shard, const Tensor& full) {
  return group.all_gather_async(shard, full);
}

WorkPtr reduce_grads(ShardGroups& groups, const Tensor& buf, const ShardGeometry& geo, bool all_reduce) {
  Communicator& shard = groups.shard();
  const Tensor slice = buf.view(geo.begin(), {geo.shard});
  WorkPtr within = all_reduce ? shard.all_reduce_async(buf, buf, ReduceOp::avg)
                              : shard.reduce_scatter_async(buf, slice, ReduceOp::avg);
  return groups.then_over_replicas(std::move(within), slice);
}

void accumulate_into_shard(const Tensor& grad_shard, const Tensor& slice, Allocator& memory) {
  const Backend& be = backend(memory.device());
  if (slice.dtype() == grad_shard.dtype()) return be.accumulate(grad_shard, slice);
  const Tensor wide = Tensor::empty(slice.shape(), DType::f32, MemCategory::gradients, memory);
  cast_into(slice, wide);
  be.accumulate(grad_shard, wide);
}

void cast_into(const Tensor& from, const Tensor& to) {
  const Backend& be = backend(from.device());
  if (from.device() == to.device()) return be.cast(to, from);
  // Across devices: converted where `from` is, then copied.
  const Tensor converted = Tensor::empty(from.shape(), to.dtype(), MemCategory::communication, from.allocator());
  be.cast(converted, from);
  to.copy_from(converted);
}

Tensor round_through(const Tensor& x, DType wire, MemCategory c, Allocator& memory) {
  Tensor rounded = Tensor::empty(x.shape(), wire, c, memory);
  cast_into(x, rounded);
  cast_into(rounded, x);
  return rounded;
}

}  // namespace zt
