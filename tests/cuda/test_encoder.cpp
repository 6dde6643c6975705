// The encoder against its CPU twin, f32 and bf16: a row range of the tied table (tokens outside it
// take zeros), null tables and gradients, C that the 16-byte packs do not divide (the scalar
// path), tokens drawn from a few values so that rows repeat in runs longer than the backward's
// unroll, and the backward repeating bit for bit.
#include <stdexcept>

#include "kernels/cpu/kernels.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

namespace {

struct EncoderShape {
  int B, T, C;
  int vocab;  // tokens are drawn from [0, vocab)
  int row0, rows;
};

constexpr EncoderShape kShapes[] = {
    {1, 1, 3, 5, 0, 5},                                     // one position, C not a multiple of any pack
    {2, 5, 13, 7, 2, 3},                                    // rows outside [2,5) take zeros
    {3, 7, 16, 40, 10, 20},                                 // a row range in the middle of the table
    {4, 80, 8, 3, 0, 3},                                    // 320 positions over three rows: runs of ~100
    {4, 64, 768, 1000, 0, 1000}, {2, 33, 100, 60, 30, 30},  // C a multiple of 4 but not of 8: packs for f32 only
};

// One shape's random tokens and tables (or their gradients), on the host rounded to T and on the device.
template <class T>
struct Encoder {
  explicit Encoder(const EncoderShape& e)
      : N(e.B * e.T),
        inp(random_ints(size_t(N), 0, e.vocab)),
        wte(rounded<T>(random_vec(size_t(e.rows) * e.C))),
        wpe(rounded<T>(random_vec(size_t(e.T) * e.C))),
        dinp(inp),
        dwte(wte),
        dwpe(wpe) {}
  int N;
  std::vector<int32_t> inp;
  std::vector<float> wte, wpe;
  DeviceBuffer<int32_t> dinp;
  DeviceBuffer<T> dwte, dwpe;
};

}  // namespace

TEST_CASE_TEMPLATE("encoder forward matches the CPU", T, float, bf16) {
  for (const EncoderShape& e : kShapes) {
    INFO("B " << e.B << ", T " << e.T << ", C " << e.C);
    Encoder<T> x(e);
    DeviceBuffer<T> out(size_t(x.N) * e.C);
    std::vector<float> ref(size_t(x.N) * e.C);
    for (int tables = 0; tables < 4; ++tables) {  // both, wte only, wpe only, neither
      CAPTURE(tables);
      const bool with_wte = tables == 0 || tables == 1, with_wpe = tables == 0 || tables == 2;
      out.poison();
      cuda::encoder_forward<T>(out, x.dinp, with_wte ? x.dwte.get() : nullptr, with_wpe ? x.dwpe.get() : nullptr, e.B,
                               e.T, e.C, e.row0, e.rows, nullptr);
      cpu::encoder_forward(ref.data(), x.inp.data(), with_wte ? x.wte.data() : nullptr,
                           with_wpe ? x.wpe.data() : nullptr, e.B, e.T, e.C, e.row0, e.rows);
      expect_close(out.download(), ref, kTol<T>, "encoder_forward");
    }
  }
}

TEST_CASE_TEMPLATE("encoder backward matches the CPU and repeats bit for bit", T, float, bf16) {
  for (const EncoderShape& e : kShapes) {
    INFO("B " << e.B << ", T " << e.T << ", C " << e.C);
    Encoder<T> x(e);  // the tables are the gradients' starting values here
    const auto dout = rounded<T>(random_vec(size_t(x.N) * e.C));
    DeviceBuffer<T> ddout(dout);
    const size_t bytes = cuda::encoder_backward_scratch_bytes(e.B, e.T, e.rows);
    DeviceBuffer<char> scratch(bytes);
    auto backward = [&](T* dwte, T* dwpe, void* s, size_t s_bytes) {
      cuda::encoder_backward<T>(dwte, dwpe, ddout, x.dinp, e.B, e.T, e.C, e.row0, e.rows, s, s_bytes, nullptr);
    };
    auto restart = [&] {
      x.dwte.upload(x.wte);
      x.dwpe.upload(x.wpe);
    };

    auto ref_wte = x.wte, ref_wpe = x.wpe;
    backward(x.dwte, x.dwpe, scratch, bytes);
    cpu::encoder_backward(ref_wte.data(), ref_wpe.data(), dout.data(), x.inp.data(), e.B, e.T, e.C, e.row0, e.rows);
    const auto got_wte = x.dwte.download(), got_wpe = x.dwpe.download();
    expect_close(got_wte, ref_wte, kTol<T>, "encoder_backward dwte");
    expect_close(got_wpe, ref_wpe, kTol<T>, "encoder_backward dwpe");

    // Again from the same start: the same bits (no order-dependent atomics).
    restart();
    backward(x.dwte, x.dwpe, scratch, bytes);
    CHECK(x.dwte.download() == got_wte);
    CHECK(x.dwpe.download() == got_wpe);

    // One gradient at a time; dwpe alone needs no scratch.
    restart();
    backward(x.dwte, nullptr, scratch, bytes);
    backward(nullptr, x.dwpe, nullptr, 0);
    CHECK(x.dwte.download() == got_wte);
    CHECK(x.dwpe.download() == got_wpe);
  }
}

TEST_CASE("encoder backward refuses a scratch that is too small") {
  const int B = 2, T = 8, C = 8, rows = 16;
  DeviceBuffer<int32_t> inp(random_ints(B * T, 0, rows));
  DeviceBuffer<float> dout(random_vec(B * T * C)), dwte(random_vec(rows * C));
  const size_t bytes = cuda::encoder_backward_scratch_bytes(B, T, rows);
  DeviceBuffer<char> scratch(bytes);
  CHECK_THROWS_AS(
      cuda::encoder_backward<float>(dwte, nullptr, dout, inp, B, T, C, 0, rows, scratch, bytes - 1, nullptr),
      std::invalid_argument);
  CHECK_THROWS_AS(cuda::encoder_backward<float>(dwte, nullptr, dout, inp, B, T, C, 0, rows, nullptr, 0, nullptr),
                  std::invalid_argument);
}

}  // namespace zt::test
