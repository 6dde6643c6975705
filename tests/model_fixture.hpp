// A GPT-2 whose units are bound to flat buffers owned here, for tests that need a model without
// a trainer; on the host in f32 unless an allocator (a device's) and a dtype are given.
#pragma once

#include <vector>

#include "models/gpt2.hpp"
#include "models/llmc_format.hpp"

namespace zt::test {

struct BoundGPT2 {
  GPT2 gpt;
  std::vector<Tensor> params, grads;  // grads empty unless asked for
  explicit BoundGPT2(const GPT2Dims& d, bool with_grads = false, int wte_units = 0, Allocator& a = cpu_allocator(),
                     DType dt = DType::f32)
      : gpt(d, wte_units) {
    for (int u = 0; u < gpt.num_units(); ++u) {
      const int64_t n = gpt.layout()[u].numel;
      params.push_back(Tensor::zeros({n}, dt, MemCategory::parameters, a));
      grads.push_back(with_grads ? Tensor::zeros({n}, dt, MemCategory::gradients, a) : Tensor());
      gpt.bind_unit(u, params.back(), grads.back());
    }
  }
  // Every parameter in llm.c's order (which does not depend on how wte is cut into units).
  std::vector<float> llmc_order(bool grads = false) const {
    std::vector<float> v;
    gpt.for_each_param_in_file_order([&](int u, int i) {
      const Tensor& t = grads ? gpt.param(u, i).grad() : gpt.param(u, i);
      v.insert(v.end(), t.data<float>(), t.data<float>() + t.numel());
    });
    return v;
  }
  // Every parameter, unit after unit.
  std::vector<float> all() const {
    std::vector<float> v;
    for (const Tensor& p : params) v.insert(v.end(), p.data<float>(), p.data<float>() + p.numel());
    return v;
  }
};

}  // namespace zt::test
