// What causal attention may change beyond its heads: the scores' scale and a sliding window.
// The CPU and CUDA kernels, cuDNN's and the Backend all take this one struct; its defaults are
// plain causal attention scaled by 1/sqrt(head size), computed exactly as before the options
// existed, so a caller that sets nothing gets the same bits.
#pragma once

#include <cmath>

namespace zt {

// [Note: sliding window] Query t attends to key s when t - window < s <= t: `window` keys, itself
// included, as transformers' sliding_window_overlay (masking_utils.py: kv_idx > q_idx -
// sliding_window, on top of the causal kv_idx <= q_idx) and cuDNN's diagonal band left bound
// (column + window > row) count it. A window of T or more is plain causal attention.
struct AttentionOptions {
  float scale = 0.0f;  // multiplies q.k before the softmax; 0: 1/sqrt(head size)
  int window = 0;      // the sliding window ([Note: sliding window]); 0: none
};

// The scale the kernels use for head size hs.
inline float attention_scale(const AttentionOptions& o, int hs) {
  return o.scale != 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(hs));
}
// The window the kernels use over T positions: T where there is none or it covers them all.
inline int attention_window(const AttentionOptions& o, int T) { return o.window > 0 && o.window < T ? o.window : T; }

}  // namespace zt
