// comm_failure MODE [PIDDIR]: a job that goes wrong on purpose, for test_comm_failure.sh
// ([Note: failing the job] in comm/process_group.hpp). Every rank runs an f32 all-reduce, an f32
// reduce-scatter (MpiCommunicator's ring) and a bf16 one every 10 ms for 2000 iterations (20 s
// and more if nothing happens); at iteration 50, after the all-reduce,
//   throw:   rank 1 throws, and the job must end naming rank 1 and the error;
//   hang:    rank 1 stops calling collectives (sleeps 120 s); the others' collectives hit the 2 s
//            timeout;
//   diverge: rank 1 leaves the loop and ends normally, as a rank that ran fewer steps: the others
//            time out in their collectives, and rank 1 waits for them at the end ([Note: ending
//            together]) no longer than the timeout either;
//   kill, stop: nothing: the script SIGKILLs or SIGSTOPs rank 2, whose pid each rank writes to
//            PIDDIR/pid.<rank>;
//   end:     the ranks stop after iteration 50, rank 2 stops itself (SIGSTOP) after its last
//            collective, and the others must not wait for it at the end beyond the timeout.
// ZT_MPI_PROGRESS=poll (passed on by mpirun -x) runs the same without a progress thread.
#include <csignal>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <unistd.h>

#include "comm/process_group.hpp"
#include "tensor/dtype.hpp"
#include "tensor/tensor.hpp"

using namespace std::chrono_literals;

namespace {
// Every element of t is `want` (a sum of small integers: exact in f32 and bf16).
void expect(const zt::Tensor& t, float want, const std::string& what, int it) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float got = t.dtype() == zt::DType::f32 ? t.data<float>()[i] : zt::bf16_to_f32(t.data<uint16_t>()[i]);
    if (got != want)
      throw std::runtime_error(what + " at iteration " + std::to_string(it) + " gave " + std::to_string(got) +
                               ", expected " + std::to_string(want));
  }
}
}  // namespace

int main(int argc, char** argv) {
  auto pg = zt::ProcessGroup::start(&argc, &argv);
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode != "throw" && mode != "hang" && mode != "diverge" && mode != "kill" && mode != "stop" && mode != "end")
    pg->fail("usage: comm_failure throw|hang|diverge|kill|stop|end [PIDDIR]", 2);
  const int rank = pg->rank(), n = pg->size();
  if (argc >= 3) {  // written whole, then renamed, so a reader never sees half a pid
    const std::filesystem::path dir = argv[2], file = dir / ("pid." + std::to_string(rank));
    const std::filesystem::path tmp = dir / ("pid." + std::to_string(rank) + ".tmp");
    std::ofstream(tmp) << ::getpid() << "\n";
    std::filesystem::rename(tmp, file);
  }
  zt::Communicator& world = pg->world();
  world.set_timeout(2s);
  const int iterations = mode == "end" ? 51 : 2000;
  int it = 0;
  try {
    const zt::Tensor t = zt::Tensor::empty({16});
    const zt::Tensor big = zt::Tensor::empty({1000 * static_cast<int64_t>(n)}), mine = zt::Tensor::empty({1000});
    const zt::Tensor big16 = zt::Tensor::empty({1000 * static_cast<int64_t>(n)}, zt::DType::bf16);
    const zt::Tensor mine16 = zt::Tensor::empty({1000}, zt::DType::bf16);
    for (; it < iterations; ++it) {
      const float x = static_cast<float>(rank + it % 64);
      const float want = static_cast<float>(n * (it % 64) + n * (n - 1) / 2);
      t.fill(x);
      world.all_reduce(t, zt::ReduceOp::sum);
      expect(t, want, "all_reduce", it);
      // Between two collectives, so that the others wait in a reduce-scatter (the ring).
      if (rank == 1 && it == 50) {
        if (mode == "throw") throw std::runtime_error("injected failure on rank 1 at iteration 50");
        if (mode == "hang") {
          pg->log("stops calling collectives at iteration 50");
          std::this_thread::sleep_for(120s);
        }
        if (mode == "diverge") {
          pg->log("leaves the loop at iteration 50");
          break;
        }
      }
      big.fill(x);
      world.reduce_scatter(big, mine, zt::ReduceOp::sum);
      expect(mine, want, "reduce_scatter f32", it);
      big16.fill(x);
      world.reduce_scatter(big16, mine16, zt::ReduceOp::sum);
      expect(mine16, want, "reduce_scatter bf16", it);
      std::this_thread::sleep_for(10ms);
    }
  } catch (const std::exception& e) {
    pg->fail(e.what());
  }
  pg->log("finished " + std::to_string(it) + " iterations");
  if (mode == "end" && rank == 2) std::raise(SIGSTOP);
  return 0;
}
