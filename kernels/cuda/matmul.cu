// The linear layer through cuBLASLt (kernels/cuda/cublaslt.hpp), twin of kernels/cpu/matmul.cpp.
// Row-major arrays seen column-major: inp (N,C) is inp^T (C,N), weight (OC,C) is weight^T (C,OC),
// out (N,OC) is out^T (OC,N), so
//   forward   out^T (OC,N)     = weight^T^T (OC,C) . inp^T (C,N)    [+ bias, GELU epilogues]
//   dinp      dinp^T (C,N)    += weight^T (C,OC)   . dout^T (OC,N)
//   dweight   dweight^T (C,OC) += inp^T (C,N)      . dout^T^T (N,OC)
// The bias gradient and the GELU gradient are one kernel of our own (below): cuBLASLt's BGRAD
// epilogues overwrite where the op accumulates, and its DGELU applies to a GEMM's output where the
// backward needs it on the input dout.
#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cublaslt.hpp"
#include "kernels/cuda/gelu.cuh"

namespace zt::cuda {

namespace {

constexpr int kCols = 32;  // columns per block of the bias kernel: one warp reads a row segment
constexpr int kLanes = 8;  // rows summed side by side in each column
constexpr unsigned kSumThreads = 256;

// Over the rows [blockIdx.y * rows_per_group, +rows_per_group) of columns [blockIdx.x * kCols,
// +kCols) of (N,OC): with DGelu, g = dout * gelu'(pre) is stored to dpre (rounded to T; dpre may
// be dout itself: each element is read, then written, by the same thread); with Sum, the column
// sums of g (as stored) go to partials[blockIdx.y][column], lanes added in a fixed order.
template <class T, bool DGelu, bool Sum>
__global__ void __launch_bounds__(kCols* kLanes)
    bias_dgelu_kernel(float* partials, T* dpre, const T* dout, const T* pre, int N, int OC, int rows_per_group) {
  const int c = static_cast<int>(blockIdx.x) * kCols + static_cast<int>(threadIdx.x);
  const int first = static_cast<int>(blockIdx.y) * rows_per_group;
  const int end = min(N, first + rows_per_group);
  float sum = 0.0f;
  if (c < OC) {
    for (int r = first + static_cast<int>(threadIdx.y); r < end; r += kLanes) {
      const size_t i = static_cast<size_t>(r) * OC + c;
      float g = to_f32(dout[i]);
      if constexpr (DGelu) {
        const T stored = from_f32<T>(g * gelu_grad(to_f32(pre[i])));
        dpre[i] = stored;
        g = to_f32(stored);
      }
      sum += g;
    }
  }
  if constexpr (Sum) {
    __shared__ float lanes[kLanes][kCols + 1];
    lanes[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < OC) {
      float total = 0.0f;
#pragma unroll
      for (int l = 0; l < kLanes; ++l) total += lanes[l][threadIdx.x];
      partials[static_cast<size_t>(blockIdx.y) * OC + c] = total;
    }
  }
}

// dbias[c] += the sum over groups of partials[g][c], in group order (deterministic).
template <class T>
__global__ void bias_sum_kernel(T* dbias, const float* partials, int groups, int OC) {
  for (size_t c = size_t{blockIdx.x} * blockDim.x + threadIdx.x; c < static_cast<size_t>(OC);
       c += size_t{gridDim.x} * blockDim.x) {
    float total = 0.0f;
    for (int g = 0; g < groups; ++g) total += partials[static_cast<size_t>(g) * OC + c];
    dbias[c] = from_f32<T>(to_f32(dbias[c]) + total);
  }
}

template <class T>
constexpr bool kBf16 = std::is_same_v<T, bf16>;

// What cuBLASLt and the kernels here need, checked before anything is queued.
template <class T>
void check_args(const char* op, int N, int C, int OC, std::initializer_list<const void*> pointers, bool gelu) {
  const std::string name = std::string(op) + (kBf16<T> ? " (bf16)" : " (f32)");
  const std::string dims = "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
  if (N < 0 || C < 1 || OC < 0) throw std::invalid_argument(name + ": bad dimensions " + dims);
  if (kBf16<T>) {
    bool aligned = C % 8 == 0 && OC % 8 == 0;
    for (const void* p : pointers) aligned = aligned && aligned16(p);
    if (!aligned)
      throw std::invalid_argument(name + ": " + dims +
                                  ": bf16 GEMMs need C and OC multiples of 8 and every pointer 16-byte aligned");
  }
  if (gelu && OC % 8 != 0)
    throw std::invalid_argument(name + ": " + dims + ": the fused GELU needs OC a multiple of 8 (cuBLASLt's aux ld)");
}

// Queues the bias/GELU-gradient kernels on the lease's stream; the column sums go through the
// lease's workspace (free before the GEMMs that follow on the same stream).
template <class T>
void bias_dgelu(GemmLease& lease, T* dbias, T* dpre, const T* dout, const T* pre, int N, int OC, cudaStream_t s) {
  const int col_blocks = (OC + kCols - 1) / kCols;
  // Enough row groups to fill the device about four times over, each at least kLanes rows, and
  // no more partial sums than the workspace holds.
  const size_t fit = lease.workspace_bytes() / (sizeof(float) * static_cast<size_t>(OC));
  if (dbias && fit == 0)
    throw std::invalid_argument("matmul_backward: OC=" + std::to_string(OC) + " is too wide for the bias workspace");
  int groups = std::max(1, (4 * lease.sm_count() + col_blocks - 1) / col_blocks);
  groups = std::min({groups, (N + kLanes - 1) / kLanes, static_cast<int>(std::min<size_t>(fit ? fit : 1, 65535))});
  const int rows_per_group = (N + groups - 1) / groups;
  groups = (N + rows_per_group - 1) / rows_per_group;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(groups)), block(kCols, kLanes);
  auto* partials = static_cast<float*>(lease.workspace());
  if (pre && dbias)
    bias_dgelu_kernel<T, true, true><<<grid, block, 0, s>>>(partials, dpre, dout, pre, N, OC, rows_per_group);
  else if (pre)
    bias_dgelu_kernel<T, true, false><<<grid, block, 0, s>>>(partials, dpre, dout, pre, N, OC, rows_per_group);
  else
    bias_dgelu_kernel<T, false, true><<<grid, block, 0, s>>>(partials, dpre, dout, pre, N, OC, rows_per_group);
  check_launch("matmul_backward: bias_dgelu_kernel");
  if (!dbias) return;
  bias_sum_kernel<T><<<blocks_for(static_cast<size_t>(OC), kSumThreads), kSumThreads, 0, s>>>(dbias, partials,
                                                                                            groups, OC);
  check_launch("matmul_backward: bias_sum_kernel");
}

}  // namespace

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, cudaStream_t s,
                    T* pre_gelu) {
  check_args<T>("matmul_forward", N, C, OC, {out, inp, weight, bias, pre_gelu}, pre_gelu != nullptr);
  if (N == 0 || OC == 0) return;
  const Epilogue plain = bias ? Epilogue::bias : Epilogue::none;
  Gemm g{.bf16 = kBf16<T>, .trans_a = true, .m = OC, .n = N, .k = C, .lda = C, .ldb = C, .ldd = OC, .beta = 0.0f,
         .epilogue = plain, .a = weight, .b = inp, .d = out, .bias = bias};
  GemmLease lease(s);
  if (!pre_gelu) return lease.run(g);
  g.epilogue = bias ? Epilogue::gelu_aux_bias : Epilogue::gelu_aux;
  g.aux = pre_gelu;
  if (lease.try_run(g)) return;
  // No fused algorithm for this type and shape: the GEMM writes the pre-activation, then a pass
  // of GELU.
  g.epilogue = plain;
  g.d = pre_gelu;
  g.aux = nullptr;
  lease.run(g);
  gelu_forward<T>(out, pre_gelu, static_cast<size_t>(N) * static_cast<size_t>(OC), s);
}

template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N, int C,
                     int OC, cudaStream_t s, const T* pre_gelu, T* dpre_gelu) {
  if (pre_gelu && !dpre_gelu)
    throw std::invalid_argument("matmul_backward: pre_gelu given without dpre_gelu, the (N,OC) buffer for its gradient");
  check_args<T>("matmul_backward", N, C, OC, {dinp, dweight, dbias, dout, inp, weight, pre_gelu, dpre_gelu}, false);
  if (N == 0 || OC == 0) return;
  GemmLease lease(s);
  const T* g = dout;
  if (pre_gelu || dbias) bias_dgelu(lease, dbias, dpre_gelu, dout, pre_gelu, N, OC, s);
  if (pre_gelu) g = dpre_gelu;
  if (dinp)
    lease.run({.bf16 = kBf16<T>, .m = C, .n = N, .k = OC, .lda = C, .ldb = OC, .ldd = C, .beta = 1.0f, .a = weight,
               .b = g, .d = dinp});
  if (dweight)
    lease.run({.bf16 = kBf16<T>, .trans_b = true, .m = C, .n = OC, .k = N, .lda = C, .ldb = OC, .ldd = C,
               .beta = 1.0f, .a = inp, .b = g, .d = dweight});
}

#define ZT_INSTANTIATE(T)                                                                                          \
  template void matmul_forward<T>(T*, const T*, const T*, const T*, int, int, int, cudaStream_t, T*);              \
  template void matmul_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int, cudaStream_t, const T*, \
                                   T*);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(bf16)
#undef ZT_INSTANTIATE

}  // namespace zt::cuda
