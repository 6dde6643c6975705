// Does communication overlap computation? Times, on every rank: a compute block alone (SGEMMs),
// an all-reduce alone, and both together (the all-reduce issued asynchronously, the compute run,
// then wait). overlap = (compute + comm - both) / min(compute, comm): 100% means the shorter one
// was hidden entirely, 0% that they ran one after the other.
//   mpirun -np 2 overlap [--bytes 67108864] [--gemm 768] [--reps 5] [--threads 1]
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "kernels/cpu/kernels.hpp"

namespace {
using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double, std::milli>(clock_type::now() - t).count(); }
}  // namespace

int main(int argc, char** argv) {
  auto pg = zt::ProcessGroup::start(&argc, &argv);
  std::map<std::string, long> a = {{"bytes", 64L << 20}, {"gemm", 768}, {"reps", 5}, {"threads", 1}};
  for (int i = 1; i + 1 < argc; i += 2) a[std::string(argv[i]).substr(2)] = std::atol(argv[i + 1]);
  zt::cpu::set_num_threads(static_cast<int>(a["threads"]));
  zt::Communicator& comm = pg->world();
  const int64_t n = a["bytes"] / 4;
  zt::Tensor buf = zt::Tensor::empty({n}, zt::DType::f32, zt::MemCategory::communication);
  buf.fill(1.0f);
  const int g = static_cast<int>(a["gemm"]);
  Eigen::MatrixXf x = Eigen::MatrixXf::Random(g, g), y = Eigen::MatrixXf::Random(g, g), z(g, g);

  // Calibrate the compute block to about the all-reduce's own time, so that neither hides the
  // other trivially.
  comm.barrier();
  auto t = clock_type::now();
  comm.all_reduce(buf, zt::ReduceOp::sum);
  const double comm_ms0 = since(t);
  t = clock_type::now();
  z.noalias() = x * y;
  const double gemm_ms = std::max(since(t), 1e-3);
  const int gemms = std::max(4, static_cast<int>(comm_ms0 / gemm_ms));
  // Between SGEMMs the compute polls the outstanding operation, as a scheduler would; with the
  // progress thread that poll costs nothing, in the polled mode it is what moves MPI.
  auto compute = [&](zt::Work* pending) {
    for (int i = 0; i < gemms; ++i) {
      z.noalias() = x * y;
      if (pending) pending->test();
    }
  };

  std::vector<double> comp, comms, both;
  for (long r = 0; r < a["reps"]; ++r) {
    comm.barrier();
    t = clock_type::now();
    compute(nullptr);
    comp.push_back(since(t));
    comm.barrier();
    t = clock_type::now();
    comm.all_reduce(buf, zt::ReduceOp::sum);
    comms.push_back(since(t));
    comm.barrier();
    t = clock_type::now();
    zt::WorkPtr w = comm.all_reduce_async(buf, buf, zt::ReduceOp::sum);
    compute(w.get());
    w->wait();
    both.push_back(since(t));
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double c = med(comp), m = med(comms), b = med(both);
  const double overlap = (c + m - b) / std::min(c, m);
  if (pg->rank() == 0) {
    const char* mode = std::getenv("ZT_MPI_PROGRESS");
    std::printf("# progress: %s\n", mode && std::string(mode) == "poll" ? "polled by the caller" : "progress thread");
    std::printf("# %d ranks (%s), all_reduce of %ld bytes f32, compute = %d SGEMMs %d^3 on %d thread(s)\n", comm.size(),
                std::string(comm.backend()).c_str(), a["bytes"], gemms, g, zt::cpu::num_threads());
    std::printf("compute %.1f ms | all_reduce %.1f ms | both %.1f ms | serial would be %.1f ms | overlap %.0f%%\n", c, m, b,
                c + m, 100.0 * overlap);
  }
  if (z(0, 0) == 12345.0f) std::printf(" ");
  return 0;
}
