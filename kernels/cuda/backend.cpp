// The CUDA backend: kernels/cuda/ over device tensors of the current device, in f32 or bf16 (the
// activations' dtype), launched on the calling thread's stream ([Backend] in kernels/backend.hpp).
// Scratch comes from the caching allocator on that stream and goes back to it right after the
// launch: the cache hands a block to another stream only after the work queued here ([Note:
// stream-ordered reuse] in tensor/block_pool.cpp).
#include <nvtx3/nvToolsExt.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda/attention_cudnn.hpp"
#include "kernels/cuda/kernels.hpp"
#include "tensor/cuda_allocator.hpp"

namespace zt {

namespace {

using cuda::bf16;

cudaStream_t stream() { return current_cuda_stream(); }


// The device pointer of t as T, or null for an undefined tensor (a gradient not asked for).
template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.device_ptr()) : nullptr;
}
float* stats(const Tensor& t) {
  if (t.defined() && t.dtype() != DType::f32) throw std::invalid_argument("cuda: statistics must be f32");
  return ptr<float>(t);
}

// Calls f(T{}) with T the C++ type of `t` (float or bf16) after checking that every other defined
// tensor has that dtype too.
template <class F>
void by_dtype(const char* op, DType t, std::initializer_list<const Tensor*> same, F&& f) {
  for (const Tensor* x : same)
    if (x->defined() && x->dtype() != t)
      throw std::invalid_argument(std::string("cuda ") + op + ": tensors of dtypes " + std::string(dtype_name(t)) +
                                  " and " + std::string(dtype_name(x->dtype())));
  if (t == DType::f32) return f(float{});
  if (t == DType::bf16) return f(bf16{});
  throw std::invalid_argument(std::string("cuda ") + op + ": no kernel for dtype " + std::string(dtype_name(t)));
}

// Device scratch of at least `bytes`, charged to activations; freed on this stream.
Tensor scratch_bytes(const Tensor& like, size_t bytes) {
  return Tensor::empty({static_cast<int64_t>((bytes + 3) / 4)}, DType::f32, MemCategory::activations,
                       like.allocator());
}

// cuDNN's workspace as scratch tensors held in `held` until the op returns (the allocator then
// reuses them only after the work queued on this stream).
cuda::cudnn::Workspace workspace_from(const Tensor& like, std::vector<Tensor>& held) {
  return [&like, &held](size_t bytes) {
    held.push_back(scratch_bytes(like, bytes));
    return held.back().device_ptr();
  };
}

void require_bf16_for_cudnn(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && t->dtype() != DType::bf16)
      throw std::invalid_argument(std::string("cuda ") + op + ": cuDNN's fused attention computes in bf16, not " +
                                  std::string(dtype_name(t->dtype())) +
                                  " (train.attention \"cudnn\" needs bf16.enabled; \"ztrain\" runs f32 too)");
}

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::cuda; }
  bool computes_in(DType t) const override { return t == DType::f32 || t == DType::bf16; }
  bool has_attention(AttentionKernel k) const override {
    return k == AttentionKernel::own || (k == AttentionKernel::cudnn && cuda::cudnn::available());
  }
  void push_range(const std::string& name) const override { nvtxRangePushA(name.c_str()); }
  void pop_range() const override { nvtxRangePop(); }

  void encoder_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                       int row0) const override {
    by_dtype("encoder_forward", out.dtype(), {&wte, &wpe}, [&]<class T>(T) {
      cuda::encoder_forward<T>(ptr<T>(out), ptr<int32_t>(tokens), ptr<T>(wte), ptr<T>(wpe), dim_of(tokens, 0),
                               dim_of(tokens, 1), dim_of(out, -1), row0, wte.defined() ? dim_of(wte, 0) : 0, stream());
    });
  }
  void encoder_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                        int row0) const override {
    const int B = dim_of(tokens, 0), T_ = dim_of(tokens, 1), rows = dwte.defined() ? dim_of(dwte, 0) : 0;
    const size_t bytes = dwte.defined() ? cuda::encoder_backward_scratch_bytes(B, T_, rows) : 0;
    const Tensor scratch = bytes ? scratch_bytes(dout, bytes) : Tensor();
    by_dtype("encoder_backward", dout.dtype(), {&dwte, &dwpe}, [&]<class T>(T) {
      cuda::encoder_backward<T>(ptr<T>(dwte), ptr<T>(dwpe), ptr<T>(dout), ptr<int32_t>(tokens), B, T_, dim_of(dout, -1),
                                row0, rows, ptr<void>(scratch), bytes, stream());
    });
  }
  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                         const Tensor& weight, const Tensor& bias) const override {
    by_dtype("layernorm_forward", x.dtype(), {&out, &weight, &bias}, [&]<class T>(T) {
      cuda::layernorm_forward<T>(ptr<T>(out), stats(mean), stats(rstd), ptr<T>(x), ptr<T>(weight), ptr<T>(bias),
                                 rows_of(x), dim_of(x, -1), stream());
    });
  }
  void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                          const Tensor& x, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd) const override {
    const int N = rows_of(x), C = dim_of(x, -1);
    const bool params = dweight.defined() || dbias.defined();
    const Tensor scratch =
        params ? scratch_bytes(x, cuda::layernorm_backward_scratch_floats(N, C) * sizeof(float)) : Tensor();
    by_dtype("layernorm_backward", x.dtype(), {&dx, &dweight, &dbias, &dout, &weight}, [&]<class T>(T) {
      cuda::layernorm_backward<T>(ptr<T>(dx), ptr<T>(dweight), ptr<T>(dbias), ptr<T>(dout), ptr<T>(x), ptr<T>(weight),
                                  stats(mean), stats(rstd), N, C, ptr<float>(scratch), stream());
    });
  }
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& weight, float eps,
                       float offset) const override {
    by_dtype("rmsnorm_forward", x.dtype(), {&out, &weight}, [&]<class T>(T) {
      cuda::rmsnorm_forward<T>(ptr<T>(out), stats(rstd), ptr<T>(x), ptr<T>(weight), rows_of(x), dim_of(x, -1), eps,
                               offset, stream());
    });
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout, const Tensor& x,
                        const Tensor& weight, const Tensor& rstd, float offset) const override {
    const int N = rows_of(x), C = dim_of(x, -1);
    const Tensor scratch =
        dweight.defined() ? scratch_bytes(x, cuda::rmsnorm_backward_scratch_floats(N, C) * sizeof(float)) : Tensor();
    by_dtype("rmsnorm_backward", x.dtype(), {&dx, &dweight, &dout, &weight}, [&]<class T>(T) {
      cuda::rmsnorm_backward<T>(ptr<T>(dx), ptr<T>(dweight), ptr<T>(dout), ptr<T>(x), ptr<T>(weight), stats(rstd), N, C,
                                offset, ptr<float>(scratch), stream());
    });
  }
  void matmul_forward(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias) const override {
    by_dtype("matmul_forward", x.dtype(), {&out, &weight, &bias}, [&]<class T>(T) {
      cuda::matmul_forward<T>(ptr<T>(out), ptr<T>(x), ptr<T>(weight), ptr<T>(bias), rows_of(x), dim_of(x, -1),
                              dim_of(weight, 0), stream());
    });
  }
  void matmul_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                       const Tensor& x, const Tensor& weight) const override {
    by_dtype("matmul_backward", x.dtype(), {&dx, &dweight, &dbias, &dout, &weight}, [&]<class T>(T) {
      cuda::matmul_backward<T>(ptr<T>(dx), ptr<T>(dweight), ptr<T>(dbias), ptr<T>(dout), ptr<T>(x), ptr<T>(weight),
                               rows_of(x), dim_of(x, -1), dim_of(weight, 0), stream());
    });
  }
  Tensor attention_forward(const Tensor& out, const Tensor& qkv, int n_head, int n_kv_head, AttentionKernel kernel,
                           const AttentionOptions& opt) const override {
    const int B = dim_of(qkv, 0), T_ = dim_of(qkv, 1), C = dim_of(out, -1);
    Tensor lse = Tensor::empty({B, n_head, T_}, DType::f32, MemCategory::activations, qkv.allocator());
    if (kernel == AttentionKernel::cudnn) {
      require_bf16_for_cudnn("attention_forward", {&out, &qkv});
      std::vector<Tensor> workspace;
      cuda::cudnn::attention_forward(ptr<bf16>(out), ptr<float>(lse), ptr<bf16>(qkv), B, T_, C, n_head, n_kv_head, opt,
                                     workspace_from(qkv, workspace), stream());
      return lse;
    }
    by_dtype("attention_forward", qkv.dtype(), {&out}, [&]<class T>(T) {
      cuda::attention_forward<T>(ptr<T>(out), ptr<float>(lse), ptr<T>(qkv), B, T_, C, n_head, n_kv_head, opt, stream());
    });
    return lse;
  }
  void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                          const Tensor& lse, int n_head, int n_kv_head, AttentionKernel kernel,
                          const AttentionOptions& opt) const override {
    const int B = dim_of(qkv, 0), T_ = dim_of(qkv, 1), C = dim_of(out, -1);
    if (kernel == AttentionKernel::cudnn) {
      if (!dqkv.defined()) return;
      require_bf16_for_cudnn("attention_backward", {&dqkv, &dout, &qkv, &out});
      // cuDNN writes dQ, dK and dV; the backward adds them onto dqkv.
      const Tensor grad = Tensor::empty(qkv.shape(), DType::bf16, MemCategory::activations, qkv.allocator());
      std::vector<Tensor> workspace;
      cuda::cudnn::attention_backward(ptr<bf16>(grad), ptr<bf16>(dout), ptr<bf16>(qkv), ptr<bf16>(out), stats(lse), B,
                                      T_, C, n_head, n_kv_head, opt, workspace_from(qkv, workspace), stream());
      cuda::residual_backward<bf16>(ptr<bf16>(dqkv), nullptr, ptr<bf16>(grad), count_of(grad), stream());
      return;
    }
    const Tensor scratch = scratch_bytes(qkv, static_cast<size_t>(B) * n_head * T_ * sizeof(float));
    by_dtype("attention_backward", qkv.dtype(), {&dqkv, &dout, &out}, [&]<class T>(T) {
      cuda::attention_backward<T>(ptr<T>(dqkv), ptr<float>(scratch), ptr<T>(dout), ptr<T>(qkv), ptr<T>(out), stats(lse),
                                  B, T_, C, n_head, n_kv_head, opt, stream());
    });
  }
  void gelu_forward(const Tensor& out, const Tensor& x) const override {
    by_dtype("gelu_forward", x.dtype(), {&out},
             [&]<class T>(T) { cuda::gelu_forward<T>(ptr<T>(out), ptr<T>(x), count_of(x), stream()); });
  }
  void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const override {
    if (!dx.defined()) return;
    by_dtype("gelu_backward", x.dtype(), {&dx, &dout},
             [&]<class T>(T) { cuda::gelu_backward<T>(ptr<T>(dx), ptr<T>(x), ptr<T>(dout), count_of(x), stream()); });
  }
  void swiglu_forward(const Tensor& out, const Tensor& x) const override {
    by_dtype("swiglu_forward", x.dtype(), {&out}, [&]<class T>(T) {
      cuda::swiglu_forward<T>(ptr<T>(out), ptr<T>(x), rows_of(x), dim_of(x, -1) / 2, stream());
    });
  }
  void swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const override {
    if (!dx.defined()) return;
    by_dtype("swiglu_backward", x.dtype(), {&dx, &dout}, [&]<class T>(T) {
      cuda::swiglu_backward<T>(ptr<T>(dx), ptr<T>(x), ptr<T>(dout), rows_of(x), dim_of(x, -1) / 2, stream());
    });
  }
  void geglu_forward(const Tensor& out, const Tensor& x) const override {
    by_dtype("geglu_forward", x.dtype(), {&out}, [&]<class T>(T) {
      cuda::geglu_forward<T>(ptr<T>(out), ptr<T>(x), rows_of(x), dim_of(x, -1) / 2, stream());
    });
  }
  void geglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) const override {
    if (!dx.defined()) return;
    by_dtype("geglu_backward", x.dtype(), {&dx, &dout}, [&]<class T>(T) {
      cuda::geglu_backward<T>(ptr<T>(dx), ptr<T>(x), ptr<T>(dout), rows_of(x), dim_of(x, -1) / 2, stream());
    });
  }
  void rope_forward(const Tensor& out, const Tensor& qkv, const Tensor& inv_freq, int n_head,
                    int n_kv_head) const override {
    by_dtype("rope_forward", qkv.dtype(), {&out}, [&]<class T>(T) {
      cuda::rope_forward<T>(ptr<T>(out), ptr<T>(qkv), stats(inv_freq), dim_of(qkv, 0), dim_of(qkv, 1), n_head,
                            n_kv_head, dim_of(qkv, -1) / (n_head + 2 * n_kv_head), stream());
    });
  }
  void rope_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& inv_freq, int n_head,
                     int n_kv_head) const override {
    if (!dqkv.defined()) return;
    by_dtype("rope_backward", dout.dtype(), {&dqkv}, [&]<class T>(T) {
      cuda::rope_backward<T>(ptr<T>(dqkv), ptr<T>(dout), stats(inv_freq), dim_of(dout, 0), dim_of(dout, 1), n_head,
                             n_kv_head, dim_of(dout, -1) / (n_head + 2 * n_kv_head), stream());
    });
  }
  void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b) const override {
    by_dtype("residual_forward", a.dtype(), {&out, &b},
             [&]<class T>(T) { cuda::residual_forward<T>(ptr<T>(out), ptr<T>(a), ptr<T>(b), count_of(a), stream()); });
  }
  void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout) const override {
    by_dtype("residual_backward", dout.dtype(), {&da, &db}, [&]<class T>(T) {
      cuda::residual_backward<T>(ptr<T>(da), ptr<T>(db), ptr<T>(dout), count_of(dout), stream());
    });
  }
  void add_columns_forward(const Tensor& out, const Tensor& y, const Tensor& d, int64_t col0,
                           float scale) const override {
    by_dtype("add_columns_forward", y.dtype(), {&out, &d}, [&]<class T>(T) {
      cuda::add_columns_forward<T>(ptr<T>(out), ptr<T>(y), ptr<T>(d), rows_of(y), dim_of(y, -1), static_cast<int>(col0),
                                   dim_of(d, -1), scale, stream());
    });
  }
  void add_columns_backward(const Tensor& dy, const Tensor& dd, const Tensor& dout, int64_t col0,
                            float scale) const override {
    by_dtype("add_columns_backward", dout.dtype(), {&dy, &dd}, [&]<class T>(T) {
      cuda::add_columns_backward<T>(ptr<T>(dy), ptr<T>(dd), ptr<T>(dout), rows_of(dout), dim_of(dout, -1),
                                    static_cast<int>(col0), dd.defined() ? dim_of(dd, -1) : 0, scale, stream());
    });
  }
  void dropout_forward(const Tensor& out, const Tensor& x, const DropoutMask& m) const override {
    by_dtype("dropout_forward", x.dtype(), {&out}, [&]<class T>(T) {
      cuda::dropout_forward<T>(ptr<T>(out), ptr<T>(x), count_of(x), m.seed, m.threshold, m.scale, stream());
    });
  }
  void dropout_backward(const Tensor& dx, const Tensor& dout, const DropoutMask& m) const override {
    if (!dx.defined()) return;
    by_dtype("dropout_backward", dout.dtype(), {&dx}, [&]<class T>(T) {
      cuda::dropout_backward<T>(ptr<T>(dx), ptr<T>(dout), count_of(dout), m.seed, m.threshold, m.scale, stream());
    });
  }
  void crossentropy_forward(const Tensor& losses, const Tensor& lse, const std::vector<Tensor>& parts,
                            const Tensor& targets, int V, int ignore_index) const override {
    const Tensor& logits = one_part(parts);
    by_dtype("crossentropy_forward", logits.dtype(), {}, [&]<class T>(T) {
      cuda::crossentropy_forward<T>(stats(losses), stats(lse), ptr<T>(logits), ptr<int32_t>(targets), rows_of(logits),
                                    V, dim_of(logits, -1), ignore_index, stream());
    });
  }
  void crossentropy_backward(const std::vector<Tensor>& parts, const Tensor& lse, const Tensor& targets, float scale,
                             int V, int ignore_index) const override {
    const Tensor& logits = one_part(parts);
    by_dtype("crossentropy_backward", logits.dtype(), {}, [&]<class T>(T) {
      cuda::crossentropy_backward<T>(ptr<T>(logits), stats(lse), ptr<int32_t>(targets), scale, rows_of(logits), V,
                                     dim_of(logits, -1), ignore_index, stream());
    });
  }

  void cast(const Tensor& out, const Tensor& in) const override {
    cuda::cast(out.device_ptr(), out.dtype(), in.device_ptr(), in.dtype(), count_of(in), stream());
  }
  void accumulate(const Tensor& dst, const Tensor& src) const override {
    by_dtype("accumulate", dst.dtype(), {&src},
             [&]<class T>(T) { cuda::residual_forward<T>(ptr<T>(dst), ptr<T>(dst), ptr<T>(src), count_of(dst), stream()); });
  }
  double sum_squares(const std::vector<Tensor>& xs) const override {
    if (xs.empty()) return 0.0;
    // One double that every tensor's sum is added to in order, and kSumSquaresScratch partials
    // the calls reuse one after another on the stream, in one block of the cache.
    const Tensor buf = scratch_bytes(xs[0], (1 + cuda::kSumSquaresScratch) * sizeof(double));
    buf.zero();
    double* sum = ptr<double>(buf);
    for (const Tensor& x : xs)
      by_dtype("sum_squares", x.dtype(), {},
               [&]<class T>(T) { cuda::sum_squares<T>(sum, ptr<T>(x), count_of(x), sum + 1, stream()); });
    double host = 0;
    xs[0].allocator().copy(&host, sum, sizeof host);
    return host;
  }
  bool any_nonfinite(const std::vector<Tensor>& xs) const override {
    if (xs.empty()) return false;
    const Tensor flag = Tensor::zeros({1}, DType::i32, MemCategory::activations, xs[0].allocator());
    for (const Tensor& x : xs)
      by_dtype("any_nonfinite", x.dtype(), {},
               [&]<class T>(T) { cuda::any_nonfinite<T>(ptr<int>(flag), ptr<T>(x), count_of(x), stream()); });
    int host = 0;
    xs[0].allocator().copy(&host, flag.device_ptr(), sizeof host);
    return host != 0;
  }
  void adamw_update(const Tensor& master, const Tensor& low, const Tensor& grads, const Tensor& m, const Tensor& v,
                    const AdamWArgs& a) const override {
    // The low-precision copy is written in the same pass when it has the gradients' dtype.
    const bool fused = low.defined() && low.dtype() == grads.dtype();
    by_dtype("adamw_update", grads.dtype(), {}, [&]<class T>(T) {
      cuda::adamw_update<T>(stats(master), fused ? ptr<T>(low) : nullptr, ptr<T>(grads), stats(m), stats(v),
                            count_of(master), a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.t, a.grad_scale, stream());
    });
    if (low.defined() && !fused) cast(low, master);
  }

 private:
  static const Tensor& one_part(const std::vector<Tensor>& parts) {
    if (parts.size() != 1)
      throw std::invalid_argument("cuda crossentropy: the logits come in " + std::to_string(parts.size()) +
                                  " column ranges; the CUDA kernel takes one (wte_units 1)");
    return parts[0];
  }
};

}  // namespace

const Backend* cuda_backend() {
  static const CudaBackend instance;
  return &instance;
}

}  // namespace zt
