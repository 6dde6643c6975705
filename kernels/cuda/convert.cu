// Casts between f32, bf16 and f16: the twin of cpu::cast, bit for bit. The conversions are the
// integer ones of tensor/dtype.hpp rather than the hardware's cvt instructions, which agree on
// every number but not on NaN (cvt returns one canonical NaN; the host keeps the sign and the
// payload's top bits), and the checkpoint and export paths compare bytes.
#include <stdexcept>
#include <string>

#include "kernels/cuda/vec.cuh"

namespace zt::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr int kW = 4;  // elements per access: 16 bytes of f32, 8 of a 16-bit type

// zt::f32_to_bf16, f32_to_f16, f16_to_f32 and bf16_to_f32 (tensor/dtype.*), on the device.
struct ToBf16 {
  __device__ uint16_t operator()(float f) const {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
};
struct ToF16 {
  __device__ uint16_t operator()(float f) const {
    const uint32_t u = __float_as_uint(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
    if (absu >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (absu < 0x38800000u) {
      // Subnormal half (or zero): adding 0.5 makes the float add's round-to-nearest-even do it.
      const float a = __fadd_rn(__uint_as_float(absu), 0.5f);
      return uint16_t(sign | (__float_as_uint(a) - 0x3f000000u));
    }
    uint32_t v = absu - 0x38000000u;  // rebias exponent 127 -> 15
    v += 0xfffu + ((v >> 13) & 1u);
    return uint16_t(sign | (v >> 13));
  }
};
struct FromBf16 {
  __device__ float operator()(uint16_t h) const { return __uint_as_float(uint32_t(h) << 16); }
};
struct FromF16 {
  __device__ float operator()(uint16_t h) const {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0) return __uint_as_float(sign | __float_as_uint(__fmul_rn(float(man), 5.9604644775390625e-8f)));
    if (exp == 31) return __uint_as_float(sign | 0x7f800000u | (man << 13));
    return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
  }
};

template <bool Vector, class Out, class In, class Op>
__global__ void __launch_bounds__(kThreads) convert_kernel(Out* out, const In* in, size_t n, Op op) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t first = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if constexpr (Vector) {
    const size_t packs = n / kW;
    for (size_t q = first; q < packs; q += stride) {
      const Vec<kW, In> a = reinterpret_cast<const Vec<kW, In>*>(in)[q];
      Vec<kW, Out> b;
#pragma unroll
      for (int j = 0; j < kW; ++j) b.v[j] = op(a.v[j]);
      reinterpret_cast<Vec<kW, Out>*>(out)[q] = b;
    }
    first += packs * kW;
  }
  for (size_t i = first; i < n; i += stride) out[i] = op(in[i]);
}

template <class Out, class In, class Op>
void convert(void* out, const void* in, size_t n, Op op, cudaStream_t s) {
  auto* o = static_cast<Out*>(out);
  const auto* i = static_cast<const In*>(in);
  if (aligned_to(o, kW * sizeof(Out)) && aligned_to(i, kW * sizeof(In)))
    convert_kernel<true><<<blocks_for(n / kW + 1, kThreads), kThreads, 0, s>>>(o, i, n, op);
  else
    convert_kernel<false><<<blocks_for(n, kThreads), kThreads, 0, s>>>(o, i, n, op);
  check_launch("cast");
}

bool floating(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

}  // namespace

void cast(void* out, DType to, const void* in, DType from, size_t n, cudaStream_t s) {
  if (to == from && floating(to)) {
    if (n) check(cudaMemcpyAsync(out, in, n * dtype_size(to), cudaMemcpyDeviceToDevice, s), "cast (copy)");
    return;
  }
  const bool wide_in = from == DType::f32, wide_out = to == DType::f32;
  if (!(wide_in != wide_out && floating(to) && floating(from)))  // f32 <-> a 16-bit type, as cpu::cast
    throw std::invalid_argument("cast: no conversion from " + std::string(dtype_name(from)) + " to " +
                                std::string(dtype_name(to)));
  if (n == 0) return;
  if (from == DType::f32 && to == DType::bf16) return convert<uint16_t, float>(out, in, n, ToBf16{}, s);
  if (from == DType::f32) return convert<uint16_t, float>(out, in, n, ToF16{}, s);
  if (from == DType::bf16) return convert<float, uint16_t>(out, in, n, FromBf16{}, s);
  return convert<float, uint16_t>(out, in, n, FromF16{}, s);
}

}  // namespace zt::cuda
