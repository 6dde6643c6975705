#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
  MatMap y(out, N, OC);
  y.noalias() = ConstMatMap(inp, N, C) * ConstMatMap(weight, OC, C).transpose();
  if (bias) y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  ConstMatMap dy(dout, N, OC);
  if (dinp) MatMap(dinp, N, C).noalias() += dy * ConstMatMap(weight, OC, C);
  if (dweight) MatMap(dweight, OC, C).noalias() += dy.transpose() * ConstMatMap(inp, N, C);
  if (dbias) Eigen::Map<Eigen::RowVectorXf>(dbias, OC) += dy.colwise().sum();
}

}  // namespace zt::cpu
