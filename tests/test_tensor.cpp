// Tensor, storage, allocator accounting and the autograd tape (markers, no_grad, accumulation).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/ops.hpp"
#include "tensor/allocator.hpp"
#include "tensor/dtype.hpp"
#include "tensor/host_cache.hpp"
#include "tensor/tape.hpp"
#include "tensor/tensor.hpp"

using namespace zt;

TEST_CASE("dtypes: sizes, names, parsing") {
  CHECK(dtype_size(DType::f32) == 4);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_size(DType::i32) == 4);
  CHECK(dtype_size(DType::u16) == 2);
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u16}) CHECK(dtype_from_name(dtype_name(t)) == t);
  CHECK_THROWS_WITH_AS(dtype_from_name("fp8"), doctest::Contains("unknown dtype 'fp8'"), std::invalid_argument);
}

TEST_CASE("tensors: views share storage at element offsets") {
  Tensor flat = Tensor::empty({10});
  for (int i = 0; i < 10; ++i) flat.data<float>()[i] = static_cast<float>(i);
  Tensor v = flat.view(4, {2, 3});
  CHECK(v.same_storage(flat));
  CHECK(v.offset() == 4);
  CHECK(v.numel() == 6);
  CHECK(v.data<float>()[0] == 4.0f);
  v.data<float>()[5] = -1.0f;
  CHECK(flat.data<float>()[9] == -1.0f);
  CHECK(v.view(3, {3}).data<float>()[0] == 7.0f);  // views of views add offsets
  CHECK_THROWS_AS(flat.view(5, {6}), std::out_of_range);
  CHECK_THROWS_AS(flat.view(-1, {1}), std::out_of_range);
  CHECK_THROWS_AS(flat.data<int32_t>(), std::logic_error);
  CHECK_THROWS_AS(Tensor::empty({-2}), std::invalid_argument);
  Tensor i = Tensor::zeros({3}, DType::i32);
  CHECK(i.data<int32_t>()[2] == 0);
  CHECK(Tensor::empty({4}, DType::bf16).nbytes() == 8);
}

TEST_CASE("tensors: fills round to the dtype; copies check dtype and size") {
  const Tensor h = Tensor::empty({5}, DType::bf16);
  h.fill(0.1f);
  CHECK(h.data<uint16_t>()[4] == f32_to_bf16(0.1f));
  const Tensor f16 = Tensor::empty({3}, DType::f16);
  f16.fill(-2.5f);
  CHECK(f16_to_f32(f16.data<uint16_t>()[0]) == -2.5f);
  CHECK_THROWS_AS(Tensor::empty({2}, DType::i32).fill(1.0f), std::invalid_argument);
  CHECK_THROWS_AS(Tensor().fill(1.0f), std::logic_error);

  const Tensor a = Tensor::empty({2, 3});
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = static_cast<float>(i);
  const Tensor b = a.to(cpu_allocator(), MemCategory::activations);
  CHECK_FALSE(b.same_storage(a));
  CHECK(b.shape() == a.shape());
  CHECK(b.data<float>()[5] == 5.0f);
  CHECK(b.storage()->category() == MemCategory::activations);
  const Tensor c = Tensor::zeros({6});
  c.copy_from(a.view(0, {6}));
  CHECK(c.data<float>()[4] == 4.0f);
  CHECK_THROWS_WITH_AS(c.copy_from(Tensor::zeros({5})), doctest::Contains("copy of (5) f32 into (6) f32"),
                       std::invalid_argument);
  CHECK_THROWS_AS(c.copy_from(h.view(0, {5})), std::invalid_argument);
}

TEST_CASE("ops: the backend is chosen by the tensors' device, and refuses dtypes it has no kernels for") {
  CHECK(backend(Device::cpu).device() == Device::cpu);
  CHECK(backend(Device::cpu).computes_in(DType::f32));
  CHECK_FALSE(backend(Device::cpu).computes_in(DType::bf16));
  Tape tape;
  const Tensor x = Tensor::zeros({2, 8}, DType::bf16);
  CHECK_THROWS_WITH_AS(ops::gelu(tape, x), doctest::Contains("gelu: no kernels for dtype bf16 on cpu"),
                       std::invalid_argument);
  // Every op's tensors share one device; the CUDA backend's tests check the mixed case
  // (tests/cuda/test_model.cpp), since only a device tensor can make one here.
  const Tensor y = Tensor::zeros({2, 8});
  CHECK(ops::gelu(tape, y).device() == Device::cpu);
}

TEST_CASE("tensors: metadata without data, storage released and materialized again") {
  Allocator& a = cpu_allocator();
  const size_t before = a.accounting().snapshot()[MemCategory::communication];
  Tensor m = Tensor::meta({256, 4}, DType::f32, MemCategory::communication);
  CHECK(m.defined());
  CHECK_FALSE(m.has_data());
  CHECK(m.nbytes() == 4096);
  CHECK(a.accounting().snapshot()[MemCategory::communication] == before);
  CHECK_THROWS_AS(m.raw(), std::logic_error);

  Tensor v = m.view(8, {4});  // a view taken before the data exists, as the tape captures them
  m.storage()->materialize();
  CHECK(a.accounting().snapshot()[MemCategory::communication] == before + 4096);
  m.flatten().fill(2.0f);
  CHECK(v.data<float>()[0] == 2.0f);
  m.storage()->release();
  CHECK_FALSE(v.has_data());
  CHECK(a.accounting().snapshot()[MemCategory::communication] == before);
  m.storage()->materialize();
  m.flatten().fill(3.0f);
  CHECK(v.data<float>()[3] == 3.0f);
}

TEST_CASE("allocator: per-category current and peak bytes") {
  MemAccounting& acc = cpu_allocator().accounting();
  const MemSnapshot s0 = acc.snapshot();
  acc.reset_peaks();
  {
    Tensor p = Tensor::empty({1000}, DType::f32, MemCategory::parameters);
    Tensor g = Tensor::empty({500}, DType::bf16, MemCategory::gradients);
    const MemSnapshot s1 = acc.snapshot();
    CHECK(s1[MemCategory::parameters] == s0[MemCategory::parameters] + 4000);
    CHECK(s1[MemCategory::gradients] == s0[MemCategory::gradients] + 1000);
    CHECK(s1.total_current == s0.total_current + 5000);
    { Tensor tmp = Tensor::empty({2000}, DType::f32, MemCategory::activations); }
    const MemSnapshot s2 = acc.snapshot();
    CHECK(s2[MemCategory::activations] == s0[MemCategory::activations]);
    CHECK(s2.peak_of(MemCategory::activations) == s0[MemCategory::activations] + 8000);
    CHECK(s2.total_peak == s0.total_current + 5000 + 8000);
  }
  const MemSnapshot s3 = acc.snapshot();
  CHECK(s3.total_current == s0.total_current);
  CHECK(s3.peak_of(MemCategory::parameters) == s0[MemCategory::parameters] + 4000);
  acc.reset_peaks();
  CHECK(acc.snapshot().peak_of(MemCategory::parameters) == s0[MemCategory::parameters]);
  CHECK(category_name(MemCategory::optimizer) == "optimizer");
}

namespace {
// Two units: y = W1 (W0 x); loss = cross-entropy of y. Parameters in flat buffers with gradients.
struct TwoUnits {
  Tensor params = Tensor::empty({2 * 16}), grads = Tensor::zeros({2 * 16});
  Tensor w0 = params.view(0, {4, 4}), w1 = params.view(16, {4, 4});
  Tensor x = Tensor::empty({2, 4}), targets = Tensor::empty({2}, DType::i32);
  TwoUnits() {
    for (int i = 0; i < 32; ++i) params.data<float>()[i] = 0.1f * static_cast<float>((i * 7) % 11) - 0.5f;
    for (int i = 0; i < 8; ++i) x.data<float>()[i] = 0.3f * static_cast<float>(i % 5) - 0.4f;
    targets.data<int32_t>()[0] = 1;
    targets.data<int32_t>()[1] = 3;
    w0.set_requires_grad(true);
    w0.bind_grad(grads.view(0, {4, 4}));
    w1.set_requires_grad(true);
    w1.bind_grad(grads.view(16, {4, 4}));
  }
  Tensor loss(Tape& tape) {
    tape.begin_unit(0);
    Tensor h = ops::linear(tape, x, w0, Tensor());
    tape.end_unit(0);
    tape.begin_unit(1);
    Tensor y = ops::linear(tape, h, w1, Tensor());
    tape.end_unit(1);
    return ops::cross_entropy(tape, y, targets, 4);
  }
  double grad_sum(int unit) const {
    double s = 0;
    for (int i = 0; i < 16; ++i) s += std::abs(grads.data<float>()[unit * 16 + i]);
    return s;
  }
};
}  // namespace

TEST_CASE("tape: a range marker sees every op and unit, nested, in both directions") {
  struct Recorder final : RangeMarker {
    mutable std::vector<std::string> events;
    mutable int depth = 0;
    void push_range(const std::string& name) const override {
      events.push_back(std::string(static_cast<size_t>(depth++), ' ') + name);
    }
    void pop_range() const override {
      REQUIRE(depth > 0);
      --depth;
    }
  } marks;
  TwoUnits m;
  Tape tape;
  tape.set_marker(&marks);
  tape.backward(m.loss(tape));
  const std::vector<std::string> want = {"unit 0", " matmul", "unit 1", " matmul", "crossentropy",
                                         "crossentropy backward", "unit 1", " matmul backward", "unit 0",
                                         " matmul backward"};
  CHECK(marks.events == want);
  CHECK(marks.depth == 0);
}

TEST_CASE("tape: unit hooks fire in forward order, then in reverse around each unit's backward") {
  TwoUnits m;
  Tape tape;
  std::vector<std::string> events;
  tape.set_hooks({[&](int u) { events.push_back("pre_forward" + std::to_string(u)); },
                  [&](int u) { events.push_back("post_forward" + std::to_string(u)); },
                  [&](int u) {
                    // Before unit u's backward its gradients are untouched.
                    CHECK(m.grad_sum(u) == 0.0);
                    events.push_back("pre_backward" + std::to_string(u));
                  },
                  [&](int u) {
                    // After it they are complete, and the earlier unit has not started.
                    CHECK(m.grad_sum(u) > 0.0);
                    if (u == 1) CHECK(m.grad_sum(0) == 0.0);
                    events.push_back("post_backward" + std::to_string(u));
                  }});
  Tensor loss = m.loss(tape);
  tape.backward(loss);
  const std::vector<std::string> want = {"pre_forward0", "post_forward0", "pre_forward1", "post_forward1",
                                         "pre_backward1", "post_backward1", "pre_backward0", "post_backward0"};
  CHECK(events == want);
  CHECK(tape.size() == 0);
}

TEST_CASE("tape: gradients accumulate into bound buffers across backward passes") {
  TwoUnits m;
  Tape tape;
  tape.backward(m.loss(tape));
  const std::vector<float> once(m.grads.data<float>(), m.grads.data<float>() + 32);
  tape.backward(m.loss(tape), 0.5f);  // a second micro-batch, seeded with a different weight
  for (int i = 0; i < 32; ++i) CHECK(m.grads.data<float>()[i] == doctest::Approx(1.5f * once[i]).epsilon(1e-6));
}

TEST_CASE("tape: no_grad records nothing; activations and their gradients are freed after backward") {
  TwoUnits m;
  Tape tape;
  MemAccounting& acc = cpu_allocator().accounting();
  const size_t act0 = acc.snapshot()[MemCategory::activations];
  {
    Tape::NoGrad ng(tape);
    CHECK_FALSE(tape.recording());
    Tensor loss = m.loss(tape);
    CHECK(tape.size() == 0);
    CHECK_FALSE(loss.requires_grad());
    CHECK_THROWS_AS(tape.backward(loss), std::logic_error);
  }
  CHECK(tape.recording());
  {
    Tensor loss = m.loss(tape);
    CHECK(tape.size() == 7);  // 3 ops + 4 markers
    CHECK(acc.snapshot()[MemCategory::activations] > act0);
    tape.backward(loss);
  }
  CHECK(acc.snapshot()[MemCategory::activations] == act0);
  CHECK(m.grad_sum(0) > 0.0);
}

TEST_CASE("tape: a checkpointed unit runs again before its backward, with the same gradients bit for bit") {
  TwoUnits plain;
  Tape reference;
  reference.backward(plain.loss(reference));
  for (const bool keep : {false, true})
    for (const bool to_host : {false, true}) {
      CAPTURE(keep);
      CAPTURE(to_host);
      TwoUnits m;
      Tape tape;
      std::vector<std::string> events;
      auto log = [&](const char* what) { return [&events, what](int u) { events.push_back(what + std::to_string(u)); }; };
      tape.set_hooks({log("pre_forward"), log("post_forward"), log("pre_backward"), log("post_backward")});
      const CheckpointOptions o{keep, to_host, true};
      int runs = 0;
      auto unit = [&](const Tensor& w) {
        return [&runs, w](Tape& t, const Tensor& in) {
          ++runs;
          return ops::linear(t, in, w, Tensor());
        };
      };
      const Tensor h = tape.checkpoint(0, m.x, o, unit(m.w0));
      const Tensor y = tape.checkpoint(1, h, o, unit(m.w1));
      CHECK(tape.size() == 2);  // one entry per unit, nothing of their ops
      CHECK(h.has_data() != to_host);  // unit 1's input waits on the host
      tape.backward(ops::cross_entropy(tape, y, m.targets, 4));
      CHECK(runs == 4);
      const std::vector<std::string> want = {
          "pre_forward0",  "post_forward0",  "pre_forward1",  "post_forward1",   // forward
          "pre_forward1",  "post_forward1",  "pre_backward1", "post_backward1",  // unit 1 recomputed, then its backward
          "pre_forward0",  "post_forward0",  "pre_backward0", "post_backward0"};
      CHECK(events == want);
      CHECK(std::equal(m.grads.data<float>(), m.grads.data<float>() + 32, plain.grads.data<float>()));
    }
}

TEST_CASE("tape: a recompute that does not take back what its forward kept is refused") {
  TwoUnits m;
  Tape tape;
  int runs = 0;
  const Tensor y = tape.checkpoint(0, m.x, {true, false, true}, [&](Tape& t, const Tensor& in) {
    Tensor h = ops::linear(t, in, m.w0, Tensor());
    return runs++ ? h : ops::linear(t, h, m.w1, Tensor());  // one matmul fewer the second time
  });
  CHECK_THROWS_WITH_AS(tape.backward(ops::cross_entropy(tape, y, m.targets, 4)),
                       "checkpoint: unit 0's recompute took back 1 of the 2 outputs its forward kept", std::logic_error);
}

TEST_CASE("host block cache: a freed block of the same size comes back, within the peak in use") {
  HostBlockCache cache;
  const size_t MiB = size_t{1} << 20;
  void* a = cache.allocate(4 * MiB);
  void* b = cache.allocate(2 * MiB);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(reinterpret_cast<uintptr_t>(a) % 4096 == 0);  // [Note: host alignment]
  static_cast<char*>(a)[4 * MiB - 1] = 1;            // the whole block is there
  cache.free(a, 4 * MiB);
  cache.free(b, 2 * MiB);
  CHECK(cache.stats().kept == 6 * MiB);
  CHECK(cache.allocate(4 * MiB) == a);  // the same size: the kept block, no new pages
  void* c = cache.allocate(3 * MiB);    // another size: a new block, the 2 MiB one stays kept
  CHECK(c != b);
  auto s = cache.stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 3);
  CHECK(s.kept == 2 * MiB);
  CHECK(s.peak_in_use == 7 * MiB);
  cache.free(a, 4 * MiB);
  cache.free(c, 3 * MiB);
  // Kept bytes never pass the most ever in use at once (7 MiB): of 4 + 3 more, the 3 go back.
  CHECK(cache.stats().kept <= 7 * MiB);
  CHECK(cache.stats().kept == 6 * MiB);
  CHECK(cache.release() == 6 * MiB);
  CHECK(cache.stats().kept == 0);
}

TEST_CASE("host allocator: large tensors freed and made again reuse their blocks; accounting as before") {
  Allocator& a = cpu_allocator();
  const size_t before = a.accounting().snapshot()[MemCategory::activations];
  const void* first;
  {
    const Tensor t = Tensor::empty({300000}, DType::f32, MemCategory::activations);  // 1.2 MB
    first = t.raw();
    CHECK(a.accounting().snapshot()[MemCategory::activations] == before + 1200000);
  }
  CHECK(a.accounting().snapshot()[MemCategory::activations] == before);
  const Tensor again = Tensor::empty({300000}, DType::f32, MemCategory::activations);
  CHECK(again.raw() == first);
}

TEST_CASE("ops: narrow, reshape and concat move values and gradients exactly") {
  // u = concat(x's columns [4, 6), x's columns [0, 4) reshaped to heads of 2 and back) + x as
  // (2,3,6) again: x's columns permuted plus x. The loss of u against the same loss of a leaf
  // holding those values: the same number, and x's gradient each element's two terms.
  const int P[6] = {4, 5, 0, 1, 2, 3};
  Tensor x = Tensor::empty({2, 3, 6}), w = Tensor::empty({5, 6}), targets = Tensor::empty({2, 3}, DType::i32);
  for (int i = 0; i < 36; ++i) x.data<float>()[i] = 0.37f * static_cast<float>((i * 7) % 13) - 2.0f;
  for (int i = 0; i < 30; ++i) w.data<float>()[i] = 0.1f * static_cast<float>((i * 5) % 11) - 0.5f;
  for (int i = 0; i < 6; ++i) targets.data<int32_t>()[i] = (i * 3) % 5;
  x.set_requires_grad(true);
  Tensor leaf = Tensor::empty({2, 3, 6});
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 6; ++c) leaf.data<float>()[r * 6 + c] = x.data<float>()[r * 6 + P[c]] + x.data<float>()[r * 6 + c];
  leaf.set_requires_grad(true);

  Tape tape;
  const Tensor heads = ops::reshape(tape, ops::narrow(tape, x, 0, 4), {2, 3, 2, 2});
  const Tensor y = ops::concat(tape, {ops::narrow(tape, x, 4, 2), ops::reshape(tape, heads, {2, 3, 4})});
  const Tensor u = ops::add(tape, y, ops::reshape(tape, ops::reshape(tape, x, {6, 6}), {2, 3, 6}));
  REQUIRE(u.shape() == Shape{2, 3, 6});
  for (int i = 0; i < 36; ++i) CHECK(u.data<float>()[i] == leaf.data<float>()[i]);
  const Tensor loss = ops::cross_entropy(tape, ops::linear(tape, u, w, Tensor()), targets, 5);
  tape.backward(loss);
  Tape ref_tape;
  const Tensor ref_loss = ops::cross_entropy(ref_tape, ops::linear(ref_tape, leaf, w, Tensor()), targets, 5);
  ref_tape.backward(ref_loss);
  CHECK(loss.data<float>()[0] == ref_loss.data<float>()[0]);
  const float* g = leaf.grad().data<float>();
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 6; ++c) {
      float want = g[r * 6 + c];  // through the identity
      for (int k = 0; k < 6; ++k)
        if (P[k] == c) want += g[r * 6 + k];  // through the permutation
      CHECK(x.grad().data<float>()[r * 6 + c] == want);
    }

  CHECK_THROWS_WITH_AS(ops::narrow(tape, x, 5, 2), "narrow: columns [5, 7) of (2, 3, 6)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::reshape(tape, x, {5, 7}), "reshape: (2, 3, 6) as (5, 7)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::concat(tape, {x, w}), doctest::Contains("concat: (5, 6) does not stand beside (2, 3, 6)"),
                       std::invalid_argument);
}

TEST_CASE("ops: Gemma's scale, rmsnorm offset and attention options against their plain equivalents, bit for bit") {
  // Each against the op it stands for computed another way, with the same f32 arithmetic: the
  // values and the input gradients (through one linear layer and cross-entropy) must be equal.
  Tensor x = Tensor::empty({2, 5, 12}), w = Tensor::empty({3, 12}), g = Tensor::empty({12}),
         targets = Tensor::empty({2, 5}, DType::i32);
  for (int i = 0; i < 120; ++i) x.data<float>()[i] = 0.29f * static_cast<float>((i * 7) % 17) - 2.0f;
  for (int i = 0; i < 36; ++i) w.data<float>()[i] = 0.1f * static_cast<float>((i * 5) % 11) - 0.5f;
  for (int i = 0; i < 12; ++i) g.data<float>()[i] = 0.05f * static_cast<float>(i) - 0.3f;
  for (int i = 0; i < 10; ++i) targets.data<int32_t>()[i] = (i * 2) % 3;
  // f's output, and the gradient of x through f; y's last dimension is 12, or 4 (attention's).
  auto through = [&](auto f) {
    Tensor leaf = Tensor::empty(x.shape());
    leaf.copy_from(x);
    leaf.set_requires_grad(true);
    Tape tape;
    const Tensor y = f(tape, leaf);
    const Tensor wy = y.dim(-1) == 12 ? w : w.view(0, {3, 4});
    tape.backward(ops::cross_entropy(tape, ops::linear(tape, y, wy, Tensor()), targets, 3));
    Tensor out = Tensor::empty(y.shape());
    out.copy_from(y);
    return std::pair{out, leaf.grad()};
  };
  auto same = [](const Tensor& a, const Tensor& b) {
    REQUIRE(a.numel() == b.numel());
    for (int64_t i = 0; i < a.numel(); ++i)
      if (a.data<float>()[i] != b.data<float>()[i]) return false;
    return true;
  };

  SUBCASE("scale: s * x, and s times the gradient") {
    const float s = 3.4641016f;  // sqrt(12)
    const auto [y, dx] = through([&](Tape& t, const Tensor& v) { return ops::scale(t, v, s); });
    Tensor sx = Tensor::empty(x.shape());
    for (int i = 0; i < 120; ++i) sx.data<float>()[i] = s * x.data<float>()[i];
    CHECK(same(y, sx));
    Tensor leaf = sx;
    leaf.set_requires_grad(true);
    Tape tape;
    tape.backward(ops::cross_entropy(tape, ops::linear(tape, leaf, w, Tensor()), targets, 3));
    for (int i = 0; i < 120; ++i) CHECK(dx.data<float>()[i] == s * leaf.grad().data<float>()[i]);
  }
  SUBCASE("rmsnorm: offset 1 is weight 1 + w") {
    Tensor g1 = Tensor::empty({12});
    for (int i = 0; i < 12; ++i) g1.data<float>()[i] = 1.0f + g.data<float>()[i];
    const auto [y, dx] = through([&](Tape& t, const Tensor& v) { return ops::rmsnorm(t, v, g, 1e-6f, 1.0f); });
    const auto [y1, dx1] = through([&](Tape& t, const Tensor& v) { return ops::rmsnorm(t, v, g1, 1e-6f); });
    CHECK(same(y, y1));
    CHECK(same(dx, dx1));
  }
  SUBCASE("attention: a window of T or more, and the default scale given, are plain causal attention") {
    // x as qkv (B,T,3C) of 2 heads of 2: T = 5.
    const auto plain = through([&](Tape& t, const Tensor& v) { return ops::attention(t, v, 2, 2); });
    for (const AttentionOptions opt :
         {AttentionOptions{0.0f, 5}, AttentionOptions{0.0f, 100}, AttentionOptions{1.0f / std::sqrt(2.0f), 0}}) {
      CAPTURE(opt.window);
      const auto [y, dx] =
          through([&](Tape& t, const Tensor& v) { return ops::attention(t, v, 2, 2, AttentionKernel::own, opt); });
      CHECK(same(y, plain.first));
      CHECK(same(dx, plain.second));
    }
    // A window of 2: row 4 sees rows 3 and 4 only, so row 4's output does not depend on rows 0-2.
    const AttentionOptions two{0.0f, 2};
    Tensor moved = Tensor::empty(x.shape());
    moved.copy_from(x);
    for (int i = 0; i < 36; ++i) moved.data<float>()[i] += 1.0f;  // rows 0-2 of batch 0
    Tape tape;
    const Tensor a = ops::attention(tape, x, 2, 2, AttentionKernel::own, two);
    const Tensor b = ops::attention(tape, moved, 2, 2, AttentionKernel::own, two);
    for (int i = 16; i < 20; ++i) CHECK(a.data<float>()[i] == b.data<float>()[i]);  // (b 0, t 4)
    CHECK(a.data<float>()[12] != b.data<float>()[12]);                              // (b 0, t 3) sees row 2
  }

  Tape tape;
  CHECK_THROWS_WITH_AS(ops::attention(tape, x, 2, 2, AttentionKernel::own, {0.0f, -1}),
                       doctest::Contains("attention: the sliding window must be positive"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::attention(tape, x, 2, 2, AttentionKernel::own, {-0.5f, 0}),
                       doctest::Contains("attention: the scale must be positive"), std::invalid_argument);
  CHECK_THROWS_AS(ops::attention(tape, x, 2, 2, AttentionKernel::own, {std::nanf(""), 0}), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::geglu(tape, Tensor::zeros({2, 5})), doctest::Contains("geglu: the last dimension"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::scale(tape, x, INFINITY), doctest::Contains("scale: the factor must be finite"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::rmsnorm(tape, x, g, 1e-6f, std::nanf("")),
                       doctest::Contains("rmsnorm: the weight's offset"), std::invalid_argument);
}
