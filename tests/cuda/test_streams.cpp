// Streams by role: work on one role that another orders after is seen complete, without any
// device-wide synchronisation; events time and report completion, and move with what they
// recorded; NVTX ranges nest; a failed call's CudaError names it.
#include <utility>

#include "kernels/cpu/kernels.hpp"
#include "kernels/cuda/streams.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

TEST_CASE("a role ordered after another sees its results") {
  cuda::RoleStreams streams;
  const size_t n = size_t{1} << 24;  // long enough that an unordered copy would overtake it
  const auto x = random_vec(n, -3, 3);
  DeviceBuffer<float> in(x), out(n), copy(n);
  out.poison();
  copy.poison();
  cuda::NvtxRange range("test");
  cuda::Event start(true), end(true);
  start.record(streams[cuda::StreamRole::compute]);
  cuda::gelu_forward<float>(out, in, n, streams[cuda::StreamRole::compute]);
  end.record(streams[cuda::StreamRole::compute]);
  streams.order(cuda::StreamRole::compute, cuda::StreamRole::all_gather);
  cuda::check(cudaMemcpyAsync(copy.get(), out.get(), n * sizeof(float), cudaMemcpyDeviceToDevice,
                              streams[cuda::StreamRole::all_gather]),
              "cudaMemcpyAsync");
  end.synchronize();
  CHECK(end.done());
  CHECK(end.since(start) > 0.0f);
  std::vector<float> ref(n);
  cpu::gelu_forward(ref.data(), x.data(), n);
  expect_close(copy.download(), ref, 1e-5, "copy ordered after gelu");
  CHECK(std::string(cuda::stream_role_name(cuda::StreamRole::reduce_scatter)) == "reduce_scatter");
}

TEST_CASE("an event moves with the work it recorded") {
  cuda::Stream s;
  cuda::Event a;
  a.record(s);
  cuda::Event b(std::move(a));
  CHECK(a.get() == nullptr);  // the moved-from event holds nothing
  b.synchronize();
  CHECK(b.done());
  cuda::Event c;
  c = std::move(b);
  CHECK(b.get() == nullptr);
  CHECK(c.done());
}

TEST_CASE("a failed CUDA call throws CudaError naming the call") {
  CHECK_THROWS_WITH_AS(cuda::check(cudaErrorInvalidValue, "cudaMemcpy"),
                       doctest::Contains("cudaMemcpy: cudaErrorInvalidValue"), cuda::CudaError);
  CHECK_NOTHROW(cuda::check(cudaSuccess, "cudaMemcpy"));
}

}  // namespace zt::test
