// The Llama family's ops beside GPT-2's: RMSNorm (with Gemma's 1 + w as an offset), the gated
// MLPs' SwiGLU and GeGLU, and rotary position embeddings (kernels.hpp). Rows run in parallel;
// the parameter gradient sums over rows per thread slot, added in thread order (as layernorm's),
// so results repeat bit for bit for a thread count.
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                     float offset) {
  ConstArrayMap w(weight, C);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    ConstArrayMap x(inp + static_cast<size_t>(i) * C, C);
    const float s = 1.0f / std::sqrt(x.square().mean() + eps);
    ArrayMap(out + static_cast<size_t>(i) * C, C) = x * s * (w + offset);
    rstd[i] = s;
  }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C, float offset) {
  // With n = x * rstd and w' = w + offset: dx = rstd * (w'*dy - n * mean(w'*dy*n)), dweight = sum
  // over rows of dy * n.
  const int nt = omp_get_max_threads();
  std::vector<float> partial(static_cast<size_t>(nt) * C, 0.0f);
  ConstArrayMap w(weight, C);
#pragma omp parallel num_threads(nt)
  {
    ArrayMap dw(partial.data() + static_cast<size_t>(omp_get_thread_num()) * C, C);
    Eigen::ArrayXf norm(C), dnorm(C);  // the row's, reused
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      ConstArrayMap x(inp + static_cast<size_t>(i) * C, C), d(dout + static_cast<size_t>(i) * C, C);
      norm = x * rstd[i];
      dnorm = (w + offset) * d;
      if (dweight) dw += norm * d;
      if (dinp) {
        const float dot = (dnorm * norm).mean();
        ArrayMap(dinp + static_cast<size_t>(i) * C, C) += (dnorm - norm * dot) * rstd[i];
      }
    }
  }
  if (!dweight) return;
  for (int t = 0; t < nt; ++t) ArrayMap(dweight, C) += ConstArrayMap(partial.data() + static_cast<size_t>(t) * C, C);
}

namespace {

// A gated linear unit: each row of inp (N,2F) holds [gate | up], out (N,F) = act(gate) * up.
// forward(g) is act(g); backward(g, u, d, dg, du, scratch) adds the row's gradients into dg and du.
template <class Act>
void glu_forward(float* out, const float* inp, int N, int F, Act act) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    ConstArrayMap g(inp + static_cast<size_t>(i) * 2 * F, F), u(inp + static_cast<size_t>(i) * 2 * F + F, F);
    ArrayMap(out + static_cast<size_t>(i) * F, F) = act(g) * u;
  }
}

template <class Grad>
void glu_backward(float* dinp, const float* inp, const float* dout, int N, int F, Grad grad) {
  if (!dinp) return;
#pragma omp parallel
  {
    Eigen::ArrayXf scratch(F);
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      ConstArrayMap g(inp + static_cast<size_t>(i) * 2 * F, F), u(inp + static_cast<size_t>(i) * 2 * F + F, F);
      ConstArrayMap d(dout + static_cast<size_t>(i) * F, F);
      ArrayMap dg(dinp + static_cast<size_t>(i) * 2 * F, F), du(dinp + static_cast<size_t>(i) * 2 * F + F, F);
      grad(g, u, d, dg, du, scratch);
    }
  }
}

}  // namespace

void swiglu_forward(float* out, const float* inp, int N, int F) {
  glu_forward(out, inp, N, F, [](const ConstArrayMap& g) { return g / (1.0f + (-g).exp()); });
}

void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) {
  glu_backward(dinp, inp, dout, N, F,
               [](const ConstArrayMap& g, const ConstArrayMap& u, const ConstArrayMap& d, ArrayMap& dg, ArrayMap& du,
                  Eigen::ArrayXf& sig) {
                 sig = 1.0f / (1.0f + (-g).exp());
                 dg += d * u * sig * (1.0f + g * (1.0f - sig));  // d silu(g)/dg = sig (1 + g (1 - sig))
                 du += d * g * sig;
               });
}

void geglu_forward(float* out, const float* inp, int N, int F) {
  glu_forward(out, inp, N, F, [](const ConstArrayMap& g) { return gelu(g); });
}

void geglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) {
  glu_backward(dinp, inp, dout, N, F,
               [](const ConstArrayMap& g, const ConstArrayMap& u, const ConstArrayMap& d, ArrayMap& dg, ArrayMap& du,
                  Eigen::ArrayXf& t) {
                 t = gelu_tanh(g);
                 dg += d * u * gelu_grad(g, t);
                 du += d * (0.5f * g * (1.0f + t));  // gelu(g), from its tanh
               });
}

namespace {

// Rotates the q and k heads of each position by its angles; `sign` -1 rotates back (the
// backward), and `accumulate` adds into out instead of writing it (with dv passed through alike).
void rope(float* out, const float* inp, const float* inv_freq, int B, int T, int NH, int NKV, int hs, float sign,
          bool accumulate) {
  if (hs % 2) throw std::invalid_argument("rope: the head size must be even, not " + std::to_string(hs));
  const int h = hs / 2, width = (NH + 2 * NKV) * hs, rotated = (NH + NKV) * hs;
#pragma omp parallel
  {
    Eigen::ArrayXf c(h), s(h);
#pragma omp for schedule(static)
    for (int bt = 0; bt < B * T; ++bt) {
      const int t = bt % T;
      for (int i = 0; i < h; ++i) {
        const float angle = static_cast<float>(t) * inv_freq[i];
        c[i] = std::cos(angle);
        s[i] = sign * std::sin(angle);
      }
      const float* x = inp + static_cast<size_t>(bt) * width;
      float* y = out + static_cast<size_t>(bt) * width;
      for (int o = 0; o < rotated; o += hs) {
        ConstArrayMap x1(x + o, h), x2(x + o + h, h);
        ArrayMap y1(y + o, h), y2(y + o + h, h);
        if (accumulate) {
          y1 += x1 * c - x2 * s;
          y2 += x2 * c + x1 * s;
        } else {
          y1 = x1 * c - x2 * s;
          y2 = x2 * c + x1 * s;
        }
      }
      ConstArrayMap xv(x + rotated, width - rotated);
      ArrayMap yv(y + rotated, width - rotated);
      if (accumulate) yv += xv;
      else yv = xv;
    }
  }
}

}  // namespace

void rope_forward(float* out, const float* inp, const float* inv_freq, int B, int T, int NH, int NKV, int hs) {
  rope(out, inp, inv_freq, B, T, NH, NKV, hs, 1.0f, false);
}

void rope_backward(float* dinp, const float* dout, const float* inv_freq, int B, int T, int NH, int NKV, int hs) {
  if (dinp) rope(dinp, dout, inv_freq, B, T, NH, NKV, hs, -1.0f, true);
}

}  // namespace zt::cpu
