// CUDA kernels: the twins of kernels/cpu/kernels.hpp, with the same arguments plus the stream
// they run on, and the same legend (B batch, T sequence, C channels, NH heads, N = B*T rows, OC
// output channels, V vocabulary, Vp padded vocabulary). All pointers are device memory.
//
// Each op is instantiated for f32 and bf16 storage (T = float or bf16); arithmetic is f32
// throughout, so the f32 instantiation matches the CPU twin to rounding and bf16 differs only
// by the rounding of what it stores. Saved statistics (layernorm's mean/rstd, attention's
// logsumexp, cross-entropy's) stay f32. As on the CPU every backward ACCUMULATES (+=) into its
// gradient outputs and skips a null gradient pointer.
//
// Launches are asynchronous on `stream`; each checks the launch and throws CudaError naming the
// kernel. Nothing synchronises the device. Ops allocate nothing: those that need temporary device
// memory take a `scratch` argument, sized by a function or constant beside them; calls that may
// run at the same time (other streams) need scratch of their own.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/attention_options.hpp"
#include "tensor/cuda_stream.hpp"
#include "tensor/dtype.hpp"

namespace zt::cuda {

using bf16 = __nv_bfloat16;

// CudaError, and check(e, what) that throws it, are tensor/cuda_stream.hpp's.

// Checks the last launch (cudaGetLastError) and names `kernel`.
void check_launch(const char* kernel);

// ---- encoder: out (B,T,C) = wte[inp - row0] + wpe[t] (rows outside [row0, row0+rows) add 0) ----
template <class T>
void encoder_forward(T* out, const int32_t* inp, const T* wte, const T* wpe, int B, int T_, int C, int row0, int rows,
                     cudaStream_t s);
// dwte's rows repeat across positions; to add them in a fixed order without atomics the backward
// sorts the positions by row on the device ([Note: deterministic encoder backward] in
// encoder.cu), in `scratch`: at least encoder_backward_scratch_bytes(B, T_, rows) bytes of device
// memory (any alignment), unused (may be null) when dwte is null. Throws std::invalid_argument if
// it is too small.
size_t encoder_backward_scratch_bytes(int B, int T_, int rows);
template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int32_t* inp, int B, int T_, int C, int row0, int rows,
                      void* scratch, size_t scratch_bytes, cudaStream_t s);

// ---- layernorm over rows of (N,C); mean, rstd (N) f32 ----
template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N, int C,
                       cudaStream_t s);
// dweight and dbias sum over the N rows in per-block partials, added in a fixed order (the
// result repeats bit for bit): `scratch` holds layernorm_backward_scratch_floats(N, C) floats of
// device memory, unused (may be null) when dweight and dbias are both null.
// Both forward and backward take 16-byte packs where C % (16 / sizeof(T)) == 0 and the pointers
// are 16-byte aligned, single elements otherwise.
size_t layernorm_backward_scratch_floats(int N, int C);
template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int N, int C, float* scratch, cudaStream_t s);
// The residual add fused in front of the layernorm (the block's second norm, and the next
// block's first): residual = a + b, out = layernorm(residual).
template <class T>
void fused_residual_layernorm_forward(T* residual, T* out, float* mean, float* rstd, const T* a, const T* b,
                                      const T* weight, const T* bias, int N, int C, cudaStream_t s);

// ---- the Llama family's RMSNorm, SwiGLU and rotary embedding, and Gemma's GeGLU
// (kernels/cpu/kernels.hpp has the math and layouts) ----
// RMSNorm over rows of (N,C): out = x * rstd * (weight + offset), rstd (N) f32 = 1 / sqrt(mean(x^2)
// + eps); offset 0 for Llama, 1 for Gemma.
template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps, float offset,
                     cudaStream_t s);
// dweight sums over the N rows in per-block partials added in a fixed order, as layernorm's (the
// result repeats bit for bit): `scratch` holds rmsnorm_backward_scratch_floats(N, C) floats of
// device memory, unused (may be null) when dweight is null; std::invalid_argument if dweight is
// wanted without it. 16-byte packs where C and the pointers allow, as layernorm's.
size_t rmsnorm_backward_scratch_floats(int N, int C);
template <class T>
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int N,
                      int C, float offset, float* scratch, cudaStream_t s);
// SwiGLU: inp (N,2F) rows [gate | up], out (N,F) = silu(gate) * up; dinp (N,2F) += both halves'
// gradients.
template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F, cudaStream_t s);
template <class T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int N, int F, cudaStream_t s);
// GeGLU: the same with gelu (tanh approximation) for silu.
template <class T>
void geglu_forward(T* out, const T* inp, int N, int F, cudaStream_t s);
template <class T>
void geglu_backward(T* dinp, const T* inp, const T* dout, int N, int F, cudaStream_t s);
// Rotary embedding (rotate-half) of qkv (B,T,(NH+2*NKV)*hs)'s NH query and NKV key heads at each
// position t, angle = t * inv_freq[i] (inv_freq (hs/2) f32, device memory); the NKV value heads
// pass through. The angles are the CPU's f32 products and their sines and cosines the accurate
// sincosf (angles reach thousands of radians). std::invalid_argument if hs is odd or over 12288
// (a position's cosines and sines sit in 48 KiB of shared memory). The forward may run in place
// (out == inp).
template <class T>
void rope_forward(T* out, const T* inp, const float* inv_freq, int B, int T_, int NH, int NKV, int hs, cudaStream_t s);
// dinp += the inverse rotation of dout (dv passed through).
template <class T>
void rope_backward(T* dinp, const T* dout, const float* inv_freq, int B, int T_, int NH, int NKV, int hs,
                   cudaStream_t s);

// ---- matmul (the linear layer) through cuBLASLt, f32 compute (no TF32) ----
// out (N,OC) = inp (N,C) @ weight(OC,C)^T + bias (OC; may be null). With pre_gelu (N,OC) the GELU
// is fused (cuBLASLt's GELU_AUX epilogues): pre_gelu receives the pre-activation and out its
// gelu (tanh approximation).
// Throws std::invalid_argument unless: bf16: C and OC multiples of 8 and every pointer 16-byte
// aligned; with the GELU: OC a multiple of 8 (in f32 too).
// GEMMs of one device share one workspace: ops issued on different streams run one after the
// other ([Note: one workspace, many streams] in kernels/cuda/cublaslt.cpp).
template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, cudaStream_t s,
                    T* pre_gelu = nullptr);
// dinp (N,C) += g @ weight, dweight (OC,C) += g^T @ inp, dbias (OC) += column sums of g (f32,
// deterministic), where g = dout, or with pre_gelu (the forward fused the GELU) g = dout *
// gelu'(pre_gelu), which is written to dpre_gelu (N,OC; required then; it may be dout itself,
// which is then overwritten) and stays there as d(pre-activation). Null gradients are skipped.
template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N, int C,
                     int OC, cudaStream_t s, const T* pre_gelu = nullptr, T* dpre_gelu = nullptr);

// ---- GELU (tanh approximation) and the residual add ----
template <class T>
void gelu_forward(T* out, const T* inp, size_t n, cudaStream_t s);
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t s);
template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n, cudaStream_t s);
template <class T>
void residual_backward(T* da, T* db, const T* dout, size_t n, cudaStream_t s);
// LoRA's low-rank term into columns [c0, c0+n) of (N,OC): twins of kernels/cpu/elementwise.cpp's.
template <class T>
void add_columns_forward(T* out, const T* y, const T* d, int N, int OC, int c0, int n, float scale, cudaStream_t s);
template <class T>
void add_columns_backward(T* dy, T* dd, const T* dout, int N, int OC, int c0, int n, float scale, cudaStream_t s);
// Inverted dropout with the mask of [Note: dropout masks] (kernels/backend.hpp): twins of
// kernels/cpu/elementwise.cpp's.
template <class T>
void dropout_forward(T* out, const T* x, size_t n, uint64_t seed, uint32_t threshold, float scale, cudaStream_t s);
template <class T>
void dropout_backward(T* dx, const T* dout, size_t n, uint64_t seed, uint32_t threshold, float scale, cudaStream_t s);

// ---- causal self-attention, tiled online softmax (flash style), grouped-query heads ----
// NH query heads share NKV key/value heads (NH % NKV == 0; NKV = NH: multi-head), query head h
// reading kv head h / (NH/NKV), as on the CPU: qkv (B,T,(NH+2*NKV)*hs) holds the query heads, then
// the key heads, then the value heads; out (B,T,C) with C = NH*hs; lse (B,NH,T) f32: each row's
// logsumexp of the scaled scores, which the backward uses instead of the (B,NH,T,T) probabilities
// the CPU twin keeps. `opt`: the scores' scale and a sliding window (kernels/attention_options.hpp);
// the key tiles wholly outside a window are skipped. The head size hs = C/NH must be a multiple
// of 8 up to 128 (64 is the fast case), else std::invalid_argument; bf16 pointers must be 16-byte
// aligned (std::invalid_argument otherwise).
template <class T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int T_, int C, int NH, int NKV,
                       const AttentionOptions& opt, cudaStream_t s);
// dqkv (B,T,(NH+2*NKV)*hs) += d/dqkv, from dout, qkv and the forward's out and lse; a kv head's
// gradient is the sum over its query heads, added in head order inside one CTA (no atomics).
// scratch: B*NH*T floats of device memory the op overwrites (rowsum(dout * out) per row).
template <class T>
void attention_backward(T* dqkv, float* scratch, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                        int T_, int C, int NH, int NKV, const AttentionOptions& opt, cudaStream_t s);

// ---- fused softmax cross-entropy over a padded vocabulary (logits (N,Vp), one part) ----
// losses (N), lse (N) f32; returns nothing: the count of rows is counted on the host by the
// caller from the targets. d(logits) is written over the logits (scale * (softmax - onehot)).
// Classes are [0,V); the padded columns [V,Vp) are ignored (the backward writes 0 there), and a
// row whose target is ignore_index has loss 0 and gradient 0. A target outside [0,V) that is not
// ignore_index gives the row a NaN loss (no host synchronisation to throw from) and no onehot.
template <class T>
void crossentropy_forward(float* losses, float* lse, const T* logits, const int32_t* targets, int N, int V, int Vp,
                          int ignore_index, cudaStream_t s);
template <class T>
void crossentropy_backward(T* logits, const float* lse, const int32_t* targets, float scale, int N, int V, int Vp,
                           int ignore_index, cudaStream_t s);

// ---- optimizer over one flat shard ----
// AdamW on the f32 master; when `params` is not null the shard's low-precision copy is written
// in the same pass (T = bf16), so the update reads and writes each element once. grads are T.
template <class T>
void adamw_update(float* master, T* params, const T* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int t, float grad_scale, cudaStream_t s);
// *out (one double, device memory) += sum of x[i]^2, for the global gradient norm. A fixed grid
// writes one partial per block to `scratch` (kSumSquaresScratch doubles of device memory) and
// one block adds them in order: the sum repeats bit for bit for the same n.
inline constexpr size_t kSumSquaresScratch = 512;
template <class T>
void sum_squares(double* out, const T* x, size_t n, double* scratch, cudaStream_t s);
// *flag (one int, device memory) is set to 1 if any of x is inf or NaN; it is never cleared.
template <class T>
void any_nonfinite(int* flag, const T* x, size_t n, cudaStream_t s);
// out = in converted between f32, bf16 and f16 (round to nearest even, NaN stays NaN), bit for bit
// what cpu::cast gives; the same dtype copies. Like cpu::cast, throws std::invalid_argument for
// any other pair (bf16 <-> f16, integer dtypes).
void cast(void* out, DType to, const void* in, DType from, size_t n, cudaStream_t s);

}  // namespace zt::cuda
