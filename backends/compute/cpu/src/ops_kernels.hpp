// The non-convolution CPU kernels, one per OpKind, each for T = float and double. The dispatcher
// (ops_dispatch.cpp) has checked dtypes; compute_ops.cpp has checked shapes.
#pragma once

#include "tessera/compute/ops.hpp"
#include "thread_pool.hpp"

namespace tessera::compute::cpu::ops {

// ops_linear.cpp
template <class T> void run_linear_forward(const OpCall& c, ThreadPool& pool);
template <class T> void run_linear_backward(const OpCall& c, ThreadPool& pool);
// ops_layernorm.cpp
template <class T> void run_layernorm_forward(const OpCall& c, ThreadPool& pool);
template <class T> void run_layernorm_backward(const OpCall& c, ThreadPool& pool);
// ops_batchnorm.cpp
template <class T> void run_channel_moments(const OpCall& c, ThreadPool& pool);
template <class T> void run_batchnorm_forward(const OpCall& c, ThreadPool& pool);
template <class T> void run_batchnorm_backward_reduce(const OpCall& c, ThreadPool& pool);
template <class T> void run_batchnorm_backward_data(const OpCall& c, ThreadPool& pool);
// ops_activation.cpp
template <class T> void run_activation_forward(const OpCall& c, ThreadPool& pool);
template <class T> void run_activation_backward(const OpCall& c, ThreadPool& pool);
// ops_elementwise.cpp
template <class T> void run_add(const OpCall& c, ThreadPool& pool);
template <class T> void run_axpy(const OpCall& c, ThreadPool& pool);
template <class T> void run_scale(const OpCall& c, ThreadPool& pool);
template <class T> void run_scale_samples(const OpCall& c, ThreadPool& pool);
// ops_channel.cpp
template <class T> void run_scale_channels(const OpCall& c, ThreadPool& pool);
template <class T> void run_scale_channels_backward(const OpCall& c, ThreadPool& pool);
template <class T> void run_channel_sum(const OpCall& c, ThreadPool& pool);
template <class T> void run_channel_broadcast(const OpCall& c, ThreadPool& pool);
// ops_upsample.cpp
template <class T> void run_upsample_nearest(const OpCall& c, ThreadPool& pool);
template <class T> void run_upsample_nearest_backward(const OpCall& c, ThreadPool& pool);
// ops_loss.cpp
template <class T> void run_softmax_cross_entropy(const OpCall& c, ThreadPool& pool);
// ops_optim.cpp
template <class T> void run_sgd_step(const OpCall& c, ThreadPool& pool);
template <class T> void run_adamw_step(const OpCall& c, ThreadPool& pool);
template <class T> void run_sum_squares(const OpCall& c, ThreadPool& pool);

}  // namespace tessera::compute::cpu::ops
