#include "kernels/ops.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.hpp"

namespace zt::ops {

namespace {

void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(op) + ": " + what);
}

// The backend of the tensors' device; every defined one must be on it.
const Backend& backend_of(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (!first) first = t;
    require(t->device() == first->device(), op,
            "tensors on " + std::string(device_name(first->device())) + " and " + std::string(device_name(t->device())));
  }
  const Backend& b = backend(first ? first->device() : Device::cpu);
  if (first) require(b.computes_in(first->dtype()), op, "no kernels for dtype " + std::string(dtype_name(first->dtype())) +
                                                            " on " + std::string(device_name(b.device())));
  return b;
}

// The gradient of t, created zeroed beside it on first use; undefined when t wants none.
Tensor grad_of(const Tensor& t) { return t.requires_grad() ? t.ensure_grad() : Tensor(); }

// An activation beside `like` (same device and dtype unless given).
Tensor activation(const Tensor& like, const Shape& s) {
  return Tensor::empty(s, like.dtype(), MemCategory::activations, like.allocator());
}
Tensor statistic(const Tensor& like, const Shape& s) {
  return Tensor::empty(s, DType::f32, MemCategory::activations, like.allocator());
}

// An op records only when the tape records and some input wants a gradient.
bool tracks(const Tape& tape, std::initializer_list<const Tensor*> inputs) {
  if (!tape.recording()) return false;
  for (const Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

// The output's grad slot must exist before the backward closure captures the tensor.
Tensor output(bool track, const Tensor& like, const Shape& s) {
  Tensor t = activation(like, s);
  if (track) t.set_requires_grad(true, false);
  return t;
}

// An output kept by a checkpointed unit's first forward ([Note: activation checkpointing] in
// tensor/tape.hpp), with a grad slot of its own when the recompute records.
Tensor reuse(const Tensor& kept, bool track) {
  Tensor t = kept;
  if (track) t.set_requires_grad(true, false);
  return t;
}
// The op's output i when this is its unit's recompute, else undefined: the op computes it.
Tensor reused(Tape& tape, bool track, size_t i) {
  const std::vector<Tensor> kept = tape.kept();
  return kept.empty() ? Tensor() : reuse(kept.at(i), track);
}

}  // namespace

Tensor embedding(Tape& tape, const Tensor& tokens, const Tensor& wte, const Tensor& wpe, int64_t row0,
                 const Tensor& grad_tokens) {
  Tape::Timer timer(tape, "embedding");
  require(tokens.ndim() == 2 && tokens.dtype() == DType::i32, "embedding", "tokens must be (B,T) i32");
  require(wte.defined() || wpe.defined(), "embedding", "needs wte or wpe");
  const Backend& be = backend_of("embedding", {&wte, &wpe});
  const Tensor& table = wte.defined() ? wte : wpe;
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = table.dim(1);
  if (wpe.defined())
    require(T <= wpe.dim(0), "embedding",
            "sequence length " + std::to_string(T) + " exceeds max_seq_len " + std::to_string(wpe.dim(0)));
  if (tokens.device() == Device::cpu) {  // ids already on a device were checked before they went there
    const int32_t* tok = tokens.data<int32_t>();
    for (int64_t i = 0, n = tokens.numel(); i < n; ++i)  // the model checks the upper bound: wte may be a part
      require(tok[i] >= 0, "embedding", "token id " + std::to_string(tok[i]) + " is negative");
  }
  require(!grad_tokens.defined() || (grad_tokens.shape() == tokens.shape() && grad_tokens.dtype() == DType::i32),
          "embedding", "grad_tokens must be (B,T) i32 like tokens");
  const Tensor ids = tokens.on(table.allocator(), MemCategory::activations);
  const bool track = tracks(tape, {&wte, &wpe});
  Tensor out = output(track, table, {B, T, C});
  be.encoder_forward(out, ids, wte, wpe, static_cast<int>(row0));
  if (track) {
    const Tensor scatter = grad_tokens.defined() ? grad_tokens.on(table.allocator(), MemCategory::activations) : ids;
    tape.record("embedding", {out}, [&be, out, scatter, wte, wpe, row0] {
      be.encoder_backward(grad_of(wte), grad_of(wpe), out.grad(), scatter, static_cast<int>(row0));
    });
  }
  return out;
}

Tensor layernorm(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tape::Timer timer(tape, "layernorm");
  const Backend& be = backend_of("layernorm", {&x, &weight, &bias});
  const int64_t C = x.dim(-1), N = rows_of(x);
  require(weight.numel() == C && bias.numel() == C, "layernorm", "weight and bias must have C elements");
  const bool track = tracks(tape, {&x, &weight, &bias});
  Tensor out = output(track, x, x.shape());
  Tensor mean = statistic(x, {N}), rstd = statistic(x, {N});
  be.layernorm_forward(out, mean, rstd, x, weight, bias);
  if (track) tape.record("layernorm", {out}, [&be, out, x, weight, bias, mean, rstd] {
    be.layernorm_backward(grad_of(x), grad_of(weight), grad_of(bias), out.grad(), x, weight, mean, rstd);
  });
  return out;
}

Tensor rmsnorm(Tape& tape, const Tensor& x, const Tensor& weight, float eps, float offset) {
  Tape::Timer timer(tape, "rmsnorm");
  const Backend& be = backend_of("rmsnorm", {&x, &weight});
  require(weight.numel() == x.dim(-1), "rmsnorm", "weight must have C elements");
  require(eps > 0.0f, "rmsnorm", "eps must be positive");
  require(std::isfinite(offset), "rmsnorm", "the weight's offset must be finite");
  const bool track = tracks(tape, {&x, &weight});
  Tensor out = output(track, x, x.shape());
  Tensor rstd = statistic(x, {rows_of(x)});
  be.rmsnorm_forward(out, rstd, x, weight, eps, offset);
  if (track) tape.record("rmsnorm", {out}, [&be, out, x, weight, rstd, offset] {
    be.rmsnorm_backward(grad_of(x), grad_of(weight), out.grad(), x, weight, rstd, offset);
  });
  return out;
}

Tensor linear(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tape::Timer timer(tape, "matmul");
  const Backend& be = backend_of("linear", {&x, &weight, &bias});
  const int64_t C = x.dim(-1), OC = weight.dim(0);
  require(weight.ndim() == 2 && weight.dim(1) == C, "linear",
          "weight " + shape_str(weight.shape()) + " does not take input " + shape_str(x.shape()));
  require(!bias.defined() || bias.numel() == OC, "linear", "bias must have OC elements");
  Shape s = x.shape();
  s.back() = OC;
  const bool track = tracks(tape, {&x, &weight, &bias});
  Tensor out = reused(tape, track, 0);
  if (!out.defined()) {
    out = output(track, x, s);
    be.matmul_forward(out, x, weight, bias);
    tape.keep({out});
  }
  if (track) tape.record("matmul", {out}, [&be, out, x, weight, bias] {
    be.matmul_backward(grad_of(x), grad_of(weight), grad_of(bias), out.grad(), x, weight);
  });
  return out;
}

Tensor attention(Tape& tape, const Tensor& qkv, int n_head, int n_kv_head, AttentionKernel kernel,
                 const AttentionOptions& options) {
  Tape::Timer timer(tape, "attention");
  const Backend& be = backend_of("attention", {&qkv});
  require(n_head > 0 && n_kv_head > 0 && n_head % n_kv_head == 0, "attention",
          std::to_string(n_head) + " query heads do not group over " + std::to_string(n_kv_head) + " key/value heads");
  const int64_t heads = n_head + 2 * int64_t{n_kv_head};
  require(qkv.ndim() == 3 && qkv.dim(2) % heads == 0, "attention",
          "qkv " + shape_str(qkv.shape()) + " is not (B,T,(" + std::to_string(n_head) + "+2*" + std::to_string(n_kv_head) +
              ")*head_dim)");
  require(std::isfinite(options.scale) && options.scale >= 0.0f, "attention",
          "the scale must be positive (0: 1/sqrt(head_dim)), not " + std::to_string(options.scale));
  require(options.window >= 0, "attention",
          "the sliding window must be positive (0: none), not " + std::to_string(options.window));
  const int64_t B = qkv.dim(0), T = qkv.dim(1), hs = qkv.dim(2) / heads;
  const bool track = tracks(tape, {&qkv});
  const std::vector<Tensor> kept = tape.kept();
  Tensor out, saved;
  if (!kept.empty()) {
    out = reuse(kept[0], track), saved = kept[1];
  } else {
    out = output(track, qkv, {B, T, n_head * hs});
    saved = be.attention_forward(out, qkv, n_head, n_kv_head, kernel, options);
    tape.keep({out, saved});
  }
  if (track)
    tape.record("attention", {out}, [&be, out, qkv, saved, n_head, n_kv_head, kernel, options] {
      be.attention_backward(grad_of(qkv), out.grad(), qkv, out, saved, n_head, n_kv_head, kernel, options);
    });
  return out;
}

Tensor gelu(Tape& tape, const Tensor& x) {
  Tape::Timer timer(tape, "gelu");
  const Backend& be = backend_of("gelu", {&x});
  const bool track = tracks(tape, {&x});
  Tensor out = output(track, x, x.shape());
  be.gelu_forward(out, x);
  if (track) tape.record("gelu", {out}, [&be, out, x] { be.gelu_backward(grad_of(x), x, out.grad()); });
  return out;
}

namespace {

// A gated linear unit, [gate | up] -> act(gate) * up, through the backend's forward and backward.
template <class Fwd, class Bwd>
Tensor glu(Tape& tape, const Tensor& x, const char* op, Fwd forward, Bwd backward) {
  Tape::Timer timer(tape, op);
  const Backend& be = backend_of(op, {&x});
  require(x.ndim() >= 1 && x.dim(-1) % 2 == 0, op,
          "the last dimension holds [gate | up] and must be even, not " + std::to_string(x.dim(-1)));
  Shape s = x.shape();
  s.back() /= 2;
  const bool track = tracks(tape, {&x});
  Tensor out = output(track, x, s);
  (be.*forward)(out, x);
  if (track) tape.record(op, {out}, [&be, out, x, backward] { (be.*backward)(grad_of(x), x, out.grad()); });
  return out;
}

}  // namespace

Tensor swiglu(Tape& tape, const Tensor& x) {
  return glu(tape, x, "swiglu", &Backend::swiglu_forward, &Backend::swiglu_backward);
}

Tensor geglu(Tape& tape, const Tensor& x) {
  return glu(tape, x, "geglu", &Backend::geglu_forward, &Backend::geglu_backward);
}

Tensor scale(Tape& tape, const Tensor& x, float s) {
  Tape::Timer timer(tape, "scale");
  const Backend& be = backend_of("scale", {&x});
  require(x.ndim() >= 1, "scale", "x must have a dimension");
  require(std::isfinite(s), "scale", "the factor must be finite, not " + std::to_string(s));
  const bool track = tracks(tape, {&x});
  Tensor out = output(track, x, x.shape());
  // out = 0 + s * x and dx += s * dout: add_columns' backward over all the columns is a scaled
  // accumulate (dd += scale * dout), on every backend and in every dtype, so no kernel of its own.
  out.zero();
  be.add_columns_backward(Tensor(), out, x, 0, s);
  if (track)
    tape.record("scale", {out}, [&be, out, x, s] { be.add_columns_backward(Tensor(), grad_of(x), out.grad(), 0, s); });
  return out;
}

Tensor rope(Tape& tape, const Tensor& qkv, const Tensor& inv_freq, int n_head, int n_kv_head) {
  Tape::Timer timer(tape, "rope");
  const Backend& be = backend_of("rope", {&qkv});
  require(n_head > 0 && n_kv_head > 0, "rope", "needs at least one query and one key/value head");
  const int64_t heads = n_head + 2 * int64_t{n_kv_head};
  require(qkv.ndim() == 3 && qkv.dim(2) % heads == 0 && (qkv.dim(2) / heads) % 2 == 0, "rope",
          "qkv " + shape_str(qkv.shape()) + " is not (B,T,(" + std::to_string(n_head) + "+2*" +
              std::to_string(n_kv_head) + ")*head_dim) with an even head_dim");
  // The meta device (the estimate) takes host tensors as its own, as it takes the tokens.
  require((inv_freq.device() == qkv.device() || qkv.device() == Device::meta) && inv_freq.dtype() == DType::f32 &&
              inv_freq.numel() == qkv.dim(2) / heads / 2,
          "rope", "inv_freq must be head_dim/2 f32 values on the device of qkv");
  const bool track = tracks(tape, {&qkv});
  Tensor out = output(track, qkv, qkv.shape());
  be.rope_forward(out, qkv, inv_freq, n_head, n_kv_head);
  if (track) tape.record("rope", {out}, [&be, out, inv_freq, n_head, n_kv_head, qkv] {
    be.rope_backward(grad_of(qkv), out.grad(), inv_freq, n_head, n_kv_head);
  });
  return out;
}

Tensor add(Tape& tape, const Tensor& a, const Tensor& b) {
  Tape::Timer timer(tape, "residual");
  const Backend& be = backend_of("add", {&a, &b});
  require(a.shape() == b.shape(), "add", shape_str(a.shape()) + " + " + shape_str(b.shape()));
  const bool track = tracks(tape, {&a, &b});
  Tensor out = output(track, a, a.shape());
  be.residual_forward(out, a, b);
  if (track) tape.record("residual", {out}, [&be, out, a, b] { be.residual_backward(grad_of(a), grad_of(b), out.grad()); });
  return out;
}

Tensor add_columns(Tape& tape, const Tensor& y, const Tensor& d, int64_t col0, float scale) {
  Tape::Timer timer(tape, "add_columns");
  const Backend& be = backend_of("add_columns", {&y, &d});
  require(y.ndim() >= 1 && d.ndim() == y.ndim() && rows_of(d) == rows_of(y) && col0 >= 0 && col0 + d.dim(-1) <= y.dim(-1),
          "add_columns", shape_str(d.shape()) + " does not fit into " + shape_str(y.shape()) + " from column " +
                             std::to_string(col0));
  const bool track = tracks(tape, {&y, &d});
  // In place: a projection's whole output is neither copied forward nor its gradient backward.
  // Kept by selective checkpointing, as the projection is, so its recompute does not add twice.
  Tensor out = reused(tape, track, 0);
  if (!out.defined()) {
    out = y.view(0, y.shape());
    if (track) out.set_requires_grad(true, false);
    be.add_columns_forward(out, y, d, col0, scale);
    tape.keep({out});
  }
  if (track) tape.record("add_columns", {out}, [&be, out, y, d, col0, scale] {
    Tensor dy;
    if (y.requires_grad() && !y.is_leaf() && !y.grad().defined()) y.bind_grad(out.grad());  // d(y) is d(out)
    else dy = grad_of(y);
    be.add_columns_backward(dy, grad_of(d), out.grad(), col0, scale);
  });
  return out;
}

Tensor narrow(Tape& tape, const Tensor& x, int64_t col0, int64_t n) {
  Tape::Timer timer(tape, "narrow");
  const Backend& be = backend_of("narrow", {&x});
  require(x.ndim() >= 1 && col0 >= 0 && n >= 1 && col0 + n <= x.dim(-1), "narrow",
          "columns [" + std::to_string(col0) + ", " + std::to_string(col0 + n) + ") of " + shape_str(x.shape()));
  Shape s = x.shape();
  s.back() = n;
  const bool track = tracks(tape, {&x});
  Tensor out = output(track, x, s);
  out.zero();
  be.add_columns_backward(Tensor(), out, x, col0, 1.0f);  // out += x's columns: a copy
  if (track) tape.record("narrow", {out}, [&be, out, x, col0] {
    const Tensor dx = grad_of(x);
    be.add_columns_forward(dx, dx, out.grad(), col0, 1.0f);
  });
  return out;
}

Tensor concat(Tape& tape, const std::vector<Tensor>& parts) {
  Tape::Timer timer(tape, "concat");
  require(!parts.empty(), "concat", "no parts");
  const Tensor& first = parts[0];
  const Backend& be = backend_of("concat", {&first});
  auto leading = [](Shape s) {
    s.pop_back();
    return s;
  };
  Shape s = first.shape();
  s.back() = 0;
  bool track = false;
  for (const Tensor& p : parts) {
    backend_of("concat", {&first, &p});
    require(p.ndim() == first.ndim() && leading(p.shape()) == leading(first.shape()) && p.dtype() == first.dtype(),
            "concat", shape_str(p.shape()) + " does not stand beside " + shape_str(first.shape()));
    s.back() += p.dim(-1);
    track = track || tracks(tape, {&p});
  }
  Tensor out = output(track, first, s);
  out.zero();
  std::vector<int64_t> col0;
  for (int64_t c = 0; const Tensor& p : parts) col0.push_back(c), be.add_columns_forward(out, out, p, c, 1.0f), c += p.dim(-1);
  if (track) tape.record("concat", {out}, [&be, out, parts, col0] {
    for (size_t i = 0; i < parts.size(); ++i) be.add_columns_backward(Tensor(), grad_of(parts[i]), out.grad(), col0[i], 1.0f);
  });
  return out;
}

Tensor reshape(Tape& tape, const Tensor& x, const Shape& shape) {
  require(shape_numel(shape) == x.numel(), "reshape", shape_str(x.shape()) + " as " + shape_str(shape));
  const bool track = tracks(tape, {&x});
  Tensor out = x.view(0, shape);
  if (!track) return out;
  out.set_requires_grad(true, false);
  tape.record("reshape", {out}, [out, x] {
    const Tensor g = out.grad().view(0, x.shape());
    // A gradient not yet made is the output's, unmoved; else it is added.
    if (!x.is_leaf() && !x.grad().defined()) x.bind_grad(g);
    else backend_of("reshape", {&x}).accumulate(grad_of(x), g);
  });
  return out;
}

Tensor dropout(Tape& tape, const Tensor& x, float p, uint64_t seed) {
  if (p == 0.0f || !tape.training()) return x;
  Tape::Timer timer(tape, "dropout");
  const Backend& be = backend_of("dropout", {&x});
  require(p > 0.0f && p < 1.0f, "dropout", "p must be in [0, 1), got " + std::to_string(p));
  const DropoutMask mask = dropout_mask(p, seed);
  const bool track = tracks(tape, {&x});
  Tensor out = output(track, x, x.shape());
  be.dropout_forward(out, x, mask);
  if (track) tape.record("dropout", {out}, [&be, out, x, mask] { be.dropout_backward(grad_of(x), out.grad(), mask); });
  return out;
}

// [Note: fused cross-entropy] d(logits) = (softmax - onehot) / count needs only the logits and
// each row's logsumexp, and nothing reads the logits after this op's backward (the head's matmul
// backward needs its input and weight, not its output). So the backward writes d(logits) over the
// logits and hands that memory to the tape as their gradient: one (B,T,Vp) buffer, not two.
//
// The targets are checked and counted on the host, and the per-row losses come back to the host
// and are summed there in order, as llm.c does: the mean is the same number on every device,
// and the loss is a host scalar, so the backward's seed needs no device round trip.
Tensor cross_entropy(Tape& tape, const Tensor& logits, const Tensor& targets, int V, int ignore_index) {
  return cross_entropy(tape, std::vector<Tensor>{logits}, targets, V, ignore_index);
}

Tensor cross_entropy(Tape& tape, const std::vector<Tensor>& parts, const Tensor& targets, int V, int ignore_index) {
  Tape::Timer timer(tape, "crossentropy");
  require(!parts.empty(), "cross_entropy", "no logits");
  const Backend& be = backend_of("cross_entropy", {&parts[0]});
  for (const Tensor& p : parts) {
    backend_of("cross_entropy", {&parts[0], &p});
    require(p.shape() == parts[0].shape() && p.dtype() == parts[0].dtype(), "cross_entropy",
            "logit parts must have one shape and dtype");
  }
  const int64_t R = parts[0].dim(-1), K = static_cast<int64_t>(parts.size()), Vp = K * R, N = rows_of(parts[0]);
  require(targets.numel() == N && targets.dtype() == DType::i32, "cross_entropy", "targets must be i32 with one per row");
  require(V >= 1 && V <= Vp, "cross_entropy", "V must be in [1, Vp]");
  const Tensor host_targets = targets.on(cpu_allocator(), MemCategory::activations);
  const int32_t* tg = host_targets.data<int32_t>();
  int64_t counted = 0;
  for (int64_t i = 0; i < N; ++i) {
    require(tg[i] == ignore_index || (tg[i] >= 0 && tg[i] < V), "cross_entropy",
            "target " + std::to_string(tg[i]) + " outside [0, " + std::to_string(V) + ")");
    counted += tg[i] != ignore_index;
  }
  const Tensor ids = targets.on(parts[0].allocator(), MemCategory::activations);
  Tensor losses = statistic(parts[0], {N}), lse = statistic(parts[0], {N});
  be.crossentropy_forward(losses, lse, parts, ids, V, ignore_index);
  const Tensor host_losses = losses.on(cpu_allocator(), MemCategory::activations);
  double sum = 0.0;
  const float* l = host_losses.data<float>();
  for (int64_t i = 0; i < N; ++i) sum += l[i];
  bool track = false;
  for (const Tensor& p : parts) track = track || tracks(tape, {&p});
  Tensor loss = Tensor::empty({1}, DType::f32, MemCategory::activations);
  if (track) loss.set_requires_grad(true, false);
  loss.data<float>()[0] = counted ? static_cast<float>(sum / static_cast<double>(counted)) : 0.0f;
  if (track) tape.record("crossentropy", {loss}, [&be, loss, parts, ids, lse, counted, V, ignore_index] {
    for (const Tensor& p : parts)
      if (p.grad().defined()) throw std::logic_error("cross_entropy: logits already have a gradient");
    const float scale = counted ? loss.grad().data<float>()[0] / static_cast<float>(counted) : 0.0f;
    be.crossentropy_backward(parts, lse, ids, scale, V, ignore_index);
    for (const Tensor& p : parts) p.bind_grad(p);
  });
  return loss;
}

}  // namespace zt::ops
