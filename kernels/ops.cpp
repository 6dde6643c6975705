#include "kernels/ops.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.hpp"

namespace zt::ops {

namespace {

void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(op) + ": " + what);
}

// Only the CPU kernels exist so far; the CUDA twins plug in here, chosen by the tensors' device.
void require_cpu(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && t->device() != Device::cpu) throw std::invalid_argument(std::string(op) + ": no kernel for device cuda yet");
}

float* grad_ptr(const Tensor& t) { return t.requires_grad() ? t.ensure_grad().data<float>() : nullptr; }

Tensor activation(const Shape& s) { return Tensor::empty(s, DType::f32, MemCategory::activations); }

// An op records only when the tape records and some input wants a gradient.
bool tracks(const Tape& tape, std::initializer_list<const Tensor*> inputs) {
  if (!tape.recording()) return false;
  for (const Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

// The output's grad slot must exist before the backward closure captures the tensor.
Tensor output(bool track, const Shape& s) {
  Tensor t = activation(s);
  if (track) t.set_requires_grad(true, false);
  return t;
}

int rows_of(const Tensor& x) { return static_cast<int>(x.numel() / x.dim(-1)); }

}  // namespace

Tensor embedding(Tape& tape, const Tensor& tokens, const Tensor& wte, const Tensor& wpe, int64_t row0) {
  Tape::Timer timer(tape, "embedding");
  require_cpu("embedding", {&tokens, &wte, &wpe});
  require(tokens.ndim() == 2 && tokens.dtype() == DType::i32, "embedding", "tokens must be (B,T) i32");
  require(wte.defined() || wpe.defined(), "embedding", "needs wte or wpe");
  const Tensor& table = wte.defined() ? wte : wpe;
  const int B = static_cast<int>(tokens.dim(0)), T = static_cast<int>(tokens.dim(1)), C = static_cast<int>(table.dim(1));
  if (wpe.defined())
    require(T <= wpe.dim(0), "embedding",
            "sequence length " + std::to_string(T) + " exceeds max_seq_len " + std::to_string(wpe.dim(0)));
  const int32_t* tok = tokens.data<int32_t>();
  for (int64_t i = 0, n = tokens.numel(); i < n; ++i)  // the model checks the upper bound: wte may be a part
    require(tok[i] >= 0, "embedding", "token id " + std::to_string(tok[i]) + " is negative");
  const int rows = wte.defined() ? static_cast<int>(wte.dim(0)) : 0;
  const bool track = tracks(tape, {&wte, &wpe});
  Tensor out = output(track, {B, T, C});
  cpu::encoder_forward(out.data<float>(), tok, wte.defined() ? wte.data<float>() : nullptr,
                       wpe.defined() ? wpe.data<float>() : nullptr, B, T, C, static_cast<int>(row0), rows);
  if (track)
    tape.record("embedding", {out}, [out, tokens, wte, wpe, B, T, C, row0, rows] {
      cpu::encoder_backward(wte.defined() ? grad_ptr(wte) : nullptr, wpe.defined() ? grad_ptr(wpe) : nullptr,
                            out.grad().data<float>(), tokens.data<int32_t>(), B, T, C, static_cast<int>(row0), rows);
    });
  return out;
}

Tensor layernorm(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tape::Timer timer(tape, "layernorm");
  require_cpu("layernorm", {&x, &weight, &bias});
  const int C = static_cast<int>(x.dim(-1)), N = rows_of(x);
  require(weight.numel() == C && bias.numel() == C, "layernorm", "weight and bias must have C elements");
  const bool track = tracks(tape, {&x, &weight, &bias});
  Tensor out = output(track, x.shape());
  Tensor mean = activation({N}), rstd = activation({N});
  cpu::layernorm_forward(out.data<float>(), mean.data<float>(), rstd.data<float>(), x.data<float>(),
                         weight.data<float>(), bias.data<float>(), N, C);
  if (track) tape.record("layernorm", {out}, [out, x, weight, bias, mean, rstd, N, C] {
    cpu::layernorm_backward(grad_ptr(x), grad_ptr(weight), grad_ptr(bias), out.grad().data<float>(),
                            x.data<float>(), weight.data<float>(), mean.data<float>(), rstd.data<float>(), N, C);
  });
  return out;
}

Tensor linear(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tape::Timer timer(tape, "matmul");
  require_cpu("linear", {&x, &weight, &bias});
  const int C = static_cast<int>(x.dim(-1)), N = rows_of(x), OC = static_cast<int>(weight.dim(0));
  require(weight.ndim() == 2 && weight.dim(1) == C, "linear",
          "weight " + shape_str(weight.shape()) + " does not take input " + shape_str(x.shape()));
  require(!bias.defined() || bias.numel() == OC, "linear", "bias must have OC elements");
  Shape s = x.shape();
  s.back() = OC;
  const bool track = tracks(tape, {&x, &weight, &bias});
  Tensor out = output(track, s);
  cpu::matmul_forward(out.data<float>(), x.data<float>(), weight.data<float>(),
                      bias.defined() ? bias.data<float>() : nullptr, N, C, OC);
  if (track) tape.record("matmul", {out}, [out, x, weight, bias, N, C, OC] {
    cpu::matmul_backward(grad_ptr(x), grad_ptr(weight), bias.defined() ? grad_ptr(bias) : nullptr,
                         out.grad().data<float>(), x.data<float>(), weight.data<float>(), N, C, OC);
  });
  return out;
}

Tensor attention(Tape& tape, const Tensor& qkv, int n_head) {
  Tape::Timer timer(tape, "attention");
  require_cpu("attention", {&qkv});
  require(qkv.ndim() == 3 && qkv.dim(2) % 3 == 0, "attention", "qkv must be (B,T,3C)");
  const int B = static_cast<int>(qkv.dim(0)), T = static_cast<int>(qkv.dim(1)), C = static_cast<int>(qkv.dim(2) / 3);
  require(n_head > 0 && C % n_head == 0, "attention", "C must divide by the number of heads");
  const bool track = tracks(tape, {&qkv});
  Tensor out = output(track, {B, T, C});
  Tensor att = activation({B, n_head, T, T});
  cpu::attention_forward(out.data<float>(), att.data<float>(), qkv.data<float>(), B, T, C, n_head);
  if (track)
    tape.record("attention", {out}, [out, qkv, att, B, T, C, n_head] {
      cpu::attention_backward(grad_ptr(qkv), out.grad().data<float>(), qkv.data<float>(), att.data<float>(), B, T, C, n_head);
    });
  return out;
}

Tensor gelu(Tape& tape, const Tensor& x) {
  Tape::Timer timer(tape, "gelu");
  require_cpu("gelu", {&x});
  const bool track = tracks(tape, {&x});
  Tensor out = output(track, x.shape());
  cpu::gelu_forward(out.data<float>(), x.data<float>(), static_cast<size_t>(x.numel()));
  if (track)
    tape.record("gelu", {out}, [out, x] {
      cpu::gelu_backward(grad_ptr(x), x.data<float>(), out.grad().data<float>(), static_cast<size_t>(x.numel()));
    });
  return out;
}

Tensor add(Tape& tape, const Tensor& a, const Tensor& b) {
  Tape::Timer timer(tape, "residual");
  require_cpu("add", {&a, &b});
  require(a.shape() == b.shape(), "add", shape_str(a.shape()) + " + " + shape_str(b.shape()));
  const bool track = tracks(tape, {&a, &b});
  Tensor out = output(track, a.shape());
  cpu::residual_forward(out.data<float>(), a.data<float>(), b.data<float>(), static_cast<size_t>(a.numel()));
  if (track) tape.record("residual", {out}, [out, a, b] {
    cpu::residual_backward(grad_ptr(a), grad_ptr(b), out.grad().data<float>(), static_cast<size_t>(a.numel()));
  });
  return out;
}

// [Note: fused cross-entropy] d(logits) = (softmax - onehot) / count needs only the logits and
// each row's logsumexp, and nothing reads the logits after this op's backward (the head's matmul
// backward needs its input and weight, not its output). So the backward writes d(logits) over the
// logits and hands that memory to the tape as their gradient: one (B,T,Vp) buffer, not two.
Tensor cross_entropy(Tape& tape, const Tensor& logits, const Tensor& targets, int V, int ignore_index) {
  return cross_entropy(tape, std::vector<Tensor>{logits}, targets, V, ignore_index);
}

Tensor cross_entropy(Tape& tape, const std::vector<Tensor>& parts, const Tensor& targets, int V, int ignore_index) {
  Tape::Timer timer(tape, "crossentropy");
  require(!parts.empty(), "cross_entropy", "no logits");
  for (const Tensor& p : parts) require_cpu("cross_entropy", {&p});
  require_cpu("cross_entropy", {&targets});
  const int R = static_cast<int>(parts[0].dim(-1)), K = static_cast<int>(parts.size()), Vp = K * R,
            N = rows_of(parts[0]);
  std::vector<const float*> in;
  for (const Tensor& p : parts) {
    require(p.shape() == parts[0].shape(), "cross_entropy", "logit parts must have one shape");
    in.push_back(p.data<float>());
  }
  require(targets.numel() == N && targets.dtype() == DType::i32, "cross_entropy", "targets must be i32 with one per row");
  require(V >= 1 && V <= Vp, "cross_entropy", "V must be in [1, Vp]");
  const int32_t* tg = targets.data<int32_t>();
  for (int i = 0; i < N; ++i)
    require(tg[i] == ignore_index || (tg[i] >= 0 && tg[i] < V), "cross_entropy",
            "target " + std::to_string(tg[i]) + " outside [0, " + std::to_string(V) + ")");
  Tensor losses = activation({N}), lse = activation({N});
  const int counted = cpu::crossentropy_forward(losses.data<float>(), lse.data<float>(), in.data(), K, tg, N, V, Vp,
                                                ignore_index);
  double sum = 0.0;
  const float* l = losses.data<float>();
  for (int i = 0; i < N; ++i) sum += l[i];
  bool track = false;
  for (const Tensor& p : parts) track = track || tracks(tape, {&p});
  Tensor loss = output(track, {1});
  loss.data<float>()[0] = counted ? static_cast<float>(sum / counted) : 0.0f;
  if (track) tape.record("crossentropy", {loss}, [loss, parts, targets, lse, counted, N, V, Vp, ignore_index] {
    std::vector<float*> d;
    for (const Tensor& p : parts) {
      if (p.grad().defined()) throw std::logic_error("cross_entropy: logits already have a gradient");
      d.push_back(p.data<float>());
    }
    const float scale = counted ? loss.grad().data<float>()[0] / static_cast<float>(counted) : 0.0f;
    cpu::crossentropy_backward(d.data(), static_cast<int>(d.size()), lse.data<float>(), targets.data<int32_t>(), scale,
                               N, V, Vp, ignore_index);
    for (const Tensor& p : parts) p.bind_grad(p);
  });
  return loss;
}

}  // namespace zt::ops
