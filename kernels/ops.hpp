// Differentiable ops over Tensors: each runs its forward kernel, and when the tape records, saves
// what its backward needs in a closure. Only these few primitives have backward code; models are
// built from them. Shapes use the legend of kernels/cpu/kernels.hpp.
#pragma once

#include <vector>

#include "kernels/backend.hpp"
#include "tensor/tape.hpp"
#include "tensor/tensor.hpp"

namespace zt::ops {

// tokens (B,T) i32, wte (R,C) holding the table's rows [row0, row0+R), wpe (maxT,C) or undefined
// -> (B,T,C): wte's row for the tokens in its range (zeros for the others) plus wpe's for t.
// `grad_tokens` (B,T), where defined, are the ids the backward adds to instead: an id outside
// every range (INT32_MAX) leaves that position out, as torch's padding_idx leaves its row.
Tensor embedding(Tape& tape, const Tensor& tokens, const Tensor& wte, const Tensor& wpe, int64_t row0 = 0,
                 const Tensor& grad_tokens = Tensor());
// x (...,C), weight (C), bias (C) -> same shape as x
Tensor layernorm(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias);
// x (...,C), weight (C) -> same shape as x: RMSNorm with the model's eps, x * rstd * (weight +
// offset) in f32: offset 0 is the Llama family's, 1 Gemma's (1 + w); the weight's gradient is the
// same either way.
Tensor rmsnorm(Tape& tape, const Tensor& x, const Tensor& weight, float eps, float offset = 0.0f);
// x (...,C), weight (OC,C), bias (OC) or undefined -> (...,OC)
Tensor linear(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias);
// qkv (B,T,(n_head+2*n_kv_head)*hs) -> (B,T,n_head*hs), causal; n_kv_head = n_head is GPT-2's
// (B,T,3C) -> (B,T,C), fewer key/value heads grouped-query attention (kernels/cpu/kernels.hpp);
// through `kernel` (kernels/backend.hpp). `options`: the scores' scale (0: 1/sqrt(hs); Gemma's
// query_pre_attn_scalar^-0.5) and a sliding window (0: none; query t sees keys t-window < s <= t,
// transformers' rule), kernels/attention_options.hpp; std::invalid_argument for a negative one.
Tensor attention(Tape& tape, const Tensor& qkv, int n_head, int n_kv_head,
                 AttentionKernel kernel = AttentionKernel::own, const AttentionOptions& options = {});
Tensor gelu(Tape& tape, const Tensor& x);
// x (...,2F) holding [gate | up] -> (...,F) = silu(gate) * up
Tensor swiglu(Tape& tape, const Tensor& x);
// x (...,2F) holding [gate | up] -> (...,F) = gelu(gate) * up, gelu's tanh approximation (Gemma's
// MLP, PyTorch's gelu(approximate="tanh"))
Tensor geglu(Tape& tape, const Tensor& x);
// x -> s * x, each element's product in f32 rounded once to x's dtype (Gemma's embedding times
// sqrt(hidden_size); transformers first rounds that factor to the activations' dtype, which is the
// caller's to do: bf16_to_f32(f32_to_bf16(s)), tensor/dtype.hpp). std::invalid_argument for an s
// that is not finite.
Tensor scale(Tape& tape, const Tensor& x, float s);
// qkv (B,T,(n_head+2*n_kv_head)*hs) -> the same with its q and k heads rotated by position
// (Hugging Face's rotate-half RoPE); inv_freq (hs/2) f32 on qkv's device.
Tensor rope(Tape& tape, const Tensor& qkv, const Tensor& inv_freq, int n_head, int n_kv_head);
Tensor add(Tape& tape, const Tensor& a, const Tensor& b);
// y (...,OC), d (...,n) -> y with scale * d added into its columns [col0, col0+n): LoRA's term for
// one of the weights a fused projection reads. In place: the result shares y's storage, so y's own
// values are gone (its caller reads only the result; no backward reads them), and where y is an
// op's output without a gradient yet, the result's gradient becomes y's, uncopied.
Tensor add_columns(Tape& tape, const Tensor& y, const Tensor& d, int64_t col0, float scale);
// Views of the last dimension, differentiable, so a model composes the ops it has (Qwen3's
// RMSNorm over each q and k head of the fused qkv) rather than ask for a fused op:
// x (...,C) -> (...,n), its columns [col0, col0+n), copied.
Tensor narrow(Tape& tape, const Tensor& x, int64_t col0, int64_t n);
// parts (...,n_i), alike but for their last dimension -> (...,sum n_i), side by side.
Tensor concat(Tape& tape, const std::vector<Tensor>& parts);
// x -> the same elements as `shape` (numel equal), sharing x's storage: e.g. (B,T,H*hd) as
// (B,T,H,hd), so an op over the last dimension runs per head.
Tensor reshape(Tape& tape, const Tensor& x, const Shape& shape);
// Inverted dropout with probability p and the mask of (seed, element) ([Note: dropout masks] in
// kernels/backend.hpp); x itself when p is 0 or outside training (a NoGrad scope:
// evaluation); a checkpointed unit draws the same mask again in its recompute.
Tensor dropout(Tape& tape, const Tensor& x, float p, uint64_t seed);
// logits (B,T,Vp), targets (B,T) i32 -> scalar mean loss over targets != ignore_index, classes
// [0,V). The backward writes d(logits) over the logits' own storage. [Note: fused cross-entropy]
Tensor cross_entropy(Tape& tape, const Tensor& logits, const Tensor& targets, int V, int ignore_index = -1);
// The same over logits given as K column ranges of equal width, (B,T,Vp/K) each, in order.
Tensor cross_entropy(Tape& tape, const std::vector<Tensor>& logit_parts, const Tensor& targets, int V,
                     int ignore_index = -1);

}  // namespace zt::ops
