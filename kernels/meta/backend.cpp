// The meta backend: every op over meta tensors does nothing ([Note: the meta device] in
// tensor/meta_allocator.hpp). The ops (kernels/ops.cpp) still allocate what they allocate on any
// device; here only what a backend itself allocates is left to do, as the CPU backend does it,
// since the meta device plans a host run.
#include "kernels/backend.hpp"

namespace zt {

namespace {

class MetaBackend final : public Backend {
 public:
  Device device() const override { return Device::meta; }
  // A plan holds parameters and activations of any floating dtype; nothing computes in them.
  bool computes_in(DType t) const override { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }
  void push_range(const std::string&) const override {}
  void pop_range() const override {}

  void encoder_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int) const override {}
  void encoder_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int) const override {}
  void layernorm_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&) const override {}
  void layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, const Tensor&) const override {}
  void matmul_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) const override {}
  void matmul_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&) const override {}
  // The CPU kernels' (B,NH,T,T) f32 probabilities, beside qkv.
  Tensor attention_forward(const Tensor&, const Tensor& qkv, int n_head, int, AttentionKernel) const override {
    return Tensor::empty({qkv.dim(0), n_head, qkv.dim(1), qkv.dim(1)}, DType::f32, MemCategory::activations,
                         qkv.allocator());
  }
  void attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int, int,
                          AttentionKernel) const override {}
  void rmsnorm_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float) const override {}
  void rmsnorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&) const override {}
  void swiglu_forward(const Tensor&, const Tensor&) const override {}
  void swiglu_backward(const Tensor&, const Tensor&, const Tensor&) const override {}
  void rope_forward(const Tensor&, const Tensor&, const Tensor&, int, int) const override {}
  void rope_backward(const Tensor&, const Tensor&, const Tensor&, int, int) const override {}
  void gelu_forward(const Tensor&, const Tensor&) const override {}
  void gelu_backward(const Tensor&, const Tensor&, const Tensor&) const override {}
  void residual_forward(const Tensor&, const Tensor&, const Tensor&) const override {}
  void residual_backward(const Tensor&, const Tensor&, const Tensor&) const override {}
  void add_columns_forward(const Tensor&, const Tensor&, const Tensor&, int64_t, float) const override {}
  void add_columns_backward(const Tensor&, const Tensor&, const Tensor&, int64_t, float) const override {}
  void dropout_forward(const Tensor&, const Tensor&, const DropoutMask&) const override {}
  void dropout_backward(const Tensor&, const Tensor&, const DropoutMask&) const override {}
  void crossentropy_forward(const Tensor&, const Tensor&, const std::vector<Tensor>&, const Tensor&, int,
                            int) const override {}
  void crossentropy_backward(const std::vector<Tensor>&, const Tensor&, const Tensor&, float, int,
                             int) const override {}

  void cast(const Tensor&, const Tensor&) const override {}
  void accumulate(const Tensor&, const Tensor&) const override {}
  double sum_squares(const std::vector<Tensor>&) const override { return 0.0; }
  bool any_nonfinite(const std::vector<Tensor>&) const override { return false; }
  void adamw_update(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                    const AdamWArgs&) const override {}
};

}  // namespace

const Backend& meta_backend() {
  static const MetaBackend instance;
  return instance;
}

}  // namespace zt
