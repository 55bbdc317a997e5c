// Eigen row-major views of NCHW buffers and the fixed-order partial-sum reduction of the GEMM
// paths.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>

namespace tessera::compute::cpu {

/// Row-major dynamic matrix; an (N,C,H,W) sample with contiguous planes is a C × HW one.
template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMatMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using MatMap = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

/// rows × cols matrix at p whose rows are `ld` elements apart.
template <class T>
ConstMatMap<T> cmat(const T* p, int rows, int cols, std::int64_t ld) {
  return ConstMatMap<T>(p, rows, cols, Eigen::OuterStride<>(static_cast<Eigen::Index>(ld)));
}
template <class T>
MatMap<T> mat(T* p, int rows, int cols, std::int64_t ld) {
  return MatMap<T>(p, rows, cols, Eigen::OuterStride<>(static_cast<Eigen::Index>(ld)));
}

/// Sets row r of the rows × cols matrix at p (rows `ld` apart) to v[r].
template <class T>
void fill_rows(T* p, int rows, int cols, std::int64_t ld, const T* v) {
  for (int r = 0; r < rows; ++r) std::fill(p + r * ld, p + r * ld + cols, v[r]);
}

/// dst[i] = (accumulate ? dst[i] : 0) + Σ_t parts[t·stride + i], t = 0, 1, ... in order.
template <class T>
void reduce_partials(T* dst, std::int64_t count, const T* parts, int num_parts, std::int64_t stride,
                     bool accumulate) {
  for (std::int64_t i = 0; i < count; ++i) {
    T s = accumulate ? dst[i] : T(0);
    for (int t = 0; t < num_parts; ++t) s += parts[t * stride + i];
    dst[i] = s;
  }
}

}  // namespace tessera::compute::cpu
