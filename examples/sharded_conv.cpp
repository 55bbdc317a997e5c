// A 3x3 convolution sharded along W over 3 in-process ranks, checked against the unsharded
// kernel: each rank holds a slab of the input (23 columns split 8 + 8 + 7), exchanges one-column
// halos with its neighbours and computes its slab of the output. Exits 1 if any value differs.
#include <cmath>
#include <cstdio>
#include <mutex>

#include "tessera/builtin_backends.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/nn/conv2d.hpp"

using namespace tessera;

int main() {
  const nn::ConvSpec spec = nn::ConvSpec::square(/*in=*/4, /*out=*/6, /*k=*/3, /*stride=*/1, /*pad=*/1);
  const core::Shape xshape = {2, 4, 16, 23};  // N, C, H, W
  core::Tensor x = core::Tensor::empty(xshape, core::DType::F64);
  core::Tensor w = core::Tensor::empty(spec.weight_shape(), core::DType::F64);
  core::Tensor b = core::Tensor::empty({spec.out_channels}, core::DType::F64);
  for (core::Tensor* t : {&x, &w, &b})
    for (std::int64_t i = 0; i < t->numel(); ++i) t->data<double>()[i] = std::sin(0.37 * double(i) + double(t->ndim()));

  // The unsharded answer: one kernel call on the whole input.
  compute::Registry computes;
  register_builtin_backends(computes);
  auto cpu = computes.create("cpu", {});
  core::Tensor y_full = core::Tensor::zeros(spec.output_shape(xshape), core::DType::F64);
  compute::conv2d_forward(*cpu, spec.params(), x, w, &b, y_full);

  // The sharded one: the input's W (dim 3) split over a 1-D mesh of 3 ranks.
  const core::Layout in(core::DeviceMesh({3}, {"sp"}), xshape, {core::Placement::shard(3)});
  const core::Layout out = nn::conv_output_layout(spec, in);
  core::Tensor y_sharded = core::Tensor::zeros(out.global_shape(), core::DType::F64);
  std::mutex mu;
  comm::local::run(3, [&](comm::Backend& world) {
    const int rank = world.rank();
    auto compute = computes.create("cpu", {});
    const nn::RankContext ctx{&world, compute.get(), std::make_shared<core::Allocator>("rank " + std::to_string(rank))};
    const nn::HaloPlan plan = nn::make_halo_plan(spec, in, out, rank);
    const core::Tensor x_own = x.narrow(3, in.local_offset(rank)[3], in.local_shape(rank)[3]).contiguous();
    const core::Tensor y_own = nn::conv2d_forward(plan, ctx, x_own, w, &b, /*saved=*/nullptr);
    std::lock_guard<std::mutex> lock(mu);
    y_sharded.narrow(3, out.local_offset(rank)[3], out.local_shape(rank)[3]).copy_from(y_own);
    std::printf("rank %d: input columns [%lld, %lld), output %s\n", rank, (long long)in.local_offset(rank)[3],
                (long long)(in.local_offset(rank)[3] + in.local_shape(rank)[3]), core::shape_str(y_own.shape()).c_str());
  });

  // Float64: the sharded kernels may sum the taps in another order, so allow its rounding only.
  double worst = 0, scale = 0;
  for (std::int64_t i = 0; i < y_full.numel(); ++i) {
    worst = std::max(worst, std::abs(y_full.data<double>()[i] - y_sharded.data<double>()[i]));
    scale = std::max(scale, std::abs(y_full.data<double>()[i]));
  }
  const bool same = worst <= 1e-12 * scale;
  std::printf("sharded vs unsharded: max |difference| %.3g (output scale %.3g): %s\n", worst, scale,
              same ? "equal" : "DIFFERENT");
  return same ? 0 : 1;
}
