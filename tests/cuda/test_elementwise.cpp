// GELU and the residual add against their CPU twins, f32 and bf16, aligned and at odd offsets
// (the scalar path), sizes with a tail.
#include "kernels/cpu/kernels.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

TEST_CASE_TEMPLATE("gelu and residual match the CPU", T, float, bf16) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{4096}, size_t{1 << 20} + 3}) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      CAPTURE(n);
      CAPTURE(off);
      const auto x = rounded<T>(random_vec(n + off, -4, 4)), y = rounded<T>(random_vec(n + off)),
                 g = rounded<T>(random_vec(n + off)), acc = rounded<T>(random_vec(n + off));
      DeviceBuffer<T> dx(x), dy(y), dg(g), out(n + off), dacc(acc), dacc2(acc);
      std::vector<float> ref(n), ref_acc(acc.begin() + off, acc.end()), ref_acc2 = ref_acc;
      auto tail = [&](const std::vector<float>& v) { return std::vector<float>(v.begin() + long(off), v.end()); };

      out.poison();
      cuda::gelu_forward<T>(out + off, dx + off, n, nullptr);
      cpu::gelu_forward(ref.data(), x.data() + off, n);
      expect_close(tail(out.download()), ref, kTol<T>, "gelu_forward");

      cuda::gelu_backward<T>(dacc + off, dx + off, dg + off, n, nullptr);
      cpu::gelu_backward(ref_acc.data(), x.data() + off, g.data() + off, n);
      expect_close(tail(dacc.download()), ref_acc, kTol<T>, "gelu_backward");

      out.poison();
      cuda::residual_forward<T>(out + off, dx + off, dy + off, n, nullptr);
      cpu::residual_forward(ref.data(), x.data() + off, y.data() + off, n);
      expect_close(tail(out.download()), ref, kTol<T>, "residual_forward");

      cuda::residual_backward<T>(dacc2 + off, nullptr, dg + off, n, nullptr);
      cpu::residual_backward(ref_acc2.data(), nullptr, g.data() + off, n);
      expect_close(tail(dacc2.download()), ref_acc2, kTol<T>, "residual_backward");
    }
  }
}

}  // namespace zt::test
