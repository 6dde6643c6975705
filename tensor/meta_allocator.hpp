// The meta device: tensors with shapes, dtypes and accounting, and no data. [Note: the meta device]
//
// [Note: the meta device] Ops on meta tensors allocate their outputs, gradients and saved tensors
// as on any device, each charged to the allocator's MemAccounting and freed where the tape frees
// it, but no memory is behind them and the meta backend (kernels/meta/backend.cpp) computes
// nothing. So a model's own forward and backward on meta tensors leaves on the ledger what a real
// pass allocates, when it allocates it, with no code of the model's copied: `ztrain estimate`
// counts activations so (runtime/plan/estimate_activations.hpp).
// It plans a host run, the CPU backend's: a host tensor reaches it without a copy (Tensor::on),
// as host tensors reach the CPU kernels, and the meta backend keeps what the CPU kernels keep.
// Meta memory reads as zeros where it is copied to host memory (a loss brought to the host);
// nothing else may read it, and its addresses fault if anything does (meta_allocator.cpp).
// Storage that is never materialized (Tensor::meta) on this allocator is not charged at all:
// buffers the caller accounts for itself (the model twin's parameters) are such tensors.
// The plan's host memory (pinned_host) is the same ledger: a planned run's staging and offload
// buffers are charged beside the rest, and nothing real is allocated for them. Zeroing computes
// nothing either; a plan that prices it (`ztrain simulate`) hears of each (on_zero).
#pragma once

#include <cstddef>
#include <functional>
#include <utility>

#include "tensor/allocator.hpp"

namespace zt {

// One ledger of meta memory; any number may exist (one per plan). Thread-safe as MemAccounting is.
class MetaAllocator final : public Allocator {
 public:
  Device device() const override { return Device::meta; }
  // Charges `bytes` to c; the address may not be read or written.
  void* allocate(size_t bytes, MemCategory c) override;
  void deallocate(void* p, size_t bytes, MemCategory c) override;
  void zero(void*, size_t bytes) override {
    if (on_zero_ && bytes) on_zero_(bytes);
  }
  // Writes zeros where dst is host memory; nothing where it is meta memory.
  void copy(void* dst, const void* src, size_t bytes, bool wait = true) override;
  Allocator& pinned_host() override { return *this; }
  // Called with the bytes of each zeroing from now on (empty: none).
  void on_zero(std::function<void(size_t)> f) { on_zero_ = std::move(f); }

 private:
  std::function<void(size_t)> on_zero_;
};

}  // namespace zt
