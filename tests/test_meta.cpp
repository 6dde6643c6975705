// The meta device ([Note: the meta device] in tensor/meta_allocator.hpp): storage that is charged
// and never there, a backend that computes nothing, and the model's own pass on it, which
// `ztrain estimate` runs (runtime/plan/estimate_activations.hpp), charging what the same pass
// allocates on the host, when it does.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/ops.hpp"
#include "models/gpt2.hpp"
#include "runtime/plan/estimate_activations.hpp"
#include "tensor/meta_allocator.hpp"
#include "tests/model_fixture.hpp"

using namespace zt;

namespace {

const GPT2Dims kTiny = gpt2_dims(/*maxT*/ 16, /*V*/ 50, /*Vp*/ 64, /*L*/ 3, /*NH*/ 2, /*C*/ 8);

size_t current(Allocator& a, MemCategory c) { return a.accounting().snapshot()[c]; }

// The unit hooks in the order a pass calls them, as "f3" (pre_forward of unit 3), "F3", "b3", "B3".
struct HookLog {
  std::vector<std::string> seen;
  UnitHooks hooks() {
    auto log = [this](char what) { return [this, what](int u) { seen.push_back(what + std::to_string(u)); }; };
    return {log('f'), log('F'), log('b'), log('B')};
  }
};

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

TEST_CASE("meta pass: the model's own forward and backward charge what the host run allocates") {
  const int B = 2, T = 16;
  for (int K : {1, 2}) {  // the tied head in one part and in two
    CAPTURE(K);
    test::BoundGPT2 host(kTiny, true, K);
    host.gpt.init(1);
    const Tensor tokens = Tensor::zeros({B, T}, DType::i32), targets = Tensor::zeros({B, T}, DType::i32);
    for (int i = 0; i < B * T; ++i) {  // some ids (the meta pass reads zeros; sizes do not depend on them)
      tokens.data<int32_t>()[i] = (7 * i + 3) % kTiny.vocab_size;
      targets.data<int32_t>()[i] = (7 * i + 10) % kTiny.vocab_size;
    }

    MemAccounting& cpu = cpu_allocator().accounting();
    const size_t before = cpu.snapshot()[MemCategory::activations];
    cpu.reset_peaks();
    HookLog host_hooks;
    size_t host_peak = 0;
    {
      Tape tape;
      tape.set_hooks(host_hooks.hooks());
      const Tensor loss = host.gpt.forward(tape, tokens, targets);
      tape.backward(loss);
      host_peak = cpu.snapshot().peak_of(MemCategory::activations) - before;
    }
    REQUIRE(host_peak > 0);
    CHECK(cpu.snapshot()[MemCategory::activations] == before);

    MetaAllocator meta;
    MetaPass pass(host.gpt, meta, B, T);
    HookLog meta_hooks;
    bool ended = false;
    meta.accounting().reset_peaks();
    pass.run(meta_hooks.hooks(), [&] {
      ended = true;
      CHECK(current(meta, MemCategory::activations) == sizeof(float));  // the loss, still held
    });
    CHECK(ended);
    const MemSnapshot s = meta.accounting().snapshot();
    CHECK(s.peak_of(MemCategory::activations) == host_peak);
    CHECK(s[MemCategory::activations] == 0);
    // The trainer's token and target batches; parameters and gradients are the caller's to charge.
    CHECK(s[MemCategory::other] == 2 * sizeof(int32_t) * B * T);
    CHECK(s.peak_of(MemCategory::parameters) == 0);
    CHECK(s.peak_of(MemCategory::gradients) == 0);
    CHECK(meta_hooks.seen == host_hooks.seen);
    // A second pass leaves the same peak: nothing is kept between passes.
    meta.accounting().reset_peaks();
    pass.run({}, [] {});
    CHECK(meta.accounting().snapshot().peak_of(MemCategory::activations) == host_peak);
  }
}

TEST_CASE("meta pass: Gemma's ops (geglu, scale, rmsnorm's offset, attention's options) record and run backward") {
  MetaAllocator meta;
  {
    Tape tape;
    Tensor x = Tensor::zeros({2, 5, 12}, DType::bf16, MemCategory::activations, meta);
    Tensor w = Tensor::zeros({12}, DType::bf16, MemCategory::parameters, meta);
    x.set_requires_grad(true);
    w.set_requires_grad(true);
    const Tensor h = ops::rmsnorm(tape, ops::scale(tape, x, 3.5f), w, 1e-6f, 1.0f);
    const Tensor a = ops::attention(tape, h, 2, 2, AttentionKernel::own, {0.0625f, 2});  // (2,5,4)
    const Tensor y = ops::geglu(tape, a);
    CHECK(y.device() == Device::meta);
    CHECK(y.shape() == Shape{2, 5, 2});
    tape.backward(ops::cross_entropy(tape, y, Tensor::zeros({2, 5}, DType::i32), 2));
    CHECK(x.grad().device() == Device::meta);
    CHECK(w.grad().defined());
  }
}
