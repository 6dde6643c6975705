#include "models/model.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/backend.hpp"
#include "kernels/ops.hpp"

namespace zt {

std::string dims_str(const ModelDims& d) {
  return "n_layer " + std::to_string(d.n_layer) + ", n_head " + std::to_string(d.n_head) + ", n_embd " +
         std::to_string(d.n_embd) + ", vocab_size " + std::to_string(d.vocab_size) + ", padded_vocab_size " +
         std::to_string(d.padded_vocab_size) + ", max_seq_len " + std::to_string(d.max_seq_len);
}

void add_param(UnitLayout& u, ParamSpec p) {
  p.offset = u.numel;
  u.numel += shape_numel(p.shape);
  u.params.push_back(std::move(p));
}

void check_tokens(const Tensor& host_tokens, int padded_vocab_size) {
  const int32_t* tok = host_tokens.data<int32_t>();
  for (int64_t i = 0, n = host_tokens.numel(); i < n; ++i)
    if (tok[i] < 0 || tok[i] >= padded_vocab_size)
      throw std::invalid_argument("embedding: token id " + std::to_string(tok[i]) + " outside [0, " +
                                  std::to_string(padded_vocab_size) + ")");
}

void store_f32(const Tensor& t, const Tensor& host) {
  if (t.dtype() == DType::f32) return t.copy_from(host);
  const Tensor low = Tensor::empty(t.shape(), t.dtype(), MemCategory::other);
  backend(Device::cpu).cast(low, host);
  t.copy_from(low);
}

Tensor host_f32(const Tensor& t) {
  if (t.device() == Device::cpu && t.dtype() == DType::f32) return t;
  const Tensor here = t.on(cpu_allocator(), MemCategory::other);
  if (here.dtype() == DType::f32) return here;
  Tensor wide = Tensor::empty(t.shape(), DType::f32, MemCategory::other);
  backend(Device::cpu).cast(wide, here);
  return wide;
}

Model::Model(std::string arch, const ModelDims& d, std::vector<UnitLayout> layout, int embedding_units)
    : arch_(std::move(arch)), dims_(d), layout_(std::move(layout)), embedding_units_(embedding_units),
      bound_(layout_.size()) {}

int64_t Model::num_params() const {
  int64_t n = 0;
  for (const UnitLayout& u : layout_) n += u.numel;
  return n;
}

void Model::bind_unit(int u, const Tensor& params, const Tensor& grads) {
  const UnitLayout& lay = layout_.at(u);
  if (params.numel() != lay.numel || (grads.defined() && grads.numel() != lay.numel))
    throw std::invalid_argument(arch_ + ": buffer for unit " + lay.name + " must hold " + std::to_string(lay.numel) +
                                " elements");
  std::vector<Tensor>& ts = bound_[u];
  ts.clear();
  for (const ParamSpec& p : lay.params) {
    Tensor t = params.view(p.offset, p.shape);
    if (grads.defined()) {
      t.set_requires_grad(true);
      t.bind_grad(grads.view(p.offset, p.shape));
    }
    ts.push_back(std::move(t));
  }
}

void Model::init(uint64_t seed) {
  for (int u = 0; u < num_units(); ++u) init_unit(u, seed);
}

std::vector<Tensor> Model::logit_parts(Tape& tape, const Tensor& tokens) {
  Tensor x = embed(tape, tokens);
  for (int l = 0; l < dims_.n_layer; ++l) {
    const int u = block_unit(l);
    tape.begin_unit(u);
    x = block(tape, l, x);
    tape.end_unit(u);
  }
  return head(tape, x);
}

Tensor Model::forward(Tape& tape, const Tensor& tokens, const Tensor& targets) {
  return ops::cross_entropy(tape, logit_parts(tape, tokens), targets, dims_.vocab_size);
}

Tensor Model::logits(Tape& tape, const Tensor& tokens) {
  Tape::NoGrad no_grad(tape);
  std::vector<Tensor> parts = logit_parts(tape, tokens);
  for (Tensor& p : parts) p = host_f32(p);
  if (parts.size() == 1) return parts[0];
  const int64_t R = parts[0].dim(-1), N = parts[0].numel() / R, K = static_cast<int64_t>(parts.size());
  Shape s = parts[0].shape();
  s.back() = K * R;
  Tensor out = Tensor::empty(s, DType::f32, MemCategory::activations);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = 0; i < N; ++i)
      std::copy_n(parts[k].data<float>() + i * R, R, out.data<float>() + (i * K + k) * R);
  return out;
}

}  // namespace zt
