// The three convolutions through cuDNN's convolution API (NCHW, f32, f64, bf16 and f16, any groups,
// stride, padding, dilation and output window; strided views through strided tensor descriptors),
// with the algorithm and its workspace chosen once per geometry and cached.
#pragma once

#include <cudnn.h>

#include <map>
#include <string>

#include "tessera/compute/backend.hpp"
#include "workspace.hpp"

namespace tessera::compute::cuda {

class CudnnConv {
 public:
  /// `handle` is bound to the compute stream; `tf32` allows TF32 tensor cores for f32.
  CudnnConv(cudnnHandle_t handle, bool tf32) : handle_(handle), tf32_(tf32) {}

  void forward(const Workspace& ws, const Conv2dParams& p, const core::Tensor& x,
               const core::Tensor& w, const core::Tensor* bias, const core::Tensor& y);
  void backward_data(const Workspace& ws, const Conv2dParams& p, const core::Tensor& dy,
                     const core::Tensor& w, const core::Tensor& dx, bool accumulate);
  void backward_weight(const Workspace& ws, const Conv2dParams& p, const core::Tensor& x,
                       const core::Tensor& dy, const core::Tensor& dw, const core::Tensor* db,
                       bool accumulate);

  /// Geometries whose algorithm has been chosen (for tests: a second call must not add one).
  std::size_t cached_algorithms() const noexcept { return algos_.size(); }

  /// The most workspace an algorithm may ask for (bytes).
  static constexpr std::size_t kWorkspaceLimit = std::size_t{1} << 30;

  /// An algorithm choice: cuDNN's algorithm enum of the op, the math type it runs with, and the
  /// workspace bytes cudnnGetConvolution*WorkspaceSize states for it with the geometry's
  /// descriptors and that math type (what every call of the geometry allocates).
  struct Choice {
    int algo = 0;
    std::size_t workspace = 0;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  };

 private:
  cudnnHandle_t handle_;
  bool tf32_;
  std::map<std::string, Choice> algos_;  // key: op, dtype, shapes, strides, geometry, math
};

}  // namespace tessera::compute::cuda
