// CPU kernels: forward/backward pairs over raw pointers, in llm.c's style. Legend: B batch,
// T sequence, C channels, NH heads, hs = C/NH head size, N = B*T rows, OC output channels,
// V vocabulary, Vp padded vocabulary. All f32 unless said; every backward ACCUMULATES (+=) into
// its gradient outputs, so gradients of shared inputs and of micro-batches add up. A null
// gradient pointer means "not needed" and is skipped.
// Threads: OpenMP's, for the kernels, Eigen's products and the GEMMs (gemm.hpp) alike;
// set_num_threads sets the count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_options.hpp"
#include "tensor/dtype.hpp"

namespace zt::cpu {

void set_num_threads(int n);  // n <= 0: all cores
int num_threads();

// out (B,T,C) = wte[inp[b,t] - row0] + wpe[t]; wte holds the table's rows [row0, row0+rows), and
// tokens outside them take zeros (the tied embedding's row ranges, models/gpt2.hpp); either table
// may be null. The backward accumulates into dwte's rows and dwpe (either may be null).
void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C,
                     int row0, int rows);
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C, int row0,
                      int rows);

// Per row of inp (N,C): out = (x - mean) * rstd * weight + bias; mean, rstd (N) saved for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C);

// RMSNorm per row of inp (N,C): out = x * rstd * (weight + offset), rstd = 1/sqrt(mean(x^2) + eps),
// saved (N) for backward; offset 0 is Llama's weight, 1 Gemma's (1 + weight). Statistics in f32,
// as transformers' LlamaRMSNorm and Gemma3RMSNorm compute them. dweight does not depend on offset.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                     float offset);
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C, float offset);

// SwiGLU: each row of inp (N,2F) holds [gate | up] (the gate and up projections as one GEMM), and
// out (N,F) = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
void swiglu_forward(float* out, const float* inp, int N, int F);
void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F);
// GeGLU (Gemma's MLP): the same with out (N,F) = gelu(gate) * up, gelu's tanh approximation (gelu_forward).
void geglu_forward(float* out, const float* inp, int N, int F);
void geglu_backward(float* dinp, const float* inp, const float* dout, int N, int F);

// Rotary position embedding, Hugging Face's rotate-half convention, on the q and k heads of
// qkv (B,T,(NH+2*NKV)*hs): NH query heads, then NKV key heads, then NKV value heads, hs wide each.
// At position t, for i < hs/2, angle = t * inv_freq[i] (f32 product, as transformers computes
// it) and (x[i], x[i+hs/2]) -> (x[i] cos - x[i+hs/2] sin, x[i+hs/2] cos + x[i] sin); the value
// heads pass through. The backward applies the inverse rotation (and passes dv through).
void rope_forward(float* out, const float* inp, const float* inv_freq, int B, int T, int NH, int NKV, int hs);
void rope_backward(float* dinp, const float* dout, const float* inv_freq, int B, int T, int NH, int NKV, int hs);

// out (N,OC) = inp (N,C) @ weight(OC,C)^T + bias (OC); bias may be null.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC);
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);

// Causal self-attention with grouped-query heads: qkv (B,T,(NH+2*NKV)*hs) holds per position the
// NH query heads, then the NKV key heads, then the NKV value heads, hs wide each (GPT-2: NKV = NH);
// query head h attends with key/value head h / (NH/NKV). out (B,T,NH*hs); att (B,NH,T,T) keeps the
// softmax probabilities for backward (zero where a query does not see the key). dk and dv sum over
// each group's heads. `opt`: the scores' scale (default 1/sqrt(hs)) and a sliding window
// (kernels/attention_options.hpp).
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int NH, int NKV, int hs,
                       const AttentionOptions& opt);
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int NH,
                        int NKV, int hs, const AttentionOptions& opt);

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_forward(float* out, const float* inp, size_t n);
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n);

void residual_forward(float* out, const float* a, const float* b, size_t n);
void residual_backward(float* da, float* db, const float* dout, size_t n);

// A low-rank update into some columns of a projection's output (LoRA's term for one weight of a
// fused qkv): out (N,OC) = y + scale * d in columns [c0, c0+n), d (N,n); out may be y. The
// backward accumulates dy += dout and dd += scale * dout's columns [c0, c0+n); null ones skipped.
void add_columns_forward(float* out, const float* y, const float* d, int N, int OC, int c0, int n, float scale);
// Inverted dropout over n elements with the mask of [Note: dropout masks] (kernels/backend.hpp):
// out = keep ? x * scale : 0; the backward accumulates dx += keep ? dout * scale : 0.
void dropout_forward(float* out, const float* x, size_t n, uint64_t seed, uint32_t threshold, float scale);
void dropout_backward(float* dx, const float* dout, size_t n, uint64_t seed, uint32_t threshold, float scale);
void add_columns_backward(float* dy, float* dd, const float* dout, int N, int OC, int c0, int n, float scale);

// Fused softmax cross-entropy over a padded vocabulary. The logits (N,Vp) come as K column ranges
// of width Vp/K, parts[k] (N,Vp/K) each (K = 1: one row-major array); classes are [0,V) and the
// padded columns [V,Vp) are ignored; rows whose target equals ignore_index contribute nothing.
// Writes each row's loss (0 for ignored rows) and logsumexp; returns the number of counted rows.
int crossentropy_forward(float* losses, float* lse, const float* const* parts, int K, const int32_t* targets, int N,
                         int V, int Vp, int ignore_index);
// d(logits) = scale * (softmax(logits) - onehot(target)) on counted rows, 0 elsewhere (including the
// padded columns), written over the logits themselves (the fused op's one (N,Vp) buffer).
void crossentropy_backward(float* const* parts, int K, const float* lse, const int32_t* targets, float scale, int N,
                           int V, int Vp, int ignore_index);

// AdamW with decoupled weight decay, torch.optim.AdamW's update; t is the 1-based step. grads are
// multiplied by grad_scale first (clipping, loss-scale removal).
void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int t, float grad_scale);

// Sum of squares in double (for the global gradient norm across shards).
double sum_squares(const float* x, size_t n);

// out = in converted from one of f32, bf16, f16 to another (rounding to nearest even); the same
// dtype is a copy. Throws std::invalid_argument for other dtypes.
void cast(void* out, DType to, const void* in, DType from, size_t n);
// Whether any of x[0..n) is inf or NaN (fp16 overflow checks).
bool any_nonfinite(const float* x, size_t n);

void f32_to_bf16(uint16_t* out, const float* in, size_t n);
void bf16_to_f32(float* out, const uint16_t* in, size_t n);
void f32_to_f16(uint16_t* out, const float* in, size_t n);
void f16_to_f32(float* out, const uint16_t* in, size_t n);

}  // namespace zt::cpu
