// The CPU backend: kernels/cpu/ over host tensors, f32 only ([Backend] in kernels/backend.hpp).
#include <stdexcept>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt {

namespace {

// The f32 data of a host tensor, or null for an undefined one (a gradient not asked for).
float* f32(const Tensor& t) {
  if (!t.defined()) return nullptr;
  if (t.dtype() != DType::f32)
    throw std::invalid_argument("the cpu kernels compute in f32, not " + std::string(dtype_name(t.dtype())));
  return t.data<float>();
}

void require_own_attention(AttentionKernel k) {
  if (k != AttentionKernel::own)
    throw std::invalid_argument("cpu attention: cuDNN's fused attention runs on cuda only (train.attention \"cudnn\" "
                                "needs train.device \"cuda\")");
}

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu; }
  bool computes_in(DType t) const override { return t == DType::f32; }
  void push_range(const std::string&) const override {}
  void pop_range() const override {}

  void encoder_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                       int row0) const override {
    cpu::encoder_forward(f32(out), tokens.data<int32_t>(), f32(wte), f32(wpe), dim_of(tokens, 0), dim_of(tokens, 1),
                         dim_of(out, -1), row0, wte.defined() ? dim_of(wte, 0) : 0);
  }
  void encoder_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                        int row0) const override {
    cpu::encoder_backward(f32(dwte), f32(dwpe), f32(dout), tokens.data<int32_t>(), dim_of(tokens, 0), dim_of(tokens, 1),
                          dim_of(dout, -1), row0, dwte.defined() ? dim_of(dwte, 0) : 0);
  }
  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                         const Tensor& weight, const Tensor& bias) const override {
    cpu::layernorm_forward(f32(out), f32(mean), f32(rstd), f32(x), f32(weight), f32(bias), rows_of(x), dim_of(x, -1));
  }
  void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                          const Tensor& x, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd) const override {
    cpu::layernorm_backward(f32(dx), f32(dweight), f32(dbias), f32(dout), f32(x), f32(weight), f32(mean), f32(rstd),
                            rows_of(x), dim_of(x, -1));
  }
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& weight, float eps,
                       float offset) const override {
    cpu::rmsnorm_forward(f32(out), f32(rstd), f32(x), f32(weight), rows_of(x), dim_of(x, -1), eps, offset);
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout, const Tensor& x,
                        const Tensor& weight, const Tensor& rstd, float offset) const override {
    cpu::rmsnorm_backward(f32(dx), f32(dweight), f32(dout), f32(x), f32(weight), f32(rstd), rows_of(x), dim_of(x, -1),
                          offset);
  }
  void matmul_forward(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias) const override {
    cpu::matmul_forward(f32(out), f32(x), f32(weight), f32(bias), rows_of(x), dim_of(x, -1), dim_of(weight, 0));
  }
  void matmul_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                       const Tensor& x, const Tensor& weight) const override {
    cpu::matmul_backward(f32(dx), f32(dweight), f32(dbias), f32(dout), f32(x), f32(weight), rows_of(x), dim_of(x, -1),
                         dim_of(weight, 0));
  }
  Tensor attention_forward(const Tensor& out, const Tensor& qkv, int n_head, int n_kv_head, AttentionKernel kernel,
                           const AttentionOptions& opt) const override {
    require_own_attention(kernel);
    const int B = dim_of(qkv, 0), T = dim_of(qkv, 1);
    Tensor att = Tensor::empty({B, n_head, T, T}, DType::f32, MemCategory::activations);
    cpu::attention_forward(f32(out), f32(att), f32(qkv), B, T, n_head, n_kv_head, dim_of(out, -1) / n_head, opt);
    return att;
  }
  void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor&, const Tensor& att,
                          int n_head, int n_kv_head, AttentionKernel kernel,
                          const AttentionOptions& opt) const override {
    require_own_attention(kernel);
    cpu::attention_backward(f32(dqkv), f32(dout), f32(qkv), f32(att), dim_of(qkv, 0), dim_of(qkv, 1), n_head, n_kv_head,
                            dim_of(dout, -1) / n_head, opt);
  }
  void gelu_forward(const Tensor& out, const Tensor& x) const override {
    cpu::gelu_forward(f32(out), f32(x), count_of(x));
  }
  void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const override {
    cpu::gelu_backward(f32(dx), f32(x), f32(dout), count_of(x));
  }
  void swiglu_forward(const Tensor& out, const Tensor& x) const override {
    cpu::swiglu_forward(f32(out), f32(x), rows_of(x), dim_of(x, -1) / 2);
  }
  void swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const override {
    cpu::swiglu_backward(f32(dx), f32(x), f32(dout), rows_of(x), dim_of(x, -1) / 2);
  }
  void geglu_forward(const Tensor& out, const Tensor& x) const override {
    cpu::geglu_forward(f32(out), f32(x), rows_of(x), dim_of(x, -1) / 2);
  }
  void geglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const override {
    cpu::geglu_backward(f32(dx), f32(x), f32(dout), rows_of(x), dim_of(x, -1) / 2);
  }
  void rope_forward(const Tensor& out, const Tensor& qkv, const Tensor& inv_freq, int n_head,
                    int n_kv_head) const override {
    cpu::rope_forward(f32(out), f32(qkv), f32(inv_freq), dim_of(qkv, 0), dim_of(qkv, 1), n_head, n_kv_head,
                      dim_of(qkv, -1) / (n_head + 2 * n_kv_head));
  }
  void rope_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& inv_freq, int n_head,
                     int n_kv_head) const override {
    cpu::rope_backward(f32(dqkv), f32(dout), f32(inv_freq), dim_of(dout, 0), dim_of(dout, 1), n_head, n_kv_head,
                       dim_of(dout, -1) / (n_head + 2 * n_kv_head));
  }
  void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b) const override {
    cpu::residual_forward(f32(out), f32(a), f32(b), count_of(a));
  }
  void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout) const override {
    cpu::residual_backward(f32(da), f32(db), f32(dout), count_of(dout));
  }
  void add_columns_forward(const Tensor& out, const Tensor& y, const Tensor& d, int64_t col0,
                           float scale) const override {
    cpu::add_columns_forward(f32(out), f32(y), f32(d), rows_of(y), dim_of(y, -1), static_cast<int>(col0), dim_of(d, -1),
                             scale);
  }
  void dropout_forward(const Tensor& out, const Tensor& x, const DropoutMask& m) const override {
    cpu::dropout_forward(f32(out), f32(x), count_of(x), m.seed, m.threshold, m.scale);
  }
  void dropout_backward(const Tensor& dx, const Tensor& dout, const DropoutMask& m) const override {
    if (dx.defined()) cpu::dropout_backward(f32(dx), f32(dout), count_of(dout), m.seed, m.threshold, m.scale);
  }
  void add_columns_backward(const Tensor& dy, const Tensor& dd, const Tensor& dout, int64_t col0,
                            float scale) const override {
    cpu::add_columns_backward(f32(dy), f32(dd), f32(dout), rows_of(dout), dim_of(dout, -1), static_cast<int>(col0),
                              dd.defined() ? dim_of(dd, -1) : 0, scale);
  }
  void crossentropy_forward(const Tensor& losses, const Tensor& lse, const std::vector<Tensor>& parts,
                            const Tensor& targets, int V, int ignore_index) const override {
    std::vector<const float*> in;
    for (const Tensor& p : parts) in.push_back(f32(p));
    const int K = static_cast<int>(parts.size());
    cpu::crossentropy_forward(f32(losses), f32(lse), in.data(), K, targets.data<int32_t>(), rows_of(parts[0]), V,
                              K * dim_of(parts[0], -1), ignore_index);
  }
  void crossentropy_backward(const std::vector<Tensor>& parts, const Tensor& lse, const Tensor& targets, float scale,
                             int V, int ignore_index) const override {
    std::vector<float*> d;
    for (const Tensor& p : parts) d.push_back(f32(p));
    const int K = static_cast<int>(parts.size());
    cpu::crossentropy_backward(d.data(), K, f32(lse), targets.data<int32_t>(), scale, rows_of(parts[0]), V,
                               K * dim_of(parts[0], -1), ignore_index);
  }

  void cast(const Tensor& out, const Tensor& in) const override {
    cpu::cast(out.raw(), out.dtype(), in.raw(), in.dtype(), count_of(in));
  }
  void accumulate(const Tensor& dst, const Tensor& src) const override {
    cpu::residual_forward(f32(dst), f32(dst), f32(src), count_of(dst));
  }
  double sum_squares(const std::vector<Tensor>& xs) const override {
    double sum = 0.0;
    for (const Tensor& x : xs) sum += cpu::sum_squares(f32(x), count_of(x));
    return sum;
  }
  bool any_nonfinite(const std::vector<Tensor>& xs) const override {
    for (const Tensor& x : xs)
      if (cpu::any_nonfinite(f32(x), count_of(x))) return true;
    return false;
  }
  void adamw_update(const Tensor& master, const Tensor& low, const Tensor& grads, const Tensor& m, const Tensor& v,
                    const AdamWArgs& a) const override {
    cpu::adamw_update(f32(master), f32(grads), f32(m), f32(v), count_of(master), a.lr, a.beta1, a.beta2, a.eps,
                      a.weight_decay, a.t, a.grad_scale);
    if (low.defined()) cast(low, master);
  }
};

}  // namespace

const Backend& backend(Device d) {
  static const CpuBackend cpu;
  if (d == Device::cpu) return cpu;
  if (d == Device::meta) return meta_backend();
  if (const Backend* b = cuda_backend()) return *b;
  throw std::invalid_argument("no kernels for device " + std::string(device_name(d)) +
                              ": this ztrain was built without CUDA (meson -Dcuda=enabled)");
}

}  // namespace zt
