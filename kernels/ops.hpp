// Differentiable ops over Tensors: each runs its forward kernel, and when the tape records, saves
// what its backward needs in a closure. Only these few primitives have backward code; models are
// built from them. Shapes use the legend of kernels/cpu/kernels.hpp.
#pragma once

#include "tensor/tape.hpp"
#include "tensor/tensor.hpp"

namespace zt::ops {

// tokens (B,T) i32, wte (Vp,C), wpe (maxT,C) -> (B,T,C)
Tensor embedding(Tape& tape, const Tensor& tokens, const Tensor& wte, const Tensor& wpe);
// x (...,C), weight (C), bias (C) -> same shape as x
Tensor layernorm(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias);
// x (...,C), weight (OC,C), bias (OC) or undefined -> (...,OC)
Tensor linear(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias);
// qkv (B,T,3C) -> (B,T,C), causal
Tensor attention(Tape& tape, const Tensor& qkv, int n_head);
Tensor gelu(Tape& tape, const Tensor& x);
Tensor add(Tape& tape, const Tensor& a, const Tensor& b);
// logits (B,T,Vp), targets (B,T) i32 -> scalar mean loss over targets != ignore_index, classes
// [0,V). The backward writes d(logits) over the logits' own storage. [Note: fused cross-entropy]
Tensor cross_entropy(Tape& tape, const Tensor& logits, const Tensor& targets, int V, int ignore_index = -1);

}  // namespace zt::ops
