// bench_conv --device cuda: the ConvNeXt stage-1 convolutions on the cuda compute backend, the
// 7x7 depthwise forward+backward's achieved bytes/s as a share of the GPU's measured copy
// bandwidth, beside PyTorch eager's depthwise convolution on the same GPU.
#pragma once

#include <string>

#include "gpu_bench.hpp"

namespace tessera::bench {

struct GpuConvOptions {
  bool json = false;
  int reps = 20;   ///< timed batches per row
  int warmup = 3;  ///< untimed calls first (cuDNN algorithm choice, pool growth)
  /// A timed batch holds enough back-to-back calls to last at least this long (calls_per_batch),
  /// on both sides.
  double min_batch_ms = 10;
  std::string layers;  ///< ",name,name," or empty for all
  std::string device = "cuda";
  bool tf32 = false;
  bool peer = true;
  double copy_bytes = double(1 << 30);  ///< size of the tensor the copy-bandwidth probe copies
  PeerCommand peer_command = default_peer_command();
};

/// Measures and prints (table or --json); returns 0, or kExitNoPeer when the PyTorch peer could
/// not run (tessera's figures are printed all the same).
int run_conv_gpu(const GpuConvOptions& o);

}  // namespace tessera::bench
