// The meta backend: every op over meta tensors does nothing ([Note: the meta device] in
// tensor/meta_allocator.hpp) but report what it would cost ([Note: op costs] in
// kernels/op_cost.hpp). The ops (kernels/ops.cpp) still allocate what they allocate on any
// device; here only what a backend itself allocates is left to do, as the CPU backend does it,
// since the meta device plans a host run.
#include "kernels/backend.hpp"
#include "kernels/op_cost.hpp"

namespace zt {

namespace {

thread_local OpCostSink* t_sink = nullptr;

// Bytes of a tensor (0 undefined), and its elements.
double n(const Tensor& t) { return t.defined() ? static_cast<double>(t.nbytes()) : 0.0; }
double numel(const Tensor& t) { return t.defined() ? static_cast<double>(t.numel()) : 0.0; }

void report(const char* op, OpClass cls, double flops, double bytes) {
  if (t_sink) t_sink->add({op, cls, flops, bytes});
}
void report_flat(const char* what, double bytes) {
  if (t_sink) t_sink->add({what, OpClass::memory, 0, bytes, true});
}
// A memory-bound op touching each of `ts` once.
void touch(const char* op, std::initializer_list<const Tensor*> ts) {
  double e = 0;
  for (const Tensor* t : ts) e += n(*t);
  report(op, OpClass::memory, 0, e);
}
double parts_numel(const std::vector<Tensor>& parts) {
  double e = 0;
  for (const Tensor& p : parts) e += n(p);
  return e;
}
// Causal attention's forward products (QK^T and PV over the scores a query sees): 2 flops a
// multiply-add, 2 products, over half the (T,T) scores, or with a window of W < T about T*W - W*W/2.
double attention_flops(const Tensor& qkv, const Tensor& out, int n_head, const AttentionOptions& opt) {
  const double B = static_cast<double>(qkv.dim(0)), T = static_cast<double>(qkv.dim(1));
  const double hs = static_cast<double>(out.dim(-1)) / n_head;
  const double W = attention_window(opt, static_cast<int>(qkv.dim(1)));
  const double scores = W < T ? T * W - W * W / 2 : T * T / 2;
  return 4.0 * B * n_head * scores * hs;
}

class MetaBackend final : public Backend {
 public:
  Device device() const override { return Device::meta; }
  // A plan holds parameters and activations of any floating dtype; nothing computes in them.
  bool computes_in(DType t) const override { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }
  void push_range(const std::string&) const override {}
  void pop_range() const override {}

  void encoder_forward(const Tensor& out, const Tensor& tokens, const Tensor&, const Tensor&, int) const override {
    report("encoder_forward", OpClass::memory, 0, 2 * n(out) + n(tokens));
  }
  void encoder_backward(const Tensor&, const Tensor&, const Tensor& dout, const Tensor& tokens, int) const override {
    report("encoder_backward", OpClass::memory, 0, 3 * n(dout) + n(tokens));  // dout read, table rows updated
  }
  void layernorm_forward(const Tensor& out, const Tensor&, const Tensor&, const Tensor& x, const Tensor&,
                         const Tensor&) const override {
    touch("layernorm_forward", {&x, &out});
  }
  void layernorm_backward(const Tensor& dx, const Tensor&, const Tensor&, const Tensor& dout, const Tensor& x,
                          const Tensor&, const Tensor&, const Tensor&) const override {
    report("layernorm_backward", OpClass::memory, 0, n(dout) + n(x) + 2 * n(dx));
  }
  void matmul_forward(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor&) const override {
    report("matmul_forward", OpClass::gemm, 2.0 * numel(x) * static_cast<double>(out.dim(-1)), n(x) + n(weight) + n(out));
  }
  void matmul_backward(const Tensor& dx, const Tensor& dweight, const Tensor&, const Tensor& dout, const Tensor& x,
                       const Tensor& weight) const override {
    const double products = (dx.defined() ? 1 : 0) + (dweight.defined() ? 1 : 0);
    report("matmul_backward", OpClass::gemm, products * 2.0 * numel(x) * static_cast<double>(dout.dim(-1)),
           n(dout) + n(x) + n(weight) + 2 * n(dx) + 2 * n(dweight));
  }
  // What the backward keeps, beside qkv: the CPU kernels' (B,NH,T,T) f32 probabilities. Only
  // CUDA computes in 16 bits, so 16-bit activations plan a CUDA run, whose kernels (ours and
  // cuDNN's) keep each row's (B,NH,T) f32 logsumexp and read no (T,T) matrix from memory.
  Tensor attention_forward(const Tensor& out, const Tensor& qkv, int n_head, int, AttentionKernel,
                           const AttentionOptions& opt) const override {
    const bool cuda = qkv.dtype() != DType::f32;
    Tensor saved = cuda ? Tensor::empty({qkv.dim(0), n_head, qkv.dim(1)}, DType::f32, MemCategory::activations, qkv.allocator())
                        : Tensor::empty({qkv.dim(0), n_head, qkv.dim(1), qkv.dim(1)}, DType::f32,
                                        MemCategory::activations, qkv.allocator());
    report("attention_forward", OpClass::attention, attention_flops(qkv, out, n_head, opt), n(qkv) + n(out) + n(saved));
    return saved;
  }
  void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                          const Tensor& saved, int n_head, int, AttentionKernel,
                          const AttentionOptions& opt) const override {
    report("attention_backward", OpClass::attention, 2 * attention_flops(qkv, out, n_head, opt),
           n(dout) + n(qkv) + n(out) + n(saved) + 2 * n(dqkv));
  }
  void rmsnorm_forward(const Tensor& out, const Tensor&, const Tensor& x, const Tensor&, float, float) const override {
    touch("rmsnorm_forward", {&x, &out});
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor&, const Tensor& dout, const Tensor& x, const Tensor&,
                        const Tensor&, float) const override {
    report("rmsnorm_backward", OpClass::memory, 0, n(dout) + n(x) + 2 * n(dx));
  }
  void swiglu_forward(const Tensor& out, const Tensor& x) const override { touch("swiglu_forward", {&x, &out}); }
  void swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const override {
    report("swiglu_backward", OpClass::memory, 0, n(x) + n(dout) + 2 * n(dx));
  }
  void geglu_forward(const Tensor& out, const Tensor& x) const override { touch("geglu_forward", {&x, &out}); }
  void geglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const override {
    report("geglu_backward", OpClass::memory, 0, n(x) + n(dout) + 2 * n(dx));
  }
  void rope_forward(const Tensor& out, const Tensor& qkv, const Tensor&, int, int) const override {
    touch("rope_forward", {&qkv, &out});
  }
  void rope_backward(const Tensor& dqkv, const Tensor& dout, const Tensor&, int, int) const override {
    report("rope_backward", OpClass::memory, 0, n(dout) + 2 * n(dqkv));
  }
  void gelu_forward(const Tensor& out, const Tensor& x) const override { touch("gelu_forward", {&x, &out}); }
  void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const override {
    report("gelu_backward", OpClass::memory, 0, n(x) + n(dout) + 2 * n(dx));
  }
  void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b) const override {
    touch("residual_forward", {&a, &b, &out});
  }
  void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout) const override {
    report("residual_backward", OpClass::memory, 0, n(dout) + 2 * n(da) + 2 * n(db));
  }
  void add_columns_forward(const Tensor& out, const Tensor& y, const Tensor& d, int64_t, float) const override {
    touch("add_columns_forward", {&y, &d, &out});
  }
  void add_columns_backward(const Tensor& dy, const Tensor& dd, const Tensor& dout, int64_t, float) const override {
    report("add_columns_backward", OpClass::memory, 0, n(dout) + 2 * n(dy) + 2 * n(dd));
  }
  void dropout_forward(const Tensor& out, const Tensor& x, const DropoutMask&) const override {
    touch("dropout_forward", {&x, &out});
  }
  void dropout_backward(const Tensor& dx, const Tensor& dout, const DropoutMask&) const override {
    report("dropout_backward", OpClass::memory, 0, n(dout) + 2 * n(dx));
  }
  void crossentropy_forward(const Tensor& losses, const Tensor& lse, const std::vector<Tensor>& parts,
                            const Tensor& targets, int, int) const override {
    report("crossentropy_forward", OpClass::memory, 0, parts_numel(parts) + n(losses) + n(lse) + n(targets));
  }
  void crossentropy_backward(const std::vector<Tensor>& parts, const Tensor& lse, const Tensor& targets, float, int,
                             int) const override {
    report("crossentropy_backward", OpClass::memory, 0, 2 * parts_numel(parts) + n(lse) + n(targets));
  }

  void cast(const Tensor& to, const Tensor& from) const override { report_flat("cast", n(to) + n(from)); }
  // dst read and written, src read.
  void accumulate(const Tensor& dst, const Tensor& src) const override { report_flat("accumulate", 2 * n(dst) + n(src)); }
  double sum_squares(const std::vector<Tensor>& xs) const override {
    double bytes = 0;
    for (const Tensor& x : xs) bytes += n(x);
    report_flat("norm", bytes);
    return 0.0;
  }
  bool any_nonfinite(const std::vector<Tensor>&) const override { return false; }
  // The master, m and v read and written, the gradients read, `low` written.
  void adamw_update(const Tensor& master, const Tensor& low, const Tensor& grads, const Tensor& m, const Tensor& v,
                    const AdamWArgs&) const override {
    report_flat("adamw", 2 * (n(master) + n(m) + n(v)) + n(grads) + n(low));
  }
};

}  // namespace

OpCostScope::OpCostScope(OpCostSink* sink) : previous_(t_sink) { t_sink = sink; }
OpCostScope::~OpCostScope() { t_sink = previous_; }

const Backend& meta_backend() {
  static const MetaBackend instance;
  return instance;
}

}  // namespace zt
