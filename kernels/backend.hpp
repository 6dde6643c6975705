// Backend: one device's kernels behind one interface, chosen at run time by the tensors' device
// (backend(Device)). The ops (kernels/ops.cpp) and the ZeRO engine's flat-buffer work call
// through it, so the model and the engine hold no device forks. The CPU backend runs
// kernels/cpu/ in f32; the CUDA backend runs kernels/cuda/ in f32 or bf16 on the calling
// thread's stream (CudaStreamScope in tensor/cuda_allocator.hpp), allocating its scratch from the
// device's caching allocator. The meta backend computes nothing ([Note: the meta device] in
// tensor/meta_allocator.hpp).
//
// Arguments are tensors of the backend's device, with the shapes of kernels/cpu/kernels.hpp's
// legend, taken from the tensors themselves. An undefined gradient is skipped, and every backward
// ACCUMULATES (+=) into its gradients. Statistics (layernorm's mean and rstd, cross-entropy's
// losses and logsumexp) are f32 whatever the activations' dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_options.hpp"
#include "tensor/tape.hpp"
#include "tensor/tensor.hpp"

namespace zt {

// Which kernels run causal attention: our own (every backend; on cuda kernels/cuda/attention*.cu,
// f32 and bf16) or cuDNN's fused scaled-dot-product attention (cuda, bf16 only:
// kernels/cuda/attention_cudnn.hpp). Chosen by train.attention; the backends refuse, by name,
// what they do not have.
enum class AttentionKernel : uint8_t { own, cudnn };

// AdamW's hyper-parameters for one call; t is the 1-based step, grads are multiplied by
// grad_scale first (clipping, loss-scale removal).
struct AdamWArgs {
  float lr, beta1, beta2, eps, weight_decay;
  int t;
  float grad_scale;
};

// [Note: dropout masks] A dropout mask is never stored: element i of a tensor is kept unless the
// top 32 bits of splitmix64(seed + i * golden ratio) fall below p * 2^32, which the CPU and CUDA
// kernels (and the tests' reference) compute alike, so the backward, a recompute, and every device
// draw the same mask from (seed, i) alone.
struct DropoutMask {
  uint64_t seed = 0;
  uint32_t threshold = 0;  // p * 2^32
  float scale = 1;         // 1 / (1 - p)
};
inline DropoutMask dropout_mask(float p, uint64_t seed) {
  return {seed, static_cast<uint32_t>(static_cast<double>(p) * 4294967296.0), 1.0f / (1.0f - p)};
}
#if defined(__CUDACC__)
__host__ __device__
#endif
inline bool dropout_keeps(const DropoutMask& m, uint64_t i) {
  uint64_t x = m.seed + i * 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<uint32_t>(x >> 32) >= m.threshold;
}

// Each backend is also its device's RangeMarker (tensor/tape.hpp): NVTX ranges on cuda, nothing
// on the cpu.
class Backend : public RangeMarker {
 public:
  virtual Device device() const = 0;
  // Whether activations and parameters of dtype `t` can be computed in (cpu: f32; cuda: f32, bf16).
  virtual bool computes_in(DType t) const = 0;
  // Whether this backend has attention `k` (cpu: our own; cuda: also cuDNN's, in a build with it).
  virtual bool has_attention(AttentionKernel k) const { return k == AttentionKernel::own; }

  // ---- the model's ops ----
  // tokens (B,T) i32 of this device; wte (rows,C) holding the table's rows from row0, wpe (maxT,C);
  // either may be undefined.
  virtual void encoder_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                               int row0) const = 0;
  virtual void encoder_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                                int row0) const = 0;
  virtual void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                                 const Tensor& weight, const Tensor& bias) const = 0;
  virtual void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                  const Tensor& x, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd) const = 0;
  // RMSNorm over the last dimension, out = x * rstd * (weight + offset): offset 0 for the Llama
  // family's, 1 for Gemma's (1 + w); rstd (rows) f32.
  virtual void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& weight, float eps,
                               float offset) const = 0;
  virtual void rmsnorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout, const Tensor& x,
                                const Tensor& weight, const Tensor& rstd, float offset) const = 0;
  // bias may be undefined.
  virtual void matmul_forward(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias) const = 0;
  virtual void matmul_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                               const Tensor& x, const Tensor& weight) const = 0;
  // Causal attention over qkv (B,T,(n_head+2*n_kv_head)*hs), grouped-query when n_kv_head <
  // n_head (kernels/cpu/kernels.hpp has the layout) -> out (B,T,n_head*hs). Returns what the
  // backward needs besides qkv and out: the CPU keeps the (B,NH,T,T) probabilities, the CUDA
  // kernels (ours and cuDNN's alike) each row's (B,NH,T) logsumexp. `opt`: the scores' scale and a
  // sliding window (kernels/attention_options.hpp), which every kernel takes; the backward is
  // given the forward's.
  virtual Tensor attention_forward(const Tensor& out, const Tensor& qkv, int n_head, int n_kv_head,
                                   AttentionKernel kernel, const AttentionOptions& opt) const = 0;
  virtual void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                  const Tensor& saved, int n_head, int n_kv_head, AttentionKernel kernel,
                                  const AttentionOptions& opt) const = 0;
  virtual void gelu_forward(const Tensor& out, const Tensor& x) const = 0;
  virtual void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const = 0;
  // x (...,2F) holds [gate | up] -> out (...,F) = silu(gate) * up.
  virtual void swiglu_forward(const Tensor& out, const Tensor& x) const = 0;
  virtual void swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const = 0;
  // x (...,2F) holds [gate | up] -> out (...,F) = gelu(gate) * up, gelu's tanh approximation (Gemma's).
  virtual void geglu_forward(const Tensor& out, const Tensor& x) const = 0;
  virtual void geglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const = 0;
  // Rotary embedding of qkv (B,T,(n_head+2*n_kv_head)*hs)'s q and k heads; inv_freq (hs/2) f32 on
  // this device. kernels/cpu/kernels.hpp has the convention.
  virtual void rope_forward(const Tensor& out, const Tensor& qkv, const Tensor& inv_freq, int n_head,
                            int n_kv_head) const = 0;
  virtual void rope_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& inv_freq, int n_head,
                             int n_kv_head) const = 0;
  virtual void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b) const = 0;
  virtual void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout) const = 0;
  // out (...,OC) = y plus scale * d (...,n) in columns [col0, col0+n); the backward accumulates
  // into dy and dd (either undefined: skipped). kernels/cpu/kernels.hpp has the convention.
  virtual void add_columns_forward(const Tensor& out, const Tensor& y, const Tensor& d, int64_t col0,
                                   float scale) const = 0;
  virtual void add_columns_backward(const Tensor& dy, const Tensor& dd, const Tensor& dout, int64_t col0,
                                    float scale) const = 0;
  // Inverted dropout: out = x / (1 - p) where element i is kept, 0 where it is dropped
  // (dropout_keeps); the backward accumulates dx += dout the same way. [Note: dropout masks]
  virtual void dropout_forward(const Tensor& out, const Tensor& x, const DropoutMask& mask) const = 0;
  virtual void dropout_backward(const Tensor& dx, const Tensor& dout, const DropoutMask& mask) const = 0;
  // The fused cross-entropy over logits given as column ranges (B,T,Vp/K) each; targets (B,T) i32
  // of this device, already checked against [0,V) by the caller; losses and lse (B*T) f32. The
  // backward writes d(logits) over the parts. CUDA takes one part (K = 1) only.
  virtual void crossentropy_forward(const Tensor& losses, const Tensor& lse, const std::vector<Tensor>& parts,
                                    const Tensor& targets, int V, int ignore_index) const = 0;
  virtual void crossentropy_backward(const std::vector<Tensor>& parts, const Tensor& lse, const Tensor& targets,
                                     float scale, int V, int ignore_index) const = 0;

  // ---- flat buffers (the ZeRO engine's shards) ----
  // out = in converted between f32, bf16 and f16 (same numel; the same dtype copies).
  virtual void cast(const Tensor& out, const Tensor& in) const = 0;
  // dst += src, both f32 of one numel.
  virtual void accumulate(const Tensor& dst, const Tensor& src) const = 0;
  // The sum of the squares of every tensor's elements (f32, or bf16 on cuda), in double, the
  // tensors' sums added in order; waits for the device once.
  virtual double sum_squares(const std::vector<Tensor>& xs) const = 0;
  // Whether any of them holds an inf or a NaN; waits for the device once.
  virtual bool any_nonfinite(const std::vector<Tensor>& xs) const = 0;
  // AdamW over master (f32) with grads, m, v (f32, grads also bf16 on cuda); `low`, when defined,
  // receives the updated master rounded to its dtype in the same pass (cuda; the CPU backend
  // casts after the update, which gives the same bits).
  virtual void adamw_update(const Tensor& master, const Tensor& low, const Tensor& grads, const Tensor& m,
                            const Tensor& v, const AdamWArgs& a) const = 0;
};

// Sizes as the kernels take them: a tensor's rows (every dimension but the last), one dimension,
// its element count.
inline int rows_of(const Tensor& x) { return static_cast<int>(x.numel() / x.dim(-1)); }
inline int dim_of(const Tensor& t, int i) { return static_cast<int>(t.dim(i)); }
inline size_t count_of(const Tensor& t) { return static_cast<size_t>(t.numel()); }

// The backend of device `d`. Throws std::invalid_argument naming the device when this build has
// no kernels for it (built without CUDA).
const Backend& backend(Device d);

// The CUDA backend, or null in a build without CUDA (kernels/cuda/backend.cpp, or
// kernels/cuda_absent.cpp where the toolkit was not found).
const Backend* cuda_backend();
// The meta backend (kernels/meta/backend.cpp), in every build.
const Backend& meta_backend();

}  // namespace zt
