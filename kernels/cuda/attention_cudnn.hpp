// Causal attention through cuDNN's fused scaled-dot-product attention (its graph API, reached
// through the cuDNN frontend's headers), the alternative to our own kernels that
// `train.attention: "cudnn"` selects. Same layout and meaning as cuda::attention_forward/backward
// (kernels/cuda/kernels.hpp): qkv (B,T,(NH+2*NKV)*hs) with grouped-query heads, out (B,T,C), and
// lse (B,NH,T) f32, which is cuDNN's softmax statistics (each row's max plus log of its sum of
// exponentials, in natural-log units): the two implementations' forward and backward can be
// mixed. bf16 only (cuDNN's fused attention has no f32 path). The options' scale is cuDNN's
// attn_scale and their sliding window its diagonal band's left bound, which keeps key s for query
// t where s + window > t: the rule of [Note: sliding window] (kernels/attention_options.hpp).
// Graphs are built on first use of a shape and options and cached per device, like cuBLASLt's
// plans.
//
// A build without cuDNN or its frontend has the twin in attention_cudnn_absent.cpp: available()
// is false and both calls throw std::invalid_argument saying so.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

#include "kernels/cuda/kernels.hpp"

namespace zt::cuda::cudnn {

// Device memory of at least the given bytes for cuDNN's workspace, valid for work queued on the
// op's stream (the caller's caching allocator: stream-ordered reuse).
using Workspace = std::function<void*(size_t bytes)>;

// Whether this build reaches cuDNN's fused attention.
bool available();

// out, lse = causal attention of qkv. Throws std::invalid_argument for sizes cuDNN has no engine
// for (its reason quoted), CudaError for a failed cuDNN call.
void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int NKV,
                       const AttentionOptions& opt, const Workspace& workspace, cudaStream_t s);

// grad (B,T,(NH+2*NKV)*hs) = d/dqkv, OVERWRITTEN (cuDNN's dQ, dK and dV are outputs, not
// accumulators; the backend adds them onto the gradient). A kv head's gradient sums its group's
// query heads. cuDNN's deterministic algorithm: the same bits on every run.
void attention_backward(bf16* grad, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B, int T,
                        int C, int NH, int NKV, const AttentionOptions& opt, const Workspace& workspace,
                        cudaStream_t s);

}  // namespace zt::cuda::cudnn
