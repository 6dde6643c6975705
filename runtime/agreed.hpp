// Errors the ranks agree on: a check or a piece of I/O that one rank may fail alone (its own
// file, its own disk) ends on every rank together, so no rank goes on into a collective that the
// others have left.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

#include "comm/communicator.hpp"
#include "comm/process_group.hpp"

namespace zt {

// Collective: runs `body` on every rank; if it threw on any rank, every rank throws: a rank that
// failed rethrows its own exception, the others throw Error("<what> failed on rank r"), naming the
// highest rank that failed. Either is marked as failing together ([Note: failing together] in
// comm/process_group.hpp), so the job ends on every rank without an abort.
template <class Error = std::runtime_error, class F>
void agreed(Communicator& comm, const std::string& what, F&& body) {
  std::exception_ptr error;
  try {
    body();
  } catch (...) {
    error = std::current_exception();
  }
  Tensor flag = Tensor::empty({1}, DType::i32, MemCategory::other);
  flag.data<int32_t>()[0] = error ? comm.rank() : -1;
  if (comm.size() > 1) comm.all_reduce(flag, ReduceOp::max);
  const int failed = flag.data<int32_t>()[0];
  if (failed >= 0) mark_failing_together(error != nullptr);  // [Note: failing together]
  if (error) std::rethrow_exception(error);
  if (failed >= 0) throw Error(what + " failed on rank " + std::to_string(failed));
}

}  // namespace zt
