// The backend-op sweep on CUDA (tests/backend_ops.hpp): every row of the table, in every dtype
// the CUDA backend computes in (f32, bf16), at every shape of the row, against the CPU backend
// on the same values: the CPU twin of a bf16 case runs in f32 on the bf16-rounded inputs. The
// outputs, and the gradients accumulated onto the same random g0, are compared whole under the
// dtype's bound ([Note: sweep tolerances] in tests/backend_ops.cpp); where the CPU leaves an
// element exactly zero or untouched and the row says it must be (padded logits, ignored rows,
// table rows no token reads) CUDA must too. Every gradient computed alone must match it
// computed beside the others, and no gradient at all must be accepted; shapes the CUDA kernels
// document as unsupported, and dtypes they do not compute in, are refused with
// std::invalid_argument. The CPU side is checked against float64 in tests/test_backend_ops.cpp.
#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "tensor/cuda_allocator.hpp"
#include "tests/backend_ops.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::sweep {

namespace {

constexpr double kAnyError = std::numeric_limits<double>::infinity();  // where only zeros are checked

// The gradient minus its g0 (what the backward added), or itself where it overwrites.
DVec added(const Problem& p, const Result& r, size_t i) {
  DVec d = r.grad[i];
  if (!p.overwrites)
    for (size_t k = 0; k < d.size(); ++k) d[k] -= p.in[i].g0[k];
  return d;
}

void compare(const Problem& p, const Result& got, const Result& want, const std::string& what) {
  for (size_t j = 0; j < p.out.size(); ++j) {
    const Out& o = p.out[j];
    expect_close(got.out[j], want.out[j], o.host ? kHostTol : tolerance(o.dtype), o.exact, o.exact_zeros,
                 what + ": " + o.name);
  }
  for (size_t i = 0; i < got.grad.size(); ++i) {
    if (!p.in[i].grad) continue;
    const std::string g = what + ": d" + p.in[i].name;
    expect_close(got.grad[i], want.grad[i], tolerance(p.in[i].dtype), false, false, g);
    if (p.in[i].exact_zeros) expect_close(added(p, got, i), added(p, want, i), kAnyError, false, true, g + " (zeros)");
  }
}

}  // namespace

TEST_CASE("every backend op on CUDA against the CPU backend") {
  const Backend& gpu = *cuda_backend();
  const Backend& cpu = backend(Device::cpu);
  Allocator& dev = cuda_allocator(0);
  std::mt19937 gen(test::rng()());
  for_each_case(gpu, dev, gen, [&](const OpRow& row, const Types& ty, const Problem& p, const std::string& what) {
    const Problem twin = row.any_dtype ? p : retyped(p, ty.dt, DType::f32);
    const Result want = run(cpu, cpu_allocator(), twin);
    const Result got = run(gpu, dev, p);
    compare(p, got, want, what);
    if (p.backward && !p.overwrites) {
      std::vector<bool> wanted(p.in.size(), false);
      const Result none = run(gpu, dev, p, true, wanted);
      for (const DVec& g : none.grad) CHECK(g.empty());
      for (size_t i = 0; i < p.in.size(); ++i) {
        if (!p.in[i].grad) continue;
        wanted[i] = true;
        const Result one = run(gpu, dev, p, true, wanted);
        wanted[i] = false;
        expect_close(one.grad[i], got.grad[i], tolerance(p.in[i].dtype), false, false,
                     what + ": d" + p.in[i].name + " alone");
      }
    }
  });
}

// The attention row's problems run through cuDNN's fused kernel instead of ours (train.attention
// "cudnn"): the same comparison with the CPU, for the row's shapes with head sizes cuDNN takes
// (multiples of 8) and larger ones across its tiles with grouped-query heads, sliding windows and
// Gemma's scale among them; the backward adds onto g0 like ours, gives the same bits twice
// (cuDNN's deterministic algorithm), and f32 is refused by name.
TEST_CASE("attention through cuDNN's fused kernel against the CPU backend (bf16)") {
  const Backend& gpu = *cuda_backend();
  const Backend& cpu = backend(Device::cpu);
  Allocator& dev = cuda_allocator(0);
  REQUIRE(gpu.has_attention(AttentionKernel::cudnn));
  std::mt19937 gen(test::rng()());
  const OpRow& row = *std::find_if(op_rows().begin(), op_rows().end(),
                                   [](const OpRow& r) { return std::string(r.name) == "attention"; });
  auto through_cudnn = [](Problem& p, const Dims& d) {
    const int NH = d["NH"], NKV = d["NKV"];
    const AttentionOptions opt = attention_options(d);
    p.forward = [=](const Backend& be, Call& c) {
      c.saved = be.attention_forward(c.out[0], c.in[0], NH, NKV, AttentionKernel::cudnn, opt);
    };
    p.backward = [=](const Backend& be, Call& c) {
      be.attention_backward(c.grad[0], c.dout[0], c.in[0], c.out[0], c.saved, NH, NKV, AttentionKernel::cudnn, opt);
    };
  };
  std::vector<Dims> shapes;
  for (const Dims& d : row.shapes)
    if ((d["C"] / d["NH"]) % 8 == 0) shapes.push_back(d);
  auto dims = [](int B, int T, int C, int NH, int NKV, int qpas = 0, int window = 0) {
    return Dims{{"B", B}, {"T", T}, {"C", C}, {"NH", NH}, {"NKV", NKV}, {"qpas", qpas}, {"window", window}};
  };
  for (const Dims& d : {dims(2, 77, 256, 4, 2), dims(1, 130, 576, 9, 3), dims(2, 200, 768, 12, 12),
                        dims(1, 64, 512, 4, 1), dims(2, 200, 512, 4, 2, 0, 48), dims(1, 130, 512, 4, 1, 256, 64)})
    shapes.push_back(d);
  for (const Dims& d : shapes) {
    const std::string what = describe(row, {DType::bf16, DType::bf16}, d) + " through cudnn";
    INFO(what);
    Problem p = row.make(d, {DType::bf16, DType::bf16}, gen);
    prepare(p, gen);
    const Result want = run(cpu, cpu_allocator(), retyped(p, DType::bf16, DType::f32));
    through_cudnn(p, d);
    const Result got = run(gpu, dev, p), again = run(gpu, dev, p);
    compare(p, got, want, what);
    CHECK(got.grad == again.grad);
  }
  Problem f32 = row.make(shapes.front(), {DType::f32, DType::f32}, gen);
  prepare(f32, gen);
  through_cudnn(f32, shapes.front());
  CHECK_THROWS_WITH_AS(run(gpu, dev, f32), doctest::Contains("computes in bf16"), std::invalid_argument);
}

TEST_CASE("the CUDA backend refuses the dtypes it does not compute in") {
  const Backend& gpu = *cuda_backend();
  Allocator& dev = cuda_allocator(0);
  std::mt19937 gen(7);
  check_refused_dtypes(gpu, dev, gen);
}

}  // namespace zt::sweep
