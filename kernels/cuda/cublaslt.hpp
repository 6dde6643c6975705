// The cuBLASLt side of the GEMM ops (kernels/cuda/matmul.cu): per device one handle and one
// 32 MiB workspace, created on first use, and a cache of plans (matmul descriptor, layouts and the
// heuristic's algorithm) keyed by everything the heuristic looks at, so that a training step makes
// no heuristic query after the first. Every cuBLASLt status is checked and throws CudaError
// "<call>: <status name>: <description>".
//
// GEMMs are column-major here, as cuBLASLt sees them: D (m,n) = op(A) op(B) + beta D, op(X) = X or
// X^T. A row-major (R,K) array is a column-major (K,R) one with leading dimension K.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace zt::cuda {

enum class Epilogue : uint8_t {
  none,
  bias,           // + bias, broadcast along n
  gelu_aux,       // aux = the result, D = gelu(aux)
  gelu_aux_bias,  // aux = the result + bias, D = gelu(aux)
};

struct Gemm {
  bool bf16 = false;  // A, B, D, bias and aux in bf16 (else f32); compute and scale f32 always
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldd = 0;
  float beta = 0;  // 0: D is written (never read); 1: D accumulates
  Epilogue epilogue = Epilogue::none;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  const void* bias = nullptr;  // m elements
  void* aux = nullptr;         // (m,n) with leading dimension ldd; ldd a multiple of 8
};

struct GemmContext;

// The current device's handle and workspace, held by one op for its work on stream `s`: the
// GEMMs it runs and its own kernels that use the workspace as scratch, all queued on `s`. See
// [Note: one workspace, many streams] in kernels/cuda/cublaslt.cpp.
class GemmLease {
 public:
  explicit GemmLease(cudaStream_t s);
  ~GemmLease();
  GemmLease(const GemmLease&) = delete;
  GemmLease& operator=(const GemmLease&) = delete;

  // Queues g on the stream; throws CudaError when cuBLASLt has no algorithm for it.
  void run(const Gemm& g);
  // The same, but returns false instead where cuBLASLt has no algorithm (asked once per plan).
  bool try_run(const Gemm& g);
  void* workspace() const;
  size_t workspace_bytes() const;
  int sm_count() const;

 private:
  GemmContext& ctx_;
  std::unique_lock<std::mutex> lock_;
  cudaStream_t s_;
};

// Heuristic queries made in this process so far (all devices), for the plan cache's test.
uint64_t gemm_heuristic_queries();

}  // namespace zt::cuda
