// Cross-entropy against the CPU twin (one part), f32 and bf16: one row, one class, Vp that the
// packs do not divide (the scalar path), GPT-2's 50257 classes padded to 50304, a padded region
// larger than the classes, and rows with target == ignore_index. The padded columns hold large
// logits, so that any of them taken into the softmax shows; the backward must write exact zeros
// there and on ignored rows.
#include <cmath>

#include "kernels/cpu/kernels.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

namespace {

constexpr int kIgnore = -100;

struct Logits {
  int N, V, Vp;
};
constexpr Logits kShapes[] = {{1, 1, 8}, {1, 5, 5}, {3, 5, 8}, {7, 13, 13}, {9, 1000, 4096}, {16, 50257, 50304}};

}  // namespace

TEST_CASE_TEMPLATE("cross-entropy matches the CPU", T, float, bf16) {
  for (const Logits& s : kShapes) {
    CAPTURE(s.N);
    CAPTURE(s.V);
    CAPTURE(s.Vp);
    const size_t n = size_t(s.N) * s.Vp;
    auto logits = random_vec(n, -8, 8);
    for (int i = 0; i < s.N; ++i)
      for (int c = s.V; c < s.Vp; ++c) logits[size_t(i) * s.Vp + c] = 100.0f;
    logits = rounded<T>(logits);
    auto targets = random_ints(size_t(s.N), 0, s.V);
    for (int i = 1; i < s.N; i += 3) targets[size_t(i)] = kIgnore;  // rows 1, 4, 7, ...
    int counted = 0;
    for (int32_t t : targets) counted += t != kIgnore;
    const float scale = 1.0f / float(counted > 0 ? counted : 1);

    DeviceBuffer<T> dlogits(logits);
    DeviceBuffer<int32_t> dtargets(targets);
    DeviceBuffer<float> losses(size_t(s.N)), lse(size_t(s.N));
    std::vector<float> ref_losses(size_t(s.N)), ref_lse(size_t(s.N));
    const float* parts[] = {logits.data()};
    losses.poison();
    lse.poison();
    cuda::crossentropy_forward<T>(losses, lse, dlogits, dtargets, s.N, s.V, s.Vp, kIgnore, nullptr);
    CHECK(cpu::crossentropy_forward(ref_losses.data(), ref_lse.data(), parts, 1, targets.data(), s.N, s.V, s.Vp,
                                    kIgnore) == counted);
    const auto got_losses = losses.download();
    expect_close(got_losses, ref_losses, 1e-5, "crossentropy_forward losses");
    expect_close(lse.download(), ref_lse, 1e-5, "crossentropy_forward lse");
    for (int i = 0; i < s.N; ++i)
      if (targets[size_t(i)] == kIgnore) CHECK(got_losses[size_t(i)] == 0.0f);

    // The backward from the CPU's lse, over the logits in place.
    lse.upload(ref_lse);
    auto ref_grad = logits;
    float* grad_parts[] = {ref_grad.data()};
    cuda::crossentropy_backward<T>(dlogits, lse, dtargets, scale, s.N, s.V, s.Vp, kIgnore, nullptr);
    cpu::crossentropy_backward(grad_parts, 1, ref_lse.data(), targets.data(), scale, s.N, s.V, s.Vp, kIgnore);
    const auto grad = dlogits.download();
    expect_close(grad, ref_grad, kTol<T>, "crossentropy_backward");
    size_t nonzero = 0;  // where the gradient must be exactly 0
    for (int i = 0; i < s.N; ++i)
      for (int c = targets[size_t(i)] == kIgnore ? 0 : s.V; c < s.Vp; ++c)
        nonzero += grad[size_t(i) * s.Vp + c] != 0.0f;
    CHECK(nonzero == 0);
  }
}

TEST_CASE("cross-entropy: a target outside the classes gives a NaN loss and no onehot") {
  const int N = 2, V = 5, Vp = 8;
  DeviceBuffer<float> logits(random_vec(N * Vp)), losses(N), lse(N);
  DeviceBuffer<int32_t> targets(std::vector<int32_t>{5, 2});  // 5: a padded column
  cuda::crossentropy_forward<float>(losses, lse, logits, targets, N, V, Vp, kIgnore, nullptr);
  const auto l = losses.download();
  CHECK(std::isnan(l[0]));
  CHECK(std::isfinite(l[1]));
  cuda::crossentropy_backward<float>(logits, lse, targets, 1.0f, N, V, Vp, kIgnore, nullptr);
  const auto grad = logits.download();
  for (int c = V; c < Vp; ++c) CHECK(grad[size_t(c)] == 0.0f);
}

}  // namespace zt::test
