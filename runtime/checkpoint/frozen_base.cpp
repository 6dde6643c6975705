#include "runtime/checkpoint/frozen_base.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "kernels/cpu/kernels.hpp"
#include "models/foreign_formats.hpp"
#include "runtime/checkpoint/weights.hpp"

namespace zt {

void for_each_merged_unit(SavedCheckpoint& saved, Model& model, const std::function<void(int u, const float* params)>& write) {
  const SavedCheckpoint::FrozenSource source = saved.frozen_source();
  const std::string& from = source.init_from;

  // The adapters (small), each verified against its checksum.
  std::vector<std::vector<float>> adapters(static_cast<size_t>(model.num_units()));
  for (int u = model.base_units(); u < model.num_units(); ++u) saved.read_unit(u, adapters[size_t(u)]);
  // The frozen model: a foreign file a unit at a time, else every model unit bound to host memory
  // and read (or initialised) whole.
  std::unique_ptr<ForeignWeights> foreign;
  std::vector<Tensor> whole;
  std::error_code ec;
  if (!from.empty() && !std::filesystem::exists(from, ec))
    throw saved.bad("the frozen model its adapters were trained over, '" + from +
                    "' (the run's model.init_from), does not exist (moved or deleted?); merging or sampling needs it "
                    "back at that path");
  if (!from.empty() && read_foreign_checkpoint(from)) {
    foreign = open_foreign_weights(from, model);
  } else {
    for (int u = 0; u < model.num_units(); ++u) {
      whole.push_back(Tensor::zeros({model.layout()[size_t(u)].numel}, DType::f32, MemCategory::other));
      model.bind_unit(u, whole.back(), Tensor());
    }
    if (from.empty()) {
      for (int u = 0; u < model.base_units(); ++u) model.init_unit(u, source.seed);
    } else {
      load_weights(from, model);
    }
  }
  uint64_t sum = 0;
  std::vector<float> unit;
  std::vector<uint16_t> low;
  for (int u = 0; u < model.base_units(); ++u) {
    const int64_t n = model.layout()[size_t(u)].numel;
    unit.assign(static_cast<size_t>(n), 0.0f);
    if (foreign) foreign->read_unit_range(u, 0, n, unit.data());
    else std::copy_n(whole[size_t(u)].data<float>(), n, unit.data());
    if (saved.wire() != DType::f32) {  // as the run held them
      low.resize(static_cast<size_t>(n));
      cpu::cast(low.data(), saved.wire(), unit.data(), DType::f32, static_cast<size_t>(n));
      cpu::cast(unit.data(), DType::f32, low.data(), saved.wire(), static_cast<size_t>(n));
    }
    sum += frozen_hash(u, 0, unit.data(), n);
    model.merge_lora(u, unit.data(), [&](int v) { return adapters[size_t(v)].data(); });
    write(u, unit.data());
  }
  char have[17];
  std::snprintf(have, sizeof have, "%016llx", static_cast<unsigned long long>(sum));
  if (source.checksum != have)
    throw saved.bad("its adapters were trained on a frozen model (checksum " + source.checksum + ") other than " +
                    (from.empty() ? "train.seed " + std::to_string(source.seed) + "'s" : "'" + from + "'") +
                    " is now (checksum " + std::string(have) + "); the merged model would be wrong");
}

}  // namespace zt
