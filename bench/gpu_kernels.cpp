// Every CUDA kernel (kernels/cuda/kernels.hpp) timed at GPT-2 124M shapes in bf16, against the
// two ceilings measured first in the same process: a 1 GiB device-to-device copy (GB/s, bytes
// read + written) and cuBLASLt's bf16 8192^3 GEMM (TFLOP/s). Memory-bound ops report achieved
// GB/s over their minimum bytes (each input read once, each output written once; an accumulated
// output read and written); GEMMs and attention report TFLOP/s. Method: bench/gpu_common.hpp
// (warm-up, CUDA events, median of 25, random non-zero data, inputs rotated when they fit in L2).
// Attention also through cuDNN's fused kernel (train.attention "cudnn"), beside ours, at GPT-2's
// heads and at SmolLM2's grouped-query ones. Exits 77 without a device. Driver: bench/gpu_check.sh.
//
// Legend: B batch, T sequence, C channels, NH heads, N = B*T rows, Vp padded vocabulary.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "bench/gpu_common.hpp"
#include "kernels/cuda/attention_cudnn.hpp"

namespace {

using namespace zt::bench;
namespace zc = zt::cuda;

constexpr int B = 16, T = 1024, C = 768, NH = 12, V = 50257, Vp = 50304;
constexpr size_t N = static_cast<size_t>(B) * T;
constexpr size_t kParams = 124475904;  // GPT-2 124M with the padded vocabulary (llm.c's count)
constexpr double kL2Bytes = 50e6;

// Enough buffer sets that one pass over them spills the L2 four times (1 when one set does).
int sets_for(double bytes) { return std::clamp(static_cast<int>(4 * kL2Bytes / bytes) + 1, 1, 8); }

template <class T_>
std::vector<T_*> buffers(int k, size_t n, float lo = 0.1f, float hi = 1.0f, bool positive = false) {
  std::vector<T_*> v(k);
  for (auto& p : v) {
    p = device_alloc<T_>(n);
    fill_random(p, n, lo, hi, positive);
  }
  return v;
}

struct Row {
  std::string name;
  double us;
  double amount;  // bytes, or FLOPs when flops
  bool flops;
};

struct Bench {
  cudaStream_t s;
  std::vector<Row> rows;

  void mem(const std::string& name, double bytes, const std::function<void(int)>& f) {
    rows.push_back({name, time_us(s, f), bytes, false});
  }
  void fl(const std::string& name, double flops, const std::function<void(int)>& f) {
    rows.push_back({name, time_us(s, f), flops, true});
  }
};

void elementwise(Bench& b) {
  const size_t n = N * C, n4 = 4 * n;
  const double e = sizeof(bf16);
  {
    const int k = sets_for(2.0 * n4 * e);
    auto in = buffers<bf16>(k, n4), out = buffers<bf16>(k, n4), d = buffers<bf16>(k, n4);
    b.mem("gelu_forward", 2.0 * n4 * e, [&](int r) { zc::gelu_forward(out[r % k], in[r % k], n4, b.s); });
    b.mem("gelu_backward", 4.0 * n4 * e, [&](int r) { zc::gelu_backward(out[r % k], in[r % k], d[r % k], n4, b.s); });
  }
  const int k = sets_for(3.0 * n * e);
  auto x = buffers<bf16>(k, n), y = buffers<bf16>(k, n), z = buffers<bf16>(k, n);
  b.mem("residual_forward", 3.0 * n * e, [&](int r) { zc::residual_forward(z[r % k], x[r % k], y[r % k], n, b.s); });
  b.mem("residual_backward", 5.0 * n * e,
        [&](int r) { zc::residual_backward(x[r % k], y[r % k], z[r % k], n, b.s); });
}

void encoder_and_norms(Bench& b) {
  const double e = sizeof(bf16), nc = static_cast<double>(N) * C;
  int32_t* tok = device_alloc<int32_t>(N);
  const auto host_tok = fill_tokens(tok, N, V);
  const double distinct = static_cast<double>(std::set<int32_t>(host_tok.begin(), host_tok.end()).size());
  bf16* wte = buffers<bf16>(1, static_cast<size_t>(Vp) * C)[0];
  bf16* wpe = buffers<bf16>(1, static_cast<size_t>(T) * C)[0];
  const int k = sets_for(4.0 * nc * e);
  auto out = buffers<bf16>(k, N * C), a = buffers<bf16>(k, N * C), bb = buffers<bf16>(k, N * C),
       res = buffers<bf16>(k, N * C);
  b.mem("encoder_forward", 2.0 * nc * e + T * C * e + N * 4.0,
        [&](int r) { zc::encoder_forward(out[r % k], tok, wte, wpe, B, T, C, 0, Vp, b.s); });
  const size_t scratch_bytes = zc::encoder_backward_scratch_bytes(B, T, Vp);
  void* scratch = device_alloc<char>(scratch_bytes);
  bf16* dwpe = buffers<bf16>(1, static_cast<size_t>(T) * C)[0];
  b.mem("encoder_backward", nc * e + N * 4.0 + 2.0 * (distinct + T) * C * e, [&](int r) {
    zc::encoder_backward(wte, dwpe, out[r % k], tok, B, T, C, 0, Vp, scratch, scratch_bytes, b.s);
  });

  bf16* w = buffers<bf16>(1, C)[0];
  bf16* bias = buffers<bf16>(1, C)[0];
  auto mean = buffers<float>(k, N), rstd = buffers<float>(k, N, 0.5f, 2.0f, true);
  const double stats = 2.0 * N * sizeof(float);
  b.mem("layernorm_forward", 2.0 * nc * e + stats,
        [&](int r) { zc::layernorm_forward(out[r % k], mean[r % k], rstd[r % k], a[r % k], w, bias, N, C, b.s); });
  b.mem("fused_residual_layernorm", 4.0 * nc * e + stats, [&](int r) {
    zc::fused_residual_layernorm_forward(res[r % k], out[r % k], mean[r % k], rstd[r % k], a[r % k], bb[r % k], w,
                                         bias, N, C, b.s);
  });
  float* ln_scratch = device_alloc<float>(zc::layernorm_backward_scratch_floats(N, C));
  bf16* dw = buffers<bf16>(1, C)[0];
  bf16* db = buffers<bf16>(1, C)[0];
  b.mem("layernorm_backward", 4.0 * nc * e + stats, [&](int r) {
    zc::layernorm_backward(res[r % k], dw, db, bb[r % k], a[r % k], w, mean[r % k], rstd[r % k], N, C, ln_scratch,
                           b.s);
  });
}

void matmuls(Bench& b) {
  struct Shape {
    const char* name;
    int c, oc;
    bool gelu, bias;
  };
  const Shape shapes[] = {{"qkv", C, 3 * C, false, true},      {"attproj", C, C, false, true},
                          {"fc+gelu", C, 4 * C, true, true},   {"fcproj", 4 * C, C, false, true},
                          {"logits", C, Vp, false, false}};
  for (const Shape& sh : shapes) {
    const size_t in_n = N * sh.c, out_n = N * sh.oc, w_n = static_cast<size_t>(sh.oc) * sh.c;
    const int k = sets_for(static_cast<double>(in_n + out_n + w_n) * sizeof(bf16));
    auto inp = buffers<bf16>(k, in_n), out = buffers<bf16>(k, out_n), w = buffers<bf16>(k, w_n);
    auto pre = sh.gelu ? buffers<bf16>(k, out_n) : std::vector<bf16*>(k, nullptr);
    bf16* bias = sh.bias ? buffers<bf16>(1, sh.oc)[0] : nullptr;
    const double flops = 2.0 * N * sh.c * sh.oc;
    b.fl(std::string("matmul_fwd ") + sh.name, flops,
         [&](int r) { zc::matmul_forward(out[r % k], inp[r % k], w[r % k], bias, N, sh.c, sh.oc, b.s, pre[r % k]); });
    auto dinp = buffers<bf16>(k, in_n, 0.01f, 0.1f), dw = buffers<bf16>(k, w_n, 0.01f, 0.1f);
    auto dpre = sh.gelu ? buffers<bf16>(k, out_n) : std::vector<bf16*>(k, nullptr);
    bf16* dbias = sh.bias ? buffers<bf16>(1, sh.oc)[0] : nullptr;
    b.fl(std::string("matmul_bwd ") + sh.name, 2 * flops, [&](int r) {
      zc::matmul_backward(dinp[r % k], dw[r % k], dbias, out[r % k], inp[r % k], w[r % k], N, sh.c, sh.oc, b.s,
                          pre[r % k], dpre[r % k]);
    });
  }
}

// Causal attention at B x T with nh query heads over nkv key/value heads of size hs.
void attention_case(Bench& b, const std::string& name, int nh, int nkv, int hs) {
  const size_t c = size_t(nh) * hs, width = size_t(nh + 2 * nkv) * hs, rows = N * nh;
  const double flops = 4.0 * B * nh * static_cast<double>(T) * T * hs / 2;  // causal: half the scores
  auto qkv = buffers<bf16>(1, N * width), out = buffers<bf16>(1, N * c), dout = buffers<bf16>(1, N * c),
       dqkv = buffers<bf16>(1, N * width);
  auto lse = buffers<float>(1, rows);
  float* scratch = device_alloc<float>(rows);
  const int ci = int(c);
  b.fl("attention_forward" + name, flops,
       [&](int) { zc::attention_forward(out[0], lse[0], qkv[0], B, T, ci, nh, nkv, {}, b.s); });
  b.fl("attention_backward" + name, 2.5 * flops, [&](int) {
    zc::attention_backward(dqkv[0], scratch, dout[0], qkv[0], out[0], lse[0], B, T, ci, nh, nkv, {}, b.s);
  });
  // cuDNN's fused attention on the same tensors (train.attention "cudnn"), its backward with the
  // add onto dqkv that the backend does; its workspace grows to the largest it asks for.
  if (!zc::cudnn::available()) return;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  const zc::cudnn::Workspace workspace = [&](size_t bytes) {
    if (bytes > ws_bytes) ws = device_alloc<char>(ws_bytes = bytes);
    return ws;
  };
  bf16* grad = device_alloc<bf16>(N * width);
  b.fl("cudnn attention_forward" + name, flops,
       [&](int) { zc::cudnn::attention_forward(out[0], lse[0], qkv[0], B, T, ci, nh, nkv, {}, workspace, b.s); });
  b.fl("cudnn attention_backward" + name, 2.5 * flops, [&](int) {
    zc::cudnn::attention_backward(grad, dout[0], qkv[0], out[0], lse[0], B, T, ci, nh, nkv, {}, workspace, b.s);
    zc::residual_backward(dqkv[0], static_cast<bf16*>(nullptr), grad, N * width, b.s);
  });
}

void attention(Bench& b) {
  attention_case(b, "", NH, NH, C / NH);
  attention_case(b, " (9/3 heads, hs 64)", 9, 3, 64);  // SmolLM2's grouped-query heads
}

void crossentropy_and_optimizer(Bench& b) {
  const size_t nv = N * Vp;
  bf16* logits = buffers<bf16>(1, nv, 0.1f, 4.0f)[0];
  int32_t* targets = device_alloc<int32_t>(N);
  fill_tokens(targets, N, V);
  float* losses = device_alloc<float>(N);
  float* lse = device_alloc<float>(N);
  b.mem("crossentropy_forward", nv * 2.0 + N * 12.0,
        [&](int) { zc::crossentropy_forward(losses, lse, logits, targets, N, V, Vp, -1, b.s); });
  b.mem("crossentropy_backward", 2.0 * nv * 2.0 + N * 8.0, [&](int) {
    zc::crossentropy_backward(logits, lse, targets, 1.0f / N, N, V, Vp, -1, b.s);
  });

  const size_t n = kParams;
  float* master = buffers<float>(1, n)[0];
  float* m = buffers<float>(1, n, 0.001f, 0.01f)[0];
  float* v = buffers<float>(1, n, 0.001f, 0.01f, true)[0];
  bf16* params = device_alloc<bf16>(n);
  bf16* grads = buffers<bf16>(1, n, 0.001f, 0.01f)[0];
  b.mem("adamw_update (124M)", 28.0 * n, [&](int r) {
    zc::adamw_update(master, params, grads, m, v, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, r + 1, 1.0f, b.s);
  });
  double* sum = device_alloc<double>(1);
  double* sum_scratch = device_alloc<double>(zc::kSumSquaresScratch);
  b.mem("sum_squares (124M)", 2.0 * n, [&](int) { zc::sum_squares(sum, grads, n, sum_scratch, b.s); });
  int* flag = device_alloc<int>(1);
  b.mem("any_nonfinite (124M)", 2.0 * n, [&](int) { zc::any_nonfinite(flag, grads, n, b.s); });
  b.mem("cast bf16->f32 (124M)", 6.0 * n,
        [&](int) { zc::cast(master, zt::DType::f32, grads, zt::DType::bf16, n, b.s); });
}

}  // namespace

int main() {
  try {
    require_device("gpu_kernels");
    cudaStream_t s = nullptr;
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    const double copy = copy_ceiling_gbs(s), gemm = gemm_ceiling_tflops(s);
    Bench b{s, {}};
    elementwise(b);
    encoder_and_norms(b);
    matmuls(b);
    attention(b);
    crossentropy_and_optimizer(b);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");

    std::printf("# GPT-2 124M shapes, bf16: B=%d T=%d C=%d NH=%d Vp=%d\n", B, T, C, NH, Vp);
    std::printf("%-28s %10s %12s %8s %8s\n", "kernel", "time_us", "rate", "%ceil", "target");
    std::printf("%-28s %10s %8.0f GB/s %8s %8s\n", "ceiling: copy 1 GiB", "-", copy, "100", "-");
    std::printf("%-28s %10s %6.0f TFLOP/s %6s %8s\n", "ceiling: gemm bf16 8192^3", "-", gemm, "100", "-");
    for (const Row& r : b.rows) {
      const double rate = r.amount / r.us * (r.flops ? 1e-6 : 1e-3);
      const double pct = 100.0 * rate / (r.flops ? gemm : copy);
      std::printf("%-28s %10.1f %8.1f %s %7.1f %8s\n", r.name.c_str(), r.us, rate, r.flops ? "TFLOP/s" : "GB/s   ", pct,
                  r.flops ? "-" : (pct >= 70 ? ">=70 ok" : ">=70 MISS"));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_kernels: %s\n", e.what());
    return 1;
  }
}
