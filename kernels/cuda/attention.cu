// Causal self-attention with grouped-query heads, the ops of kernels.hpp: argument checks, the
// choice of path (f32: FMA kernels, attention_fma.cu; bf16: tensor cores, attention_mma_*.cu), and
// the backward's first step D = rowsum(dout * out), which both paths share. Twin of
// kernels/cpu/attention.cpp, except that the (B,NH,T,T) probabilities are never stored: the
// forward saves each row's logsumexp and the backward recomputes them tile by tile. Legend:
// kernels/cuda/attention.cuh.
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr unsigned kRowDotThreads = 256;

// D (B,NH,T)[b,h,t] = sum over the head's hs channels of dout * out at (b, t): one warp per row,
// rows in D's order; a grid-stride loop over rows.
template <class T>
__global__ void row_dot_kernel(float* D, const T* dout, const T* out, int B, int T_, int C, int NH, int hs) {
  const size_t rows = size_t(B) * NH * T_;
  const size_t warps = size_t(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  for (size_t row = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int t = int(row % T_), h = int(row / T_ % NH);
    const size_t b = row / T_ / NH;
    const size_t off = (b * T_ + t) * C + size_t(h) * hs;
    float acc = 0.f;
    for (int i = lane; i < hs; i += 32) acc = fmaf(to_f32(dout[off + i]), to_f32(out[off + i]), acc);
    acc = warp_sum(acc);
    if (lane == 0) D[row] = acc;
  }
}

attn::Dims dims(const char* op, int B, int T_, int C, int NH, int NKV, const AttentionOptions& opt) {
  if (B < 0 || T_ < 0 || C <= 0 || NH <= 0 || C % NH != 0)
    throw std::invalid_argument(std::string(op) + ": channels C = " + std::to_string(C) +
                                " must split evenly into NH = " + std::to_string(NH) + " heads (B = " +
                                std::to_string(B) + ", T = " + std::to_string(T_) + ")");
  if (NKV <= 0 || NH % NKV != 0)
    throw std::invalid_argument(std::string(op) + ": NKV = " + std::to_string(NKV) +
                                " key/value heads must divide NH = " + std::to_string(NH) + " query heads");
  const int hs = C / NH;
  if (hs % 8 != 0 || hs > 128)
    throw std::invalid_argument(std::string(op) + ": head size hs = C/NH = " + std::to_string(hs) +
                                " is not supported (a multiple of 8 up to 128)");
  return {B, T_, C, NH, NKV, hs, attention_scale(opt, hs), attention_window(opt, T_)};
}

// The bf16 kernels copy 16 bytes at a time: every row start is 16-byte aligned once the base is
// (hs, hence C, is a multiple of 8).
void require_aligned(const char* op, const char* name, const void* p) {
  if (!aligned16(p))
    throw std::invalid_argument(std::string(op) + ": " + name + " is not 16-byte aligned (bf16 path)");
}

}  // namespace

template <class T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int T_, int C, int NH, int NKV,
                       const AttentionOptions& opt, cudaStream_t s) {
  const attn::Dims d = dims("attention_forward", B, T_, C, NH, NKV, opt);
  if (B == 0 || T_ == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    attn::forward_fma(out, lse, qkv, d, s);
  } else {
    require_aligned("attention_forward", "qkv", qkv);
    require_aligned("attention_forward", "out", out);
    attn::forward_mma(out, lse, qkv, d, s);
  }
}

template <class T>
void attention_backward(T* dqkv, float* scratch, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                        int T_, int C, int NH, int NKV, const AttentionOptions& opt, cudaStream_t s) {
  const attn::Dims d = dims("attention_backward", B, T_, C, NH, NKV, opt);
  if (dqkv == nullptr || B == 0 || T_ == 0) return;
  if constexpr (std::is_same_v<T, bf16>) {
    require_aligned("attention_backward", "dqkv", dqkv);
    require_aligned("attention_backward", "dout", dout);
    require_aligned("attention_backward", "qkv", qkv);
  }
  const size_t rows = size_t(B) * NH * T_;
  row_dot_kernel<T><<<blocks_for(rows * 32, kRowDotThreads), kRowDotThreads, 0, s>>>(scratch, dout, out, B, T_, C,
                                                                                       NH, d.hs);
  check_launch("attention_backward rowsum(dout * out)");
  const attn::BackwardArgs<T> a{dqkv, dout, qkv, lse, scratch, d.heads(), C, d.scale, d.window};
  if constexpr (std::is_same_v<T, float>) attn::backward_fma(a, d, s);
  else attn::backward_mma(a, d, s);
}

#define ZT_INSTANTIATE(T)                                                                                              \
  template void attention_forward<T>(T*, float*, const T*, int, int, int, int, int, const AttentionOptions&,           \
                                     cudaStream_t);                                                                    \
  template void attention_backward<T>(T*, float*, const T*, const T*, const T*, const float*, int, int, int, int, int, \
                                      const AttentionOptions&, cudaStream_t);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(bf16)
#undef ZT_INSTANTIATE

}  // namespace zt::cuda
