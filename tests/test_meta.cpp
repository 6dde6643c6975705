// The meta device ([Note: the meta device] in tensor/meta_allocator.hpp): storage that is charged
// and never there, and a backend that computes nothing.
#include <doctest/doctest.h>

#include <algorithm>

#include "kernels/backend.hpp"
#include "tensor/meta_allocator.hpp"

using namespace zt;

namespace {

size_t current(Allocator& a, MemCategory c) { return a.accounting().snapshot()[c]; }

}  // namespace

TEST_CASE("meta allocator: tensors are charged and freed, and hold no data") {
  MetaAllocator meta;
  {
    const Tensor t = Tensor::zeros({4, 8}, DType::f32, MemCategory::activations, meta);
    CHECK(t.device() == Device::meta);
    CHECK(current(meta, MemCategory::activations) == 4 * 8 * sizeof(float));
    CHECK_THROWS_WITH(t.data<float>(), doctest::Contains("host access to a device tensor"));
    // Copied to the host it reads as zeros; copies and fills into it write nothing.
    const Tensor h = Tensor::empty({4, 8});
    std::fill_n(h.data<float>(), h.numel(), 1.0f);
    h.copy_from(t);
    CHECK(std::all_of(h.data<float>(), h.data<float>() + h.numel(), [](float x) { return x == 0.0f; }));
    t.copy_from(h);
    t.fill(2.0f);
    const Tensor back = t.on(cpu_allocator(), MemCategory::other);
    CHECK(back.data<float>()[31] == 0.0f);
  }
  CHECK(meta.accounting().snapshot().total_current == 0);
  // Storage never materialized (the estimate's parameters) is charged nothing.
  const Tensor p = Tensor::meta({1000}, DType::f32, MemCategory::parameters, meta);
  CHECK(p.view(10, {5, 2}).device() == Device::meta);
  CHECK(meta.accounting().snapshot().total_current == 0);
  // Host tensors reach the meta device as they are, as they reach the CPU kernels.
  const Tensor ids = Tensor::zeros({2, 3}, DType::i32);
  CHECK(ids.on(meta, MemCategory::activations).same_storage(ids));
  CHECK(current(meta, MemCategory::activations) == 0);
  CHECK(&backend(Device::meta) == &meta_backend());
  CHECK(device_name(Device::meta) == "meta");
}
