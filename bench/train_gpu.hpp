// bench_train --device cuda: unsharded ConvNeXt training steps on one GPU through the cuda
// compute backend, beside PyTorch eager on the same GPU (bench/torch_gpu_peer.py).
#pragma once

#include <string>

#include "gpu_bench.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/nn/precision.hpp"

namespace tessera::bench {

struct GpuTrainOptions {
  bool json = false;
  int steps = 5;   ///< timed steps
  int warmup = 2;  ///< untimed steps first (cuDNN algorithm search, pool growth)
  std::string model = "convnext-t";
  core::Shape input{3, 512, 2048};
  int batch = 2;
  int classes = 4;
  std::string device = "cuda";
  bool tf32 = false;
  /// Both sides: fp32, or mixed precision (bf16/fp16 activations, f32 master weights; tessera's
  /// nn::TrainOptions::precision, the peer's torch.autocast with fp32 parameters).
  nn::Precision precision = nn::Precision::FP32;
  bool peer = true;               ///< run the PyTorch peer
  std::string pointwise = "linear";  ///< the peer's pointwise form: linear or conv
  PeerCommand peer_command = default_peer_command();
};

/// Measures and prints (table or --json); returns the exit status: 0 with the peer's ratios,
/// kExitNoPeer when the peer could not run (tessera's figures are printed all the same).
int run_train_gpu(const GpuTrainOptions& o);

}  // namespace tessera::bench
