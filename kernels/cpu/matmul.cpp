#include <algorithm>
#include <cstddef>

#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
  // The bias goes in first and the product adds to it: one pass over out fewer than adding it after.
  if (bias) MatMap(out, N, OC).rowwise() = Eigen::Map<const Eigen::RowVectorXf>(bias, OC);
  sgemm(false, true, N, OC, C, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  if (dinp) sgemm(false, false, N, C, OC, dout, OC, weight, C, 1.0f, dinp, C);
  if (dweight) sgemm(true, false, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C);
  if (!dbias) return;
  // dbias += the column sums of dout, a block of columns per task, each summed down the rows in
  // order (vectorised along the row): the same numbers for any thread count. Eigen's colwise sum
  // of a row-major matrix ran single-threaded at a quarter of this speed.
  constexpr int kCols = 256;
#pragma omp parallel for schedule(static)
  for (int c0 = 0; c0 < OC; c0 += kCols) {
    const int n = std::min(kCols, OC - c0);
    Eigen::Array<float, kCols, 1> sum = Eigen::Array<float, kCols, 1>::Zero();
    for (int i = 0; i < N; ++i) sum.head(n) += ConstArrayMap(dout + static_cast<size_t>(i) * OC + c0, n);
    ArrayMap(dbias + c0, n) += sum.head(n);
  }
}

}  // namespace zt::cpu
