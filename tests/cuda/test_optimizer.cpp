// AdamW, the sum of squares and the inf/NaN check against their CPU twins, f32 and bf16 storage,
// aligned and at an odd offset (the scalar path), sizes with a tail. AdamW runs steps t = 1..3
// with weight decay and grad_scale != 1; its f32 master, m and v must stay within 1e-6 of the CPU
// twin's whatever T is (the arithmetic is f32 on the same rounded gradients), and the T copy must
// be exactly the master rounded.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/kernels.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

namespace {

constexpr size_t kSizes[] = {1, 7, 4096 + 3, (size_t{1} << 20) + 1};

std::vector<float> slice(const std::vector<float>& v, size_t off) { return {v.begin() + long(off), v.end()}; }

// Element by element: |got - ref| <= tol * max(1, |ref|).
void expect_each_close(const std::vector<float>& got, const std::vector<float>& ref, double tol, const char* what) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - ref[i]) / std::max(1.0, std::abs(double(ref[i]))));
  INFO(what << ": worst element error " << worst << " (bound " << tol << ")");
  CHECK(worst <= tol);
}

}  // namespace

TEST_CASE_TEMPLATE("adamw matches the CPU over three steps", T, float, bf16) {
  const float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f, grad_scale = 0.37f;
  for (size_t n : kSizes) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      for (bool with_params : {true, false}) {
        CAPTURE(n);
        CAPTURE(off);
        CAPTURE(with_params);
        auto master = random_vec(n + off), m = std::vector<float>(n + off, 0.0f), v = m;
        DeviceBuffer<float> dmaster(master), dm(m), dv(v);
        DeviceBuffer<T> params(n + off), grads(n + off);
        for (int t = 1; t <= 3; ++t) {
          CAPTURE(t);
          const auto g = rounded<T>(random_vec(n + off, -2, 2));
          grads.upload(g);
          params.poison();
          cuda::adamw_update<T>(dmaster + off, with_params ? params + off : nullptr, grads + off, dm + off, dv + off, n,
                                lr, beta1, beta2, eps, wd, t, grad_scale, nullptr);
          cpu::adamw_update(master.data() + off, g.data() + off, m.data() + off, v.data() + off, n, lr, beta1, beta2,
                            eps, wd, t, grad_scale);
          const auto got = slice(dmaster.download(), off), ref = slice(master, off);
          expect_close(got, ref, 1e-6, "adamw master");
          expect_each_close(got, ref, 1e-6, "adamw master");
          expect_close(slice(dm.download(), off), slice(m, off), 1e-6, "adamw m");
          expect_close(slice(dv.download(), off), slice(v, off), 1e-6, "adamw v");
          if (with_params) CHECK(slice(params.download(), off) == rounded<T>(got));
        }
      }
    }
  }
}

TEST_CASE_TEMPLATE("sum_squares adds the CPU's sum and repeats bit for bit", T, float, bf16) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{1000003}, (size_t{1} << 22) + 5}) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      CAPTURE(n);
      CAPTURE(off);
      const auto x = rounded<T>(random_vec(n + off, -3, 3));
      DeviceBuffer<T> dx(x);
      DeviceBuffer<double> out(std::vector<double>{2.5}), scratch(cuda::kSumSquaresScratch);
      cuda::sum_squares<T>(out, dx + off, n, scratch, nullptr);
      const double got = out.download()[0], ref = 2.5 + cpu::sum_squares(x.data() + off, n);
      INFO("got " << got << ", CPU " << ref);
      CHECK(std::abs(got - ref) <= 1e-10 * ref);  // both sum exact double squares, in other orders
      out.upload(std::vector<double>{2.5});
      cuda::sum_squares<T>(out, dx + off, n, scratch, nullptr);
      CHECK(out.download()[0] == got);  // the same partials in the same order
    }
  }
}

TEST_CASE_TEMPLATE("any_nonfinite finds one inf or NaN anywhere", T, float, bf16) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t n : {size_t{1}, size_t{9}, size_t{1000003}}) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      CAPTURE(n);
      CAPTURE(off);
      auto x = random_vec(n + off, -1e3f, 1e3f);
      DeviceBuffer<T> dx(x);
      DeviceBuffer<int> flag(std::vector<int>{0});
      cuda::any_nonfinite<T>(flag, dx + off, n, nullptr);
      CHECK(flag.download()[0] == 0);
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        for (float bad : {inf, -inf, nan}) {
          CAPTURE(at);
          CAPTURE(bad);
          auto y = x;
          y[off + at] = bad;
          dx.upload(y);
          flag.upload(std::vector<int>{0});
          cuda::any_nonfinite<T>(flag, dx + off, n, nullptr);
          CHECK(flag.download()[0] == 1);
        }
      }
      // The flag is only ever set: clean data leaves a 1 from before.
      dx.upload(x);
      flag.upload(std::vector<int>{1});
      cuda::any_nonfinite<T>(flag, dx + off, n, nullptr);
      CHECK(flag.download()[0] == 1);
    }
  }
}

}  // namespace zt::test
