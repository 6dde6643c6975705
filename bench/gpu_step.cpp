// A GPT-2 training step on one GPU composed of the CUDA kernels (kernels/cuda/kernels.hpp), in
// llm.c's train_gpt2.cu structure: one flat bf16 parameter buffer with a view per tensor (llm.c's
// order: wte, wpe, then each kind for all layers, lnfw, lnfb), a flat bf16 gradient buffer of the
// same layout, f32 master weights and AdamW moments over the whole flat buffer, and every
// activation allocated once before the first step. A step: forward, cross-entropy, backward in
// reverse, AdamW writing the bf16 parameters in the same pass. The wte is tied to the logits.
//
// On a fixed batch of random tokens (B=16, T=1024) it prints the loss of 10 steps (it must fall
// and never be NaN), then times 20 more with CUDA events: ms/step, tokens/s and MFU by llm.c's
// formula, FLOPs per token = 6 N + 6 L C T (N the parameter count, padded vocabulary included),
// against the bf16 GEMM ceiling measured in the same process. Shapes 124M and 350M. Exits 77
// without a device. Driver: bench/gpu_check.sh.
//
// Legend: B batch, T sequence, C channels, NH heads, L layers, N = B*T rows, Vp padded vocabulary.
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "bench/gpu_common.hpp"

namespace {

using namespace zt::bench;
namespace zc = zt::cuda;

constexpr int B = 16, T = 1024, V = 50257, Vp = 50304;
constexpr size_t N = static_cast<size_t>(B) * T;

struct Shape {
  const char* name;
  int L, C, NH;
};

// Parameter tensors in llm.c's order.
enum P { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, LNFW, LNFB, NP };

std::array<size_t, NP> param_sizes(const Shape& d) {
  const size_t C = d.C, L = d.L;
  return {Vp * C, T * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
          L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
}

// Device memory for one model's run: one cudaMalloc, handed out in 256-byte aligned pieces.
struct Arena {
  char* base = nullptr;
  size_t used = 0, cap = 0;
  template <class T_>
  T_* take(size_t n) {
    T_* p = reinterpret_cast<T_*>(base + used);
    used += (n * sizeof(T_) + 255) / 256 * 256;
    if (used > cap) throw std::runtime_error("arena too small");
    return p;
  }
};

// Views of one flat buffer (parameters or gradients): tensor k of layer l.
struct Views {
  std::array<bf16*, NP> t{};
  std::array<size_t, NP> per_layer{};
  bf16* at(P k, int l = 0) const { return t[k] + per_layer[k] * l; }
};

Views views(bf16* flat, const Shape& d) {
  Views v;
  const auto sizes = param_sizes(d);
  size_t off = 0;
  for (int k = 0; k < NP; ++k) {
    v.t[k] = flat + off;  // every size is a multiple of 8 elements (C is): 16-byte aligned
    off += sizes[k];
    v.per_layer[k] = (k == WTE || k == WPE || k == LNFW || k == LNFB) ? 0 : sizes[k] / d.L;
  }
  return v;
}

struct LayerActs {
  bf16 *ln1, *qkv, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
  float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
};

struct Model {
  Shape d;
  size_t n_params = 0;
  Views p, g;
  float *master, *m, *v;
  bf16 *params, *grads;
  std::vector<LayerActs> a;
  bf16 *encoded, *attproj, *fcproj, *lnf, *logits;
  float *lnf_mean, *lnf_rstd, *losses, *ce_lse;
  int32_t *tokens, *targets;
  // backward scratch
  bf16 *dres, *dA, *dqkv, *dfch;
  float *attn_scratch, *ln_scratch;
  void* enc_scratch;
  size_t enc_scratch_bytes;
};

void init_params(Model& md, cudaStream_t s) {
  const auto sizes = param_sizes(md.d);
  float* w = md.master;
  for (int k = 0; k < NP; ++k) {
    const bool ln_weight = k == LN1W || k == LN2W || k == LNFW;
    const bool bias = k == LN1B || k == LN2B || k == LNFB || k == QKVB || k == ATTPROJB || k == FCB || k == FCPROJB;
    if (ln_weight) fill_random(w, sizes[k], 0.9f, 1.1f, true);
    else if (bias) fill_random(w, sizes[k], 1e-4f, 1e-3f);
    else fill_random(w, sizes[k], 1e-3f, 0.04f);  // about GPT-2's std 0.02
    w += sizes[k];
  }
  check(cudaMemsetAsync(md.m, 0, md.n_params * sizeof(float), s), "cudaMemsetAsync");
  check(cudaMemsetAsync(md.v, 0, md.n_params * sizeof(float), s), "cudaMemsetAsync");
  zc::cast(md.params, zt::DType::bf16, md.master, zt::DType::f32, md.n_params, s);
}

Model build(const Shape& d, Arena& ar, cudaStream_t s) {
  Model md{};
  md.d = d;
  for (size_t n : param_sizes(d)) md.n_params += n;
  const size_t C = d.C, P_ = md.n_params;
  md.params = ar.take<bf16>(P_);
  md.grads = ar.take<bf16>(P_);
  md.master = ar.take<float>(P_);
  md.m = ar.take<float>(P_);
  md.v = ar.take<float>(P_);
  md.p = views(md.params, d);
  md.g = views(md.grads, d);
  const size_t rows_h = N * d.NH;
  md.a.resize(d.L);
  for (auto& a : md.a) {
    a = {ar.take<bf16>(N * C), ar.take<bf16>(3 * N * C), ar.take<bf16>(N * C), ar.take<bf16>(N * C),
         ar.take<bf16>(N * C), ar.take<bf16>(4 * N * C), ar.take<bf16>(4 * N * C), ar.take<bf16>(N * C),
         ar.take<float>(N), ar.take<float>(N), ar.take<float>(rows_h), ar.take<float>(N), ar.take<float>(N)};
  }
  md.encoded = ar.take<bf16>(N * C);
  md.attproj = ar.take<bf16>(N * C);
  md.fcproj = ar.take<bf16>(N * C);
  md.lnf = ar.take<bf16>(N * C);
  md.logits = ar.take<bf16>(N * Vp);
  md.lnf_mean = ar.take<float>(N);
  md.lnf_rstd = ar.take<float>(N);
  md.losses = ar.take<float>(N);
  md.ce_lse = ar.take<float>(N);
  md.tokens = ar.take<int32_t>(N + 1);
  md.targets = md.tokens + 1;  // the next token
  md.dres = ar.take<bf16>(N * C);
  md.dA = ar.take<bf16>(N * C);
  md.dqkv = ar.take<bf16>(3 * N * C);
  md.dfch = ar.take<bf16>(4 * N * C);
  md.attn_scratch = ar.take<float>(rows_h);
  md.ln_scratch = ar.take<float>(zc::layernorm_backward_scratch_floats(N, d.C));
  md.enc_scratch_bytes = zc::encoder_backward_scratch_bytes(B, T, Vp);
  md.enc_scratch = ar.take<char>(md.enc_scratch_bytes);
  fill_tokens(md.tokens, N + 1, V);
  init_params(md, s);
  return md;
}

size_t arena_bytes(const Shape& d) {
  size_t P_ = 0;
  for (size_t n : param_sizes(d)) P_ += n;
  const size_t C = d.C;
  const size_t per_layer = 16 * N * C * 2 + 4 * N * 4 + N * d.NH * 4;
  const size_t rest = 4 * N * C * 2 + N * Vp * 2 + 4 * N * 4 + 9 * N * C * 2 + N * d.NH * 4 +
                      zc::layernorm_backward_scratch_floats(N, d.C) * 4 + zc::encoder_backward_scratch_bytes(B, T, Vp);
  return P_ * 16 + d.L * per_layer + rest + 64 * 256 * (d.L + 4) + (size_t{64} << 20);
}

void forward(Model& md, cudaStream_t s) {
  const Shape& d = md.d;
  const int C = d.C;
  const Views& p = md.p;
  zc::encoder_forward(md.encoded, md.tokens, p.at(WTE), p.at(WPE), B, T, C, 0, Vp, s);
  zc::layernorm_forward(md.a[0].ln1, md.a[0].ln1_mean, md.a[0].ln1_rstd, md.encoded, p.at(LN1W), p.at(LN1B), N, C, s);
  for (int l = 0; l < d.L; ++l) {
    LayerActs& a = md.a[l];
    const bf16* res = l == 0 ? md.encoded : md.a[l - 1].res3;
    zc::matmul_forward(a.qkv, a.ln1, p.at(QKVW, l), p.at(QKVB, l), N, C, 3 * C, s);
    zc::attention_forward(a.atty, a.lse, a.qkv, B, T, C, d.NH, s);
    zc::matmul_forward(md.attproj, a.atty, p.at(ATTPROJW, l), p.at(ATTPROJB, l), N, C, C, s);
    zc::fused_residual_layernorm_forward(a.res2, a.ln2, a.ln2_mean, a.ln2_rstd, res, md.attproj, p.at(LN2W, l),
                                         p.at(LN2B, l), N, C, s);
    zc::matmul_forward(a.fch_gelu, a.ln2, p.at(FCW, l), p.at(FCB, l), N, C, 4 * C, s, a.fch);
    zc::matmul_forward(md.fcproj, a.fch_gelu, p.at(FCPROJW, l), p.at(FCPROJB, l), N, 4 * C, C, s);
    // The residual add fused into the next layernorm: the next block's first, or the final one.
    if (l + 1 < d.L) {
      LayerActs& n = md.a[l + 1];
      zc::fused_residual_layernorm_forward(a.res3, n.ln1, n.ln1_mean, n.ln1_rstd, a.res2, md.fcproj, p.at(LN1W, l + 1),
                                           p.at(LN1B, l + 1), N, C, s);
    } else {
      zc::fused_residual_layernorm_forward(a.res3, md.lnf, md.lnf_mean, md.lnf_rstd, a.res2, md.fcproj, p.at(LNFW),
                                           p.at(LNFB), N, C, s);
    }
  }
  zc::matmul_forward(md.logits, md.lnf, p.at(WTE), static_cast<const bf16*>(nullptr), N, C, Vp, s);
  zc::crossentropy_forward(md.losses, md.ce_lse, md.logits, md.targets, N, V, Vp, -1, s);
}

// Backward ops accumulate (+=), so each activation gradient is zeroed before its first use.
void zero(bf16* x, size_t n, cudaStream_t s) { check(cudaMemsetAsync(x, 0, n * sizeof(bf16), s), "cudaMemsetAsync"); }

void backward(Model& md, cudaStream_t s) {
  const Shape& d = md.d;
  const int C = d.C;
  const size_t nc = N * C;
  const Views &p = md.p, &g = md.g;
  zero(md.grads, md.n_params, s);
  zc::crossentropy_backward(md.logits, md.ce_lse, md.targets, 1.0f / N, N, V, Vp, -1, s);  // dlogits in place
  zero(md.dA, nc, s);
  zc::matmul_backward(md.dA, g.at(WTE), static_cast<bf16*>(nullptr), md.logits, md.lnf, p.at(WTE), N, C, Vp, s);
  zero(md.dres, nc, s);
  zc::layernorm_backward(md.dres, g.at(LNFW), g.at(LNFB), md.dA, md.a[d.L - 1].res3, p.at(LNFW), md.lnf_mean,
                         md.lnf_rstd, N, C, md.ln_scratch, s);
  // dres is d(res3) = d(res2) through the skip = d(fcproj); then d(res) likewise.
  for (int l = d.L - 1; l >= 0; --l) {
    LayerActs& a = md.a[l];
    const bf16* res = l == 0 ? md.encoded : md.a[l - 1].res3;
    zero(md.dfch, 4 * nc, s);
    zc::matmul_backward(md.dfch, g.at(FCPROJW, l), g.at(FCPROJB, l), md.dres, a.fch_gelu, p.at(FCPROJW, l), N, 4 * C,
                        C, s);
    zero(md.dA, nc, s);
    zc::matmul_backward(md.dA, g.at(FCW, l), g.at(FCB, l), md.dfch, a.ln2, p.at(FCW, l), N, C, 4 * C, s, a.fch,
                        md.dfch);
    zc::layernorm_backward(md.dres, g.at(LN2W, l), g.at(LN2B, l), md.dA, a.res2, p.at(LN2W, l), a.ln2_mean,
                           a.ln2_rstd, N, C, md.ln_scratch, s);
    zero(md.dA, nc, s);
    zc::matmul_backward(md.dA, g.at(ATTPROJW, l), g.at(ATTPROJB, l), md.dres, a.atty, p.at(ATTPROJW, l), N, C, C, s);
    zero(md.dqkv, 3 * nc, s);
    zc::attention_backward(md.dqkv, md.attn_scratch, md.dA, a.qkv, a.atty, a.lse, B, T, C, d.NH, s);
    zero(md.dA, nc, s);
    zc::matmul_backward(md.dA, g.at(QKVW, l), g.at(QKVB, l), md.dqkv, a.ln1, p.at(QKVW, l), N, C, 3 * C, s);
    zc::layernorm_backward(md.dres, g.at(LN1W, l), g.at(LN1B, l), md.dA, res, p.at(LN1W, l), a.ln1_mean, a.ln1_rstd,
                           N, C, md.ln_scratch, s);
  }
  zc::encoder_backward(g.at(WTE), g.at(WPE), md.dres, md.tokens, B, T, C, 0, Vp, md.enc_scratch,
                       md.enc_scratch_bytes, s);
}

void step(Model& md, int t, cudaStream_t s) {
  forward(md, s);
  backward(md, s);
  // One weight decay for every tensor (llm.c exempts the 1-D ones; the cost is the same).
  zc::adamw_update(md.master, md.params, md.grads, md.m, md.v, md.n_params, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 1.0f,
                   s);
}

// Returns false where a loss is NaN or the loss did not fall.
bool run(const Shape& d, double gemm_tflops, cudaStream_t s) {
  Arena ar;
  ar.cap = arena_bytes(d);
  ar.base = device_alloc<char>(ar.cap);
  Model md = build(d, ar, s);
  void* pinned = nullptr;
  check(cudaMallocHost(&pinned, N * sizeof(float)), "cudaMallocHost");
  float* host_losses = static_cast<float*>(pinned);
  auto mean_loss = [&] {
    check(cudaMemcpyAsync(host_losses, md.losses, N * sizeof(float), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    double sum = 0;
    for (size_t i = 0; i < N; ++i) sum += host_losses[i];
    return sum / N;
  };
  std::printf("# %s: L=%d C=%d NH=%d, %.1fM parameters, %.2f GiB of device memory\n", d.name, d.L, d.C, d.NH,
              md.n_params / 1e6, static_cast<double>(ar.used) / (1 << 30));
  bool ok = true;
  double first = 0, last = 0;
  int t = 1;
  for (; t <= 10; ++t) {  // the loss is the forward's, before this step's update
    step(md, t, s);
    last = mean_loss();
    if (t == 1) first = last;
    std::printf("%s step %2d loss %.4f\n", d.name, t, last);
    if (!std::isfinite(last)) ok = false;
  }
  if (!(last < first)) ok = false;
  const double us = time_us(s, [&](int) { step(md, t++, s); }, 20, 0);
  const double loss_after = mean_loss();
  if (!std::isfinite(loss_after)) ok = false;
  const double step_s = us * 1e-6, tokens = static_cast<double>(N);
  const double flops_per_token = 6.0 * md.n_params + 6.0 * d.L * d.C * T;
  const double tflops = flops_per_token * tokens / step_s * 1e-12;
  std::printf("RESULT %s ms/step %.2f tokens/s %.0f TFLOP/s %.1f MFU %.1f%% loss %.4f -> %.4f (%s)\n", d.name,
              us * 1e-3, tokens / step_s, tflops, 100.0 * tflops / gemm_tflops, first, loss_after,
              ok ? "ok" : "LOSS CHECK FAILED");
  check(cudaFreeHost(pinned), "cudaFreeHost");
  check(cudaFree(ar.base), "cudaFree");
  return ok;
}

}  // namespace

int main() {
  try {
    require_device("gpu_step");
    cudaStream_t s = nullptr;
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    const double gemm = gemm_ceiling_tflops(s);
    std::printf("# GEMM ceiling (bf16 8192^3): %.0f TFLOP/s; B=%d T=%d\n", gemm, B, T);
    bool ok = run({"124M", 12, 768, 12}, gemm, s);
    ok = run({"350M", 24, 1024, 16}, gemm, s) && ok;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_step: %s\n", e.what());
    return 1;
  }
}
