// Layernorm, its backward and the fused residual + layernorm against the CPU twin, f32 and bf16:
// one row, C that the packs do not divide (the scalar path), rows at an odd offset, more rows
// than the backward has blocks, rows wider than a block (each thread owning several packs) and
// wider than 48 KiB of shared sums, null gradients, and the parameter gradients repeating bit for
// bit. Inputs are off zero mean (a one-pass variance would lose digits), but not so far off that
// the CPU twin's sequential f32 sum of a 16384-wide row strays past the f32 bound.
#include <stdexcept>

#include "kernels/cpu/kernels.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

namespace {

struct Rows {
  int N, C;
};
constexpr Rows kShapes[] = {{1, 8}, {1, 3}, {7, 13}, {5, 768}, {600, 24}, {3, 5000}, {2, 16384}, {33, 100}};

std::vector<float> slice(const std::vector<float>& v, size_t off) { return {v.begin() + long(off), v.end()}; }

}  // namespace

TEST_CASE_TEMPLATE("layernorm forward and the fused residual add match the CPU", T, float, bf16) {
  for (const Rows r : kShapes) {
    for (size_t off : {size_t{0}, size_t{1}}) {  // 1: rows off 16-byte alignment, the scalar path
      CAPTURE(r.N);
      CAPTURE(r.C);
      CAPTURE(off);
      const size_t n = size_t(r.N) * r.C;
      const auto x = rounded<T>(random_vec(n + off, -0.5f, 1.5f)), y = rounded<T>(random_vec(n + off));
      const auto w = rounded<T>(random_vec(size_t(r.C))), b = rounded<T>(random_vec(size_t(r.C)));
      DeviceBuffer<T> dx(x), dy(y), dw(w), db(b), out(n + off), res(n + off);
      DeviceBuffer<float> mean(size_t(r.N)), rstd(size_t(r.N));
      std::vector<float> ref(n), ref_mean(size_t(r.N)), ref_rstd(size_t(r.N));

      out.poison();
      mean.poison();
      rstd.poison();
      cuda::layernorm_forward<T>(out + off, mean, rstd, dx + off, dw, db, r.N, r.C, nullptr);
      cpu::layernorm_forward(ref.data(), ref_mean.data(), ref_rstd.data(), x.data() + off, w.data(), b.data(), r.N,
                             r.C);
      expect_close(slice(out.download(), off), ref, kTol<T>, "layernorm_forward out");
      expect_close(mean.download(), ref_mean, 1e-5, "layernorm_forward mean");
      expect_close(rstd.download(), ref_rstd, 1e-5, "layernorm_forward rstd");

      // residual = x + y as T stores it; out = layernorm(residual).
      std::vector<float> ref_res(n);
      cpu::residual_forward(ref_res.data(), x.data() + off, y.data() + off, n);
      ref_res = rounded<T>(ref_res);
      out.poison();
      res.poison();
      mean.poison();
      rstd.poison();
      cuda::fused_residual_layernorm_forward<T>(res + off, out + off, mean, rstd, dx + off, dy + off, dw, db, r.N, r.C,
                                                nullptr);
      cpu::layernorm_forward(ref.data(), ref_mean.data(), ref_rstd.data(), ref_res.data(), w.data(), b.data(), r.N,
                             r.C);
      expect_close(slice(res.download(), off), ref_res, kTol<T>, "fused residual");
      expect_close(slice(out.download(), off), ref, kTol<T>, "fused layernorm out");
      expect_close(mean.download(), ref_mean, 1e-5, "fused mean");
      expect_close(rstd.download(), ref_rstd, 1e-5, "fused rstd");
    }
  }
}

TEST_CASE_TEMPLATE("layernorm backward matches the CPU and repeats bit for bit", T, float, bf16) {
  for (const Rows r : kShapes) {
    CAPTURE(r.N);
    CAPTURE(r.C);
    const size_t n = size_t(r.N) * r.C;
    const auto x = rounded<T>(random_vec(n, -0.5f, 1.5f)), d = rounded<T>(random_vec(n));
    const auto w = rounded<T>(random_vec(size_t(r.C))), b = rounded<T>(random_vec(size_t(r.C)));
    const auto di0 = rounded<T>(random_vec(n)), dw0 = rounded<T>(random_vec(size_t(r.C))),
               db0 = rounded<T>(random_vec(size_t(r.C)));
    std::vector<float> out(n), mean(size_t(r.N)), rstd(size_t(r.N));
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), r.N, r.C);

    DeviceBuffer<T> dx(x), dd(d), dw(w), ddi(di0), ddw(dw0), ddb(db0);
    DeviceBuffer<float> dmean(mean), drstd(rstd), scratch(cuda::layernorm_backward_scratch_floats(r.N, r.C));
    auto ref_di = di0, ref_dw = dw0, ref_db = db0;
    cuda::layernorm_backward<T>(ddi, ddw, ddb, dd, dx, dw, dmean, drstd, r.N, r.C, scratch, nullptr);
    cpu::layernorm_backward(ref_di.data(), ref_dw.data(), ref_db.data(), d.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), r.N, r.C);
    const auto got_di = ddi.download(), got_dw = ddw.download(), got_db = ddb.download();
    expect_close(got_di, ref_di, kTol<T>, "layernorm_backward dinp");
    expect_close(got_dw, ref_dw, kTol<T>, "layernorm_backward dweight");
    expect_close(got_db, ref_db, kTol<T>, "layernorm_backward dbias");

    // The parameter gradients alone (dinp null), from the same start: the same bits.
    ddw.upload(dw0);
    ddb.upload(db0);
    cuda::layernorm_backward<T>(nullptr, ddw, ddb, dd, dx, dw, dmean, drstd, r.N, r.C, scratch, nullptr);
    CHECK(ddw.download() == got_dw);
    CHECK(ddb.download() == got_db);

    // dinp alone needs no scratch; dbias alone leaves dweight untouched.
    ddi.upload(di0);
    cuda::layernorm_backward<T>(ddi, nullptr, nullptr, dd, dx, dw, dmean, drstd, r.N, r.C, nullptr, nullptr);
    CHECK(ddi.download() == got_di);
    ddw.upload(dw0);
    ddb.upload(db0);
    cuda::layernorm_backward<T>(nullptr, nullptr, ddb, dd, dx, dw, dmean, drstd, r.N, r.C, scratch, nullptr);
    CHECK(ddb.download() == got_db);
    CHECK(ddw.download() == dw0);
  }
}

TEST_CASE("layernorm backward refuses parameter gradients without scratch") {
  const int N = 4, C = 8;
  DeviceBuffer<float> x(random_vec(N * C)), d(random_vec(N * C)), w(random_vec(C)), dw(C), stats(random_vec(N));
  CHECK_THROWS_AS(cuda::layernorm_backward<float>(nullptr, dw, nullptr, d, x, w, stats, stats, N, C, nullptr, nullptr),
                  std::invalid_argument);
}

}  // namespace zt::test
