#include <cstdlib>
#include <string>

#include "comm/process_group.hpp"

namespace zt {

namespace {
bool read_int(const char* name, int& out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end) return false;
  out = static_cast<int>(x);
  return true;
}
}  // namespace

LaunchInfo detect_launch() {
  // Each launcher's own variables, most specific first; local rank/size fall back to the global
  // ones (one host).
  struct Names {
    const char *launcher, *rank, *size, *local_rank, *local_size;
  };
  static constexpr Names kLaunchers[] = {
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"pmix", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
  };
  LaunchInfo info;
  for (const Names& n : kLaunchers) {
    if (!read_int(n.rank, info.rank)) continue;
    info.launcher = n.launcher;
    read_int(n.size, info.size);
    if (!read_int(n.local_rank, info.local_rank)) info.local_rank = info.rank;
    if (!read_int(n.local_size, info.local_size)) info.local_size = info.size;
    return info;
  }
  return info;
}

}  // namespace zt
