#include "runtime/train/memory_floor.hpp"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <cstdio>
#include <fstream>
#include <string>

#include "runtime/train/metrics.hpp"
#include "runtime/zero/groups.hpp"

namespace zt {

double model_states_floor(const ZeroConfig& z, double params, int world_size, int ranks_per_host) {
  // [Note: shard groups]: with hybrid sharding the states are sharded over one group only.
  const double P = params, N = z.hybrid ? shard_group_ranks(z, world_size, ranks_per_host) : world_size, f32 = 4.0;
  const bool states_away = z.offload_optimizer.device == "nvme";  // m and v (and the master) on NVMe
  const double full_params = z.stage < 3 ? f32 * P : 0.0;
  const double grads = z.stage < 2 ? f32 * P : f32 * P / N;
  const double adam = states_away ? 0.0 : (z.stage == 0 ? 2 * f32 * P : 2 * f32 * P / N);
  return full_params + grads + adam;
}

double host_memory_bytes() {
  struct sysinfo si {};
  if (::sysinfo(&si) != 0) return 0;
  double ram = static_cast<double>(si.totalram) * si.mem_unit;
  // A container's limit (cgroup v2): "max" when there is none.
  std::ifstream cg("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (cg >> limit && limit != "max") {
    try {
      ram = std::min(ram, std::stod(limit));
    } catch (const std::exception&) {  // not a number: no limit to go by
    }
  }
  return ram + static_cast<double>(si.totalswap) * si.mem_unit;
}

void check_fits_host(const Config& cfg, double params, int world_size, int ranks_on_host) {
  if (cfg.train.device != "cpu") return;
  const double floor = model_states_floor(cfg.zero, params, world_size, ranks_on_host), need = floor * ranks_on_host;
  const double have = host_memory_bytes();
  if (have <= 0 || need <= have) return;
  // human_bytes takes a size_t; beyond 16 EiB the figure is only a lower bound anyway.
  auto bytes = [](double b) { return human_bytes(static_cast<size_t>(std::min(b, 1.8e19))); };
  char params_text[32];
  std::snprintf(params_text, sizeof params_text, "%.4g", params);
  throw ConfigError("config: model: does not fit in this host's memory: " + std::string(params_text) +
                    " parameters need at least " + bytes(floor) + " a rank at zero_optimization.stage " +
                    std::to_string(cfg.zero.stage) +
                    " (parameters, gradients and AdamW's states alone: the floor of the memory estimate, see `ztrain "
                    "estimate`), " + bytes(need) + " for the " + std::to_string(ranks_on_host) +
                    " rank(s) on this host, more than its " + bytes(have) + " of memory and swap");
}

double resident_bytes() {
  long pages = 0, resident = 0;
  std::ifstream statm("/proc/self/statm");
  statm >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE));
}

double resident_peak_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) * 1024.0;  // "VmHWM:  1234 kB"
  return 0;
}

}  // namespace zt
