// The model's ops on the CUDA backend against the CPU backend: a small GPT-2 bound to device
// buffers (f32, then bf16) runs forward and backward, and its loss and every unit's gradient
// match the same model on the host. Also the tensor layer's device fills and copies it relies on.
#include <doctest/doctest.h>

#include <vector>

#include "kernels/backend.hpp"
#include "kernels/ops.hpp"
#include "models/gpt2.hpp"
#include "tensor/cuda_allocator.hpp"
#include "tests/cuda/harness.hpp"
#include "tests/model_fixture.hpp"

using namespace zt;

namespace {

// Head size 16 (a multiple of 8), C and every GEMM dimension multiples of 8 (bf16 cuBLASLt).
const GPT2Dims kSmall = gpt2_dims(/*maxT*/ 32, /*V*/ 100, /*Vp*/ 128, /*L*/ 2, /*NH*/ 4, /*C*/ 64);

// A device or host tensor's values as host floats.
std::vector<float> host_values(const Tensor& t) {
  const Tensor wide = host_f32(t);
  return std::vector<float>(wide.data<float>(), wide.data<float>() + wide.numel());
}

Tensor host_ids(const std::vector<int32_t>& v, int64_t B, int64_t T) {
  Tensor t = Tensor::empty({B, T}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

void same_model_on_device(DType dt, double loss_tol, double grad_tol) {
  const int64_t B = 2, T = 32;
  test::BoundGPT2 host(kSmall, true, 1);
  test::BoundGPT2 dev(kSmall, true, 1, cuda_allocator(0), dt);
  const uint64_t seed = test::rng()();
  host.gpt.init(seed);
  dev.gpt.init(seed);
  if (dt != DType::f32)  // the host model computes with the device's rounded parameters
    for (size_t u = 0; u < host.params.size(); ++u) {
      const std::vector<float> v = host_values(dev.params[u]);
      std::copy(v.begin(), v.end(), host.params[u].data<float>());
    }
  std::vector<int32_t> targets = test::random_ints(B * T, 0, kSmall.vocab_size);
  targets[3] = targets[40] = -1;  // ignored rows
  const Tensor tokens = host_ids(test::random_ints(B * T, 0, kSmall.vocab_size), B, T);
  const Tensor tg = host_ids(targets, B, T);

  Tape th, td;
  const Tensor lh = host.gpt.forward(th, tokens, tg), ld = dev.gpt.forward(td, tokens, tg);
  REQUIRE(ld.device() == Device::cpu);  // the loss comes back as a host scalar
  const double want = lh.data<float>()[0], got = ld.data<float>()[0];
  INFO("loss " << got << " on cuda, " << want << " on the cpu");
  CHECK(std::isfinite(got));
  CHECK(std::abs(got - want) <= loss_tol * std::abs(want));
  th.backward(lh);
  td.backward(ld);
  for (size_t u = 0; u < host.grads.size(); ++u)
    test::expect_close(host_values(dev.grads[u]), host_values(host.grads[u]), grad_tol,
                       "gradient of " + host.gpt.layout()[u].name);

  // Inference: the logits come back to the host in f32.
  Tape ih, id;
  const Tensor gh = host.gpt.logits(ih, tokens), gd = dev.gpt.logits(id, tokens);
  REQUIRE(gd.device() == Device::cpu);
  REQUIRE(gd.dtype() == DType::f32);
  test::expect_close(host_values(gd), host_values(gh), loss_tol * 10, "logits");
}

}  // namespace

TEST_CASE("tensor: fill, zero and copies on the device") {
  Allocator& a = cuda_allocator(0);
  const Tensor f = Tensor::empty({1000}, DType::f32, MemCategory::other, a);
  f.fill(0.1f);
  CHECK(host_values(f) == std::vector<float>(1000, 0.1f));
  const Tensor h = Tensor::empty({1000}, DType::bf16, MemCategory::other, a);
  h.fill(0.1f);
  CHECK(host_values(h) == std::vector<float>(1000, bf16_to_f32(f32_to_bf16(0.1f))));
  h.zero();
  CHECK(host_values(h) == std::vector<float>(1000, 0.0f));
  const Tensor back = f.to(cpu_allocator(), MemCategory::other);
  CHECK(back.device() == Device::cpu);
  CHECK(back.data<float>()[999] == 0.1f);
  CHECK_THROWS_AS(h.copy_from(f), std::invalid_argument);  // dtypes differ
  // A gradient is created beside its tensor.
  Tensor p = Tensor::zeros({8}, DType::bf16, MemCategory::parameters, a);
  p.set_requires_grad(true);
  CHECK(p.ensure_grad().device() == Device::cuda);
  CHECK(host_values(p.grad()) == std::vector<float>(8, 0.0f));
}

TEST_CASE("model: GPT-2 forward and backward on cuda match the cpu, f32") {
  same_model_on_device(DType::f32, 1e-5, 1e-4);
}

TEST_CASE("model: GPT-2 forward and backward on cuda match the cpu, bf16") {
  same_model_on_device(DType::bf16, 2e-2, 5e-2);
}

TEST_CASE("ops: tensors on two devices are refused by name") {
  test::BoundGPT2 dev(kSmall, false, 1, cuda_allocator(0), DType::f32);
  Tape tape;
  const Tensor x = Tensor::zeros({2, 4, 64});  // host activations, device weights
  CHECK_THROWS_WITH_AS(ops::layernorm(tape, x, dev.gpt.param(1, 0), dev.gpt.param(1, 1)),
                       doctest::Contains("tensors on cpu and cuda"), std::invalid_argument);
}
