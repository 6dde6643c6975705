#include "models/model.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "kernels/backend.hpp"
#include "kernels/ops.hpp"
#include "models/init.hpp"

namespace zt {

std::string dim_text(double v) {
  char b[32];  // the shortest text that reads back as v
  return std::string(b, std::to_chars(b, b + sizeof b, v).ptr);
}

std::string dims_str(const ModelDims& d) {
  // GPT-2's six always; the rest where they differ from GPT-2's (derived widths, defaults), so a
  // GPT-2 model reads as it always did.
  const ModelDims gpt2 = gpt2_dims(d.max_seq_len, d.vocab_size, d.padded_vocab_size, d.n_layer, d.n_head, d.n_embd);
  std::string s;
  int i = 0;
  for_each_dim(
      [&](const char* name, const auto& v, const auto& g) {
        if (i++ >= kGpt2DimCount && v == g) return;
        s += (s.empty() ? "" : ", ") + std::string(name) + " " + dim_text(v);
      },
      d, gpt2);
  return s;
}

bool UnitLayout::frozen() const {
  return !params.empty() && std::none_of(params.begin(), params.end(), [](const ParamSpec& p) { return p.trainable; });
}

void add_param(UnitLayout& u, ParamSpec p) {
  p.offset = u.numel;
  u.numel += shape_numel(p.shape);
  u.params.push_back(std::move(p));
}

int fuse_last(UnitLayout& u, int count) {
  const int n = static_cast<int>(u.params.size());
  if (count < 1 || count > n) throw std::logic_error(u.name + ": cannot fuse " + std::to_string(count) + " parameters");
  const ParamSpec& first = u.params[size_t(n - count)];
  for (int i = n - count + 1; i < n; ++i) {
    const Shape& s = u.params[size_t(i)].shape;
    if (s.size() != first.shape.size() || !std::equal(s.begin() + 1, s.end(), first.shape.begin() + 1))
      throw std::logic_error(u.name + ": fused parameters " + first.name + " and " + u.params[size_t(i)].name +
                             " differ past their rows");
  }
  u.fused.push_back({n - count, count});
  return static_cast<int>(u.fused.size()) - 1;
}

int row_range_units(int rows, int64_t cols, int64_t max_numel) {
  for (int k = 1; k < rows; ++k)
    if (rows % k == 0 && int64_t{rows / k} * cols <= max_numel) return k;
  return rows;
}

int64_t row_range_rows(const std::string& what, int units, int rows) {
  if (units < 1 || rows % units)
    throw std::invalid_argument(what + " " + std::to_string(units) + " must be >= 1 and divide padded_vocab_size " +
                                std::to_string(rows));
  return rows / units;
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
    : arch_(std::move(arch)), dims_(derive_dims(d)), layout_(std::move(layout)), embedding_units_(embedding_units),
      base_units_(static_cast<int>(layout_.size())), adapters_(layout_.size()), bound_(layout_.size()),
      fused_(layout_.size()) {}

void Model::apply_lora(const LoraConfig& c) {
  if (lora_.enabled()) throw std::logic_error(arch_ + ": LoRA applied twice");
  int tensors = 0;
  for (const UnitLayout& u : layout_)
    for (const ParamSpec& p : u.params) tensors = std::max(tensors, p.tensor + 1);
  adapters_ = add_lora_units(layout_, c, arch_, tensors);
  lora_ = c;
  bound_.resize(layout_.size());
  fused_.resize(layout_.size());
}

LoraTerms Model::lora_terms(int u, int first, int count) const {
  LoraTerms terms;
  if (u >= base_units_) return terms;
  const std::vector<ParamSpec>& ps = layout_[size_t(u)].params;
  for (const LoraAdapter& a : adapters_[size_t(u)]) {
    if (a.param < first || a.param >= first + count) continue;
    int64_t col0 = 0;
    for (int i = first; i < a.param; ++i) col0 += ps[size_t(i)].shape[0];
    // Each adapter's mask its own, and a new one each pass ([Note: dropout masks]).
    const uint64_t seed = mix_seed(mix_seed(dropout_stream_ ^ passes_) ^ (uint64_t(a.unit) << 32 | uint64_t(a.param)));
    terms.push_back({param(a.unit, a.a), param(a.unit, a.b), col0, lora_.scale(), static_cast<float>(lora_.dropout), seed});
  }
  return terms;
}

int64_t Model::num_params() const {
  int64_t n = 0;
  for (const UnitLayout& u : layout_) n += u.numel;
  return n;
}

int64_t Model::num_trainable_params() const {
  int64_t n = 0;
  for (const UnitLayout& u : layout_)
    if (!u.frozen()) n += u.numel;
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
  std::vector<Tensor>& fs = fused_[u];
  fs.clear();
  for (const FusedParam& f : lay.fused) {
    const ParamSpec& first = lay.params[size_t(f.first)];
    Shape s = first.shape;
    for (int i = 1; i < f.count; ++i) s[0] += lay.params[size_t(f.first + i)].shape[0];
    Tensor t = params.view(first.offset, s);
    if (grads.defined()) {
      t.set_requires_grad(true);
      t.bind_grad(grads.view(first.offset, s));
    }
    fs.push_back(std::move(t));
  }
}

void Model::merge_lora(int u, float* params, const std::function<const float*(int unit)>& adapter) const {
  if (u >= base_units_) return;
  const float scale = lora_.scale();
  for (const LoraAdapter& a : adapters_[size_t(u)]) {
    const std::vector<ParamSpec>& ad = layout_[size_t(a.unit)].params;
    const ParamSpec& w = layout_[size_t(u)].params[size_t(a.param)];
    const float* unit = adapter(a.unit);
    const float *A = unit + ad[size_t(a.a)].offset, *B = unit + ad[size_t(a.b)].offset;
    const int64_t OC = w.shape[0], C = w.shape[1], r = ad[size_t(a.a)].shape[0];
    float* W = params + w.offset;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t k = 0; k < r; ++k) {
        const float b = scale * B[o * r + k];
        for (int64_t c = 0; c < C; ++c) W[o * C + c] += b * A[k * C + c];
      }
  }
}

void Model::init(uint64_t seed) {
  for (int u = 0; u < num_units(); ++u) init_unit(u, seed);
}

void Model::init_base_unit(int u, uint64_t seed) {
  const UnitLayout& lay = layout_.at(size_t(u));
  for (size_t i = 0; i < lay.params.size(); ++i) {
    const ParamSpec& p = lay.params[i];
    const Tensor& t = param(u, static_cast<int>(i));
    if (p.init_std <= 0.0f) {
      t.fill(p.init_value);
      continue;
    }
    const int64_t cols = p.shape.size() > 1 ? shape_numel(p.shape) / p.shape[0] : 1;
    const int64_t rows = std::clamp<int64_t>(p.hf_rows - p.row0, 0, p.shape[0]);  // padded rows stay zero
    // Drawn in f32 on the host; a device or 16-bit tensor takes the values rounded once. A row
    // range draws its part of the whole tensor's stream, so every cut gives one model.
    const bool direct = t.device() == Device::cpu && t.dtype() == DType::f32;
    const Tensor host = direct ? t : Tensor::empty(p.shape, DType::f32, MemCategory::other);
    host.zero();
    fill_normal(host.data<float>(), static_cast<size_t>(rows * cols), p.init_std, seed, static_cast<uint64_t>(p.tensor),
                static_cast<size_t>(p.row0 * cols));
    if (!direct) store_f32(t, host);
  }
}

void Model::init_unit(int u, uint64_t seed) {
  if (u < base_units_) return init_base_unit(u, seed);
  const UnitLayout& lay = layout_.at(size_t(u));
  const Tensor host = Tensor::empty({lay.numel}, DType::f32, MemCategory::other);
  init_lora_unit(lay, lora_, seed, host.data<float>());
  for (size_t i = 0; i < lay.params.size(); ++i)
    store_f32(param(u, static_cast<int>(i)), host.view(lay.params[i].offset, lay.params[i].shape));
}

bool Model::unit_trains(int u) const { return !layout_[size_t(u)].frozen() || !adapters_[size_t(u)].empty(); }

Tensor Model::run_block(Tape& tape, int layer, const Tensor& x) {
  const int u = block_unit(layer);
  if (!checkpointing_.checkpoints(layer)) {
    tape.begin_unit(u);
    Tensor y = block(tape, layer, x);
    tape.end_unit(u);
    return y;
  }
  const CheckpointOptions o{checkpointing_.mode == ActivationCheckpointing::Mode::selective_op,
                            checkpointing_.cpu_checkpointing, x.requires_grad() || unit_trains(u)};
  // The recompute runs during this pass's backward, before the next forward counts a pass: its
  // LoRA dropout masks are this pass's, drawn again.
  const uint64_t pass = passes_;
  return tape.checkpoint(u, x, o, [this, layer, pass](Tape& t, const Tensor& in) {
    if (passes_ != pass) throw std::logic_error(arch_ + ": block " + std::to_string(layer) + " recomputed in another pass");
    return block(t, layer, in);
  });
}

std::vector<Tensor> Model::logit_parts(Tape& tape, const Tensor& tokens) {
  Tensor x = embed(tape, tokens);
  for (int l = 0; l < dims_.n_layer; ++l) x = run_block(tape, l, x);
  return head(tape, x);
}

Tensor Model::forward(Tape& tape, const Tensor& tokens, const Tensor& targets) {
  if (tape.recording()) ++passes_;
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
