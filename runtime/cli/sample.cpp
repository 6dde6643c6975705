#include "runtime/cli/sample.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <stdexcept>

namespace zt {

std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt, const SampleOptions& opt,
                              const std::function<void(int32_t)>& emit) {
  if (prompt.empty()) throw std::invalid_argument("sample: the prompt must hold at least one token");
  if (!(opt.top_p > 0.0f && opt.top_p <= 1.0f))
    throw std::invalid_argument("sample: top-p must be in (0, 1], got " + std::to_string(opt.top_p));
  if (!(opt.temperature >= 0.0f && std::isfinite(opt.temperature)))
    throw std::invalid_argument("sample: the temperature must be a finite number >= 0, got " + std::to_string(opt.temperature));
  const ModelDims& d = model.dims();
  std::vector<int32_t> ctx = prompt;
  std::vector<int32_t> out;
  std::mt19937_64 gen(opt.seed);
  Tape tape;
  Tape::NoGrad no_grad(tape);
  std::vector<int> order(static_cast<size_t>(d.vocab_size));
  for (int i = 0; i < opt.tokens; ++i) {
    const int T = std::min<int>(static_cast<int>(ctx.size()), d.max_seq_len);
    Tensor tokens = Tensor::empty({1, T}, DType::i32);
    std::copy(ctx.end() - T, ctx.end(), tokens.data<int32_t>());
    // Recomputes the whole context per token: simple, and fast enough for the models sampled here.
    const Tensor logits = model.logits(tape, tokens);
    const float* last = logits.data<float>() + static_cast<size_t>(T - 1) * d.padded_vocab_size;
    const int k = opt.temperature > 0.0f ? std::clamp(opt.top_k, 1, d.vocab_size) : 1;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) { return last[a] > last[b]; });
    int next = order[0];
    if (k > 1) {
      std::vector<double> w(static_cast<size_t>(k));
      double total = 0.0;
      for (int j = 0; j < k; ++j) total += w[j] = std::exp((last[order[j]] - last[order[0]]) / opt.temperature);
      // Nucleus: the most likely candidates until their share reaches top_p (at least one).
      int kept = 0;
      for (double share = 0.0; kept < k && (kept == 0 || share < opt.top_p * total); ++kept) share += w[size_t(kept)];
      w.resize(size_t(kept));
      next = order[std::discrete_distribution<int>(w.begin(), w.end())(gen)];
    }
    ctx.push_back(next);
    out.push_back(next);
    if (emit) emit(next);
    if (std::find(opt.stop.begin(), opt.stop.end(), next) != opt.stop.end()) break;
  }
  return out;
}

}  // namespace zt
