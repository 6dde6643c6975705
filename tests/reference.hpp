// Reference implementations for the CPU kernel tests and the backend-op sweep: straight loops
// over the same raw row-major buffers as kernels/cpu/kernels.hpp (same legend), templated on the
// scalar S (the tests use double), written to be obviously right rather than fast: no Eigen, no
// OpenMP, no fusion. Only forwards: the tests get the gradients from these by central finite
// differences. Null optional outputs (mean, rstd, att, losses, lse) are skipped.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

namespace zt::ref {

// out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
template <class S>
void encoder_forward(S* out, const int32_t* inp, const S* wte, const S* wpe, int B, int T, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const size_t row = static_cast<size_t>(b) * T + t;
      for (int c = 0; c < C; ++c)
        out[row * C + c] = wte[static_cast<size_t>(inp[row]) * C + c] + wpe[static_cast<size_t>(t) * C + c];
    }
}

// Per row: out = (x - mean) / sqrt(var + 1e-5) * weight + bias, var the biased (1/C) variance.
template <class S>
void layernorm_forward(S* out, S* mean, S* rstd, const S* inp, const S* weight, const S* bias, int N, int C) {
  for (int i = 0; i < N; ++i) {
    const S* x = inp + static_cast<size_t>(i) * C;
    S m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    S var = 0;
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= C;
    const S s = 1 / std::sqrt(var + S(1e-5));
    for (int c = 0; c < C; ++c) out[static_cast<size_t>(i) * C + c] = (x[c] - m) * s * weight[c] + bias[c];
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = s;
  }
}

// RMSNorm per row: out = x / sqrt(mean(x^2) + eps) * (offset + weight) (Gemma's offset 1, Llama's
// 0); rstd may be null.
template <class S>
void rmsnorm_forward(S* out, S* rstd, const S* inp, const S* weight, int N, int C, double eps, double offset = 0) {
  for (int i = 0; i < N; ++i) {
    const S* x = inp + static_cast<size_t>(i) * C;
    S ms = 0;
    for (int c = 0; c < C; ++c) ms += x[c] * x[c];
    const S s = 1 / std::sqrt(ms / C + S(eps));
    for (int c = 0; c < C; ++c) out[static_cast<size_t>(i) * C + c] = x[c] * s * (S(offset) + weight[c]);
    if (rstd) rstd[i] = s;
  }
}

// Rows of inp (N,2F) are [gate | up]: out (N,F) = gate * sigmoid(gate) * up.
template <class S>
void swiglu_forward(S* out, const S* inp, int N, int F) {
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < F; ++j) {
      const S g = inp[static_cast<size_t>(i) * 2 * F + j], u = inp[static_cast<size_t>(i) * 2 * F + F + j];
      out[static_cast<size_t>(i) * F + j] = g / (1 + std::exp(-g)) * u;
    }
}

// Rotary embedding, transformers' apply_rotary_pos_emb: q and k heads of qkv (B,T,(NH+2NKV)*hs) as
// q*cos + rotate_half(q)*sin with cos/sin of t * inv_freq (taken in f32, as transformers takes
// them, then widened), v copied.
template <class S>
void rope_forward(S* out, const S* inp, const float* inv_freq, int B, int T, int NH, int NKV, int hs) {
  const int h = hs / 2, width = (NH + 2 * NKV) * hs;
  for (int bt = 0; bt < B * T; ++bt) {
    const S* x = inp + static_cast<size_t>(bt) * width;
    S* y = out + static_cast<size_t>(bt) * width;
    for (int c = 0; c < width; ++c) y[c] = x[c];
    for (int head = 0; head < NH + NKV; ++head)
      for (int i = 0; i < h; ++i) {
        const float angle = static_cast<float>(bt % T) * inv_freq[i];
        const S c = std::cos(S(angle)), sn = std::sin(S(angle));
        const S x1 = x[head * hs + i], x2 = x[head * hs + h + i];
        y[head * hs + i] = x1 * c - x2 * sn;
        y[head * hs + h + i] = x2 * c + x1 * sn;
      }
  }
}

// out[n,o] = sum_c inp[n,c] * weight[o,c] + bias[o]; bias may be null.
template <class S>
void matmul_forward(S* out, const S* inp, const S* weight, const S* bias, int N, int C, int OC) {
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) {
      S acc = bias ? bias[o] : S(0);
      for (int c = 0; c < C; ++c) acc += inp[static_cast<size_t>(n) * C + c] * weight[static_cast<size_t>(o) * C + c];
      out[static_cast<size_t>(n) * OC + o] = acc;
    }
}

// Causal attention with grouped-query heads. Position (b,t) of qkv holds NH query heads, then NKV
// key heads, then NKV value heads, hs wide each; query head h uses kv head h / (NH/NKV).
// att[b,h,t,s] = softmax over lo <= s <= t of (scale q_t . k_s), 0 for other s; out[b,t,h*hs+i] =
// sum_s att[b,h,t,s] v_s[i]. scale 0: 1/sqrt(hs); lo = t - window + 1 with a window (> 0; transformers'
// sliding window: kv_idx > q_idx - sliding_window), else 0.
template <class S>
void attention_forward(S* out, S* att, const S* qkv, int B, int T, int NH, int NKV, int hs, S scale = 0,
                       int window = 0) {
  const int C = NH * hs, width = (NH + 2 * NKV) * hs, group = NH / NKV;
  if (scale == 0) scale = 1 / std::sqrt(S(hs));
  std::vector<S> p(static_cast<size_t>(T));
  // part 0: query head h; 1 and 2: the key and value heads of h's group.
  auto at = [&](int b, int t, int part, int h) {
    const int head = part == 0 ? h : NH + (part - 1) * NKV + h / group;
    return qkv + (static_cast<size_t>(b) * T + t) * width + static_cast<size_t>(head) * hs;
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const S* q = at(b, t, 0, h);
        const int lo = window > 0 ? std::max(0, t - window + 1) : 0;
        S mx = -std::numeric_limits<S>::infinity();
        for (int s = lo; s <= t; ++s) {
          const S* k = at(b, s, 1, h);
          S dot = 0;
          for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
          p[s] = dot * scale;
          mx = std::max(mx, p[s]);
        }
        S sum = 0;
        for (int s = lo; s <= t; ++s) sum += (p[s] = std::exp(p[s] - mx));
        for (int s = lo; s <= t; ++s) p[s] /= sum;
        if (att) {
          S* row = att + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
          for (int s = 0; s < T; ++s) row[s] = s >= lo && s <= t ? p[s] : S(0);
        }
        S* o = out + (static_cast<size_t>(b) * T + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) {
          S acc = 0;
          for (int s = lo; s <= t; ++s) acc += p[s] * at(b, s, 2, h)[i];
          o[i] = acc;
        }
      }
}

template <class S> S gelu(S x) {
  const S k = std::sqrt(2 / std::numbers::pi_v<S>);
  return S(0.5) * x * (1 + std::tanh(k * (x + S(0.044715) * x * x * x)));
}

template <class S> void gelu_forward(S* out, const S* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = gelu(inp[i]);
}

// Rows of inp (N,2F) are [gate | up]: out (N,F) = gelu(gate) * up (tanh approximation).
template <class S>
void geglu_forward(S* out, const S* inp, int N, int F) {
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < F; ++j)
      out[static_cast<size_t>(i) * F + j] =
          gelu(inp[static_cast<size_t>(i) * 2 * F + j]) * inp[static_cast<size_t>(i) * 2 * F + F + j];
}

template <class S> void residual_forward(S* out, const S* a, const S* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// Cross-entropy of logits (N,Vp) over the classes [0,V) (columns [V,Vp) are padding and play no
// part). Rows whose target is ignore_index are skipped. Returns the mean loss over the counted
// rows (0 if none), sets *count to their number, and writes each row's loss (0 if ignored) and
// logsumexp.
template <class S>
S crossentropy_forward(S* losses, S* lse, int* count, const S* logits, const int32_t* targets, int N, int V, int Vp,
                       int ignore_index) {
  S total = 0;
  int counted = 0;
  for (int i = 0; i < N; ++i) {
    const S* row = logits + static_cast<size_t>(i) * Vp;
    S mx = row[0];
    for (int j = 1; j < V; ++j) mx = std::max(mx, row[j]);
    S sum = 0;
    for (int j = 0; j < V; ++j) sum += std::exp(row[j] - mx);
    const S l = mx + std::log(sum);
    if (lse) lse[i] = l;
    const bool ignored = targets[i] == ignore_index;
    if (losses) losses[i] = ignored ? S(0) : l - row[targets[i]];
    if (!ignored) {
      total += l - row[targets[i]];
      ++counted;
    }
  }
  *count = counted;
  return counted ? total / counted : S(0);
}

// One torch.optim.AdamW step (t 1-based), with the gradients multiplied by grad_scale first.
template <class S>
void adamw_step(S* p, const S* grad, S* m, S* v, size_t n, S lr, S beta1, S beta2, S eps, S weight_decay, int t,
                S grad_scale) {
  const S bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
  for (size_t i = 0; i < n; ++i) {
    const S g = grad[i] * grad_scale;
    p[i] *= 1 - lr * weight_decay;
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    p[i] -= (lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
  }
}

template <class S> S sum_squares(const S* x, size_t n) {
  S s = 0;
  for (size_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

// ---- 16-bit floats, from their definitions.

// f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; exponent 0 is subnormal, 31 inf/NaN.
inline double f16_value(uint16_t h) {
  const int e = (h >> 10) & 31, man = h & 1023;
  const double mag = e == 0    ? std::ldexp(man, -24)
                     : e == 31 ? (man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity())
                               : std::ldexp(1024 + man, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// bf16 is the top half of an f32.
inline double bf16_value(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// The pattern nearest to non-NaN x, ties to the even pattern, in a format whose non-negative
// finite patterns 0..max_finite increase with their value and whose +inf is max_finite + 1.
// Magnitudes from max + ulp/2 up (the tie included: max's pattern is odd) round to inf.
template <class Value>
uint16_t round_nearest_even(double x, Value value, uint16_t max_finite) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x), top = value(max_finite), ulp = top - value(static_cast<uint16_t>(max_finite - 1));
  if (a >= top + ulp / 2) return static_cast<uint16_t>(sign | (max_finite + 1));
  unsigned lo = 0, hi = max_finite;  // binary search: the largest pattern whose value is <= a
  while (lo < hi) {
    const unsigned mid = (lo + hi + 1) / 2;
    if (value(static_cast<uint16_t>(mid)) <= a) lo = mid; else hi = mid - 1;
  }
  if (lo < max_finite) {
    const double below = a - value(static_cast<uint16_t>(lo)), above = value(static_cast<uint16_t>(lo + 1)) - a;
    if (above < below || (above == below && (lo & 1))) ++lo;
  }
  return static_cast<uint16_t>(sign | lo);
}

inline uint16_t f16_from(double x) { return round_nearest_even(x, f16_value, 0x7bff); }
inline uint16_t bf16_from(double x) { return round_nearest_even(x, bf16_value, 0x7f7f); }

}  // namespace zt::ref
