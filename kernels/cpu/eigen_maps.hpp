// Eigen views over the raw row-major buffers the kernels take.
#pragma once

#include <Eigen/Core>

namespace zt::cpu {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using ConstMatMap = Eigen::Map<const RowMat>;
// A (rows, cols) block of a wider row-major buffer, e.g. one head's q inside qkv (B,T,3C).
using StridedMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;
using ConstStridedMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

}  // namespace zt::cpu
