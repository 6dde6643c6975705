// comm_failure MODE [PIDDIR]: a job that goes wrong on purpose, for test_comm_failure.sh
// ([Note: failing the job] in comm/process_group.hpp). Every rank all-reduces a small buffer every
// 10 ms for 2000 iterations (20 s and more if nothing happens); at iteration 50 rank 1
//   throw: throws, and the job must end naming rank 1 and the error;
//   hang:  stops calling collectives (sleeps 120 s); the others' all_reduce hits the 2 s timeout;
//   kill:  nothing: the script SIGKILLs rank 2, whose pid each rank writes to PIDDIR/pid.<rank>.
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
#include "tensor/tensor.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  auto pg = zt::ProcessGroup::start(&argc, &argv);
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode != "throw" && mode != "hang" && mode != "kill") pg->fail("usage: comm_failure throw|hang|kill [PIDDIR]", 2);
  const int rank = pg->rank(), n = pg->size();
  if (argc >= 3) {  // written whole, then renamed, so a reader never sees half a pid
    const std::filesystem::path dir = argv[2], file = dir / ("pid." + std::to_string(rank));
    const std::filesystem::path tmp = dir / ("pid." + std::to_string(rank) + ".tmp");
    std::ofstream(tmp) << ::getpid() << "\n";
    std::filesystem::rename(tmp, file);
  }
  zt::Communicator& world = pg->world();
  world.set_timeout(2s);
  try {
    const zt::Tensor t = zt::Tensor::empty({16});
    for (int it = 0; it < 2000; ++it) {
      if (rank == 1 && it == 50) {
        if (mode == "throw") throw std::runtime_error("injected failure on rank 1 at iteration 50");
        if (mode == "hang") {
          pg->log("stops calling collectives at iteration 50");
          std::this_thread::sleep_for(120s);
        }
      }
      t.fill(static_cast<float>(rank + it));
      world.all_reduce(t, zt::ReduceOp::sum);
      const float want = static_cast<float>(n * it + n * (n - 1) / 2);
      if (t.data<float>()[0] != want)
        throw std::runtime_error("all_reduce at iteration " + std::to_string(it) + " gave " +
                                 std::to_string(t.data<float>()[0]) + ", expected " + std::to_string(want));
      std::this_thread::sleep_for(10ms);
    }
  } catch (const std::exception& e) {
    pg->fail(e.what());
  }
  pg->log("finished 2000 iterations");
  return 0;
}
