// cast against cpu::cast, bit for bit: every 16-bit pattern into f32 (NaN payloads, subnormals,
// infinities included), and into bf16 and f16 random f32 bit patterns plus the edges (rounding
// ties, the f16 overflow threshold, f16 subnormals, f32 subnormals, NaNs with payloads), aligned
// and at an odd offset (the scalar path); copies for the same dtype; and the pairs cpu::cast
// refuses refused here too.
#include <limits>
#include <stdexcept>
#include <utility>

#include "kernels/cpu/kernels.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

namespace {

constexpr uint32_t kEdges[] = {
    0x00000000, 0x80000000, 0x7f800000, 0xff800000,              // zeros and infinities
    0x7fc00000, 0xffc00001, 0x7f800001, 0x7fbfffff, 0xffffffff,  // quiet and signalling NaNs, payloads
    0x00000001, 0x807fffff, 0x00400000,                          // f32 subnormals
    0x3f808000, 0x3f818000, 0x3f80ffff, 0xbf808001,              // bf16 ties to even, and just past
    0x477fe000, 0x477fefff, 0x477ff000, 0xc77ff000, 0x7f7fffff,  // 65504, under and at 65520, FLT_MAX
    0x38800000, 0x387fffff, 0x33800000, 0x33000000, 0x33000001, 0x33c00000, 0xb3400000,  // f16 subnormal edges
};

template <class T>
std::vector<T> slice(const std::vector<T>& v, size_t off) {
  return {v.begin() + long(off), v.end()};
}

template <class Out, class In>
void expect_cast_matches(DType to, DType from, const std::vector<In>& in) {
  for (size_t off : {size_t{0}, size_t{1}}) {
    CAPTURE(off);
    const size_t n = in.size() - off;
    DeviceBuffer<In> din(in);
    DeviceBuffer<Out> dout(n);
    dout.poison();
    cuda::cast(dout, to, din + off, from, n, nullptr);
    std::vector<Out> ref(n);
    cpu::cast(ref.data(), to, in.data() + off, from, n);
    const auto got = dout.download();
    size_t wrong = 0, first = n;
    for (size_t i = 0; i < n; ++i)
      if (got[i] != ref[i]) {
        ++wrong;
        if (first == n) first = i;
      }
    INFO(dtype_name(from) << " -> " << dtype_name(to) << ": " << wrong << " elements differ, the first at " << first);
    CHECK(wrong == 0);
  }
}

}  // namespace

TEST_CASE("cast from f32 rounds as the CPU does, bit for bit") {
  auto bits = random_ints(size_t{1} << 20, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  std::vector<uint32_t> in(bits.begin(), bits.end());
  in.insert(in.end(), std::begin(kEdges), std::end(kEdges));
  for (uint32_t e = 0; e < 256; ++e) in.push_back(e << 23 | 0x12345u);  // every exponent
  expect_cast_matches<uint16_t>(DType::bf16, DType::f32, in);
  expect_cast_matches<uint16_t>(DType::f16, DType::f32, in);
}

TEST_CASE("cast to f32 matches the CPU on every 16-bit pattern") {
  std::vector<uint16_t> in(65536 + 3);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint16_t(i);
  expect_cast_matches<uint32_t>(DType::f32, DType::bf16, in);
  expect_cast_matches<uint32_t>(DType::f32, DType::f16, in);
}

TEST_CASE("cast to the same dtype copies") {
  std::vector<uint16_t> h(1001);
  for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(i * 977);
  expect_cast_matches<uint16_t>(DType::bf16, DType::bf16, h);
  expect_cast_matches<uint16_t>(DType::f16, DType::f16, h);
  std::vector<uint32_t> f(std::begin(kEdges), std::end(kEdges));
  expect_cast_matches<uint32_t>(DType::f32, DType::f32, f);
}

TEST_CASE("cast refuses what cpu::cast refuses") {
  DeviceBuffer<uint32_t> a(4), b(4);
  for (auto [to, from] :
       {std::pair{DType::f16, DType::bf16}, std::pair{DType::bf16, DType::f16}, std::pair{DType::f32, DType::i32},
        std::pair{DType::i32, DType::i32}, std::pair{DType::u16, DType::f32}}) {
    CAPTURE(dtype_name(to));
    CAPTURE(dtype_name(from));
    uint32_t host[4] = {};
    CHECK_THROWS_AS(cpu::cast(host, to, host, from, 1), std::invalid_argument);
    CHECK_THROWS_AS(cuda::cast(a, to, b, from, 4, nullptr), std::invalid_argument);
  }
}

}  // namespace zt::test
