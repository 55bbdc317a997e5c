// buildTeachingExample: every rank of a small W-sharded 3×3 convolution runs core's halo exchange
// and kernels on its own thread (run::local_ranks), and the tensors between the steps are kept.
#include "teaching.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/conv2d.hpp"
#include "tessera/nn/halo_exchange.hpp"
#include "tessera/run/devices.hpp"

namespace tessera::studio {

using core::Tensor;

bool Grid::contains(std::int64_t r, std::int64_t c) const {
  return r >= box.r[2].begin && r < box.r[2].end && c >= box.r[3].begin && c < box.r[3].end;
}

double Grid::at(std::int64_t r, std::int64_t c) const {
  TESSERA_CHECK(contains(r, c), "teaching: element (", r, ", ", c, ") lies outside ", box.to_string());
  return values[static_cast<std::size_t>((r - box.r[2].begin) * cols() + (c - box.r[3].begin))];
}

namespace {

// The values of a (1,1,h,w) tensor (any strides) that covers `box`.
Grid gridOf(const Tensor& t, const nn::Box& box) {
  TESSERA_CHECK(t.shape() == box.shape(), "teaching: tensor ", t.describe(), " does not cover ", box.to_string());
  Grid g;
  g.box = box;
  for (std::int64_t i = 0; i < t.size(2); ++i)
    for (std::int64_t j = 0; j < t.size(3); ++j) g.values.push_back(t.at<float>({0, 0, i, j}));
  return g;
}

// The part `sub` of a grid.
Grid cut(const Grid& g, const nn::Box& sub) {
  Grid out;
  out.box = sub;
  for (std::int64_t i = sub.r[2].begin; i < sub.r[2].end; ++i)
    for (std::int64_t j = sub.r[3].begin; j < sub.r[3].end; ++j) out.values.push_back(g.at(i, j));
  return out;
}

// A (1,1,h,w) f32 tensor holding `box` of a row-major global plane of width `width`.
Tensor tensorOf(const std::vector<double>& plane, std::int64_t width, const nn::Box& box) {
  Tensor t = Tensor::empty(box.shape(), core::DType::F32);
  for (std::int64_t i = 0; i < box.r[2].size(); ++i)
    for (std::int64_t j = 0; j < box.r[3].size(); ++j)
      t.at<float>({0, 0, i, j}) =
          static_cast<float>(plane[static_cast<std::size_t>((box.r[2].begin + i) * width + box.r[3].begin + j)]);
  return t;
}

double maxDiff(const Tensor& a, const Grid& g) {
  double d = 0;
  for (std::int64_t i = 0; i < g.rows(); ++i)
    for (std::int64_t j = 0; j < g.cols(); ++j)
      d = std::max(d, std::abs(a.at<float>({0, 0, i, j}) - g.values[static_cast<std::size_t>(i * g.cols() + j)]));
  return d;
}

std::vector<TeachStep> stepsOf(const TeachingExample& e) {
  const QString n = QString::number(e.numRanks);
  return {
      {TeachStep::Shards, false, QStringLiteral("1. Shards"),
       QStringLiteral("The %1×%2 input is split along W over %3 ranks; each holds only its own columns.")
           .arg(e.height).arg(e.width).arg(n)},
      {TeachStep::SendHalos, false, QStringLiteral("2. Send halos"),
       QStringLiteral("A 3×3 kernel reads one column past each side, so every rank sends its edge column "
                      "to the neighbour that needs it (core's HaloPlan: sends).")},
      {TeachStep::Receive, false, QStringLiteral("3. Receive"),
       QStringLiteral("Each rank assembles a buffer: its own columns plus the received halo columns "
                      "(HaloExchange::finish_forward). The global border stays zero padding.")},
      {TeachStep::Convolve, false, QStringLiteral("4. Convolve"),
       QStringLiteral("Each rank convolves its buffer with the kernel (zero-padded all round). "
                      "Columns at the buffer's inner ends read padding that is not there globally: wrong.")},
      {TeachStep::Crop, false, QStringLiteral("5. Crop"),
       QStringLiteral("Each rank keeps the columns it owns; side by side they are exactly the unsharded "
                      "convolution (equal to core's nn::conv2d_forward on every rank).")},
      {TeachStep::OutputGrad, true, QStringLiteral("6. Output gradient"),
       QStringLiteral("Backward starts from the gradient of the output, sharded like the output.")},
      {TeachStep::BufferGrad, true, QStringLiteral("7. Buffer gradient"),
       QStringLiteral("conv2d_backward_data gives the gradient of each rank's whole buffer, halo columns "
                      "included: those belong to the neighbours' inputs.")},
      {TeachStep::SendGrads, true, QStringLiteral("8. Send halo gradients back"),
       QStringLiteral("The adjoint of the halo exchange: each halo column's gradient travels back to the "
                      "rank that owns that column.")},
      {TeachStep::AddGrads, true, QStringLiteral("9. Add"),
       QStringLiteral("Each rank adds the received gradients to its own columns "
                      "(HaloExchange::finish_backward): the input gradient of the unsharded convolution.")},
  };
}

}  // namespace

TeachingExample buildTeachingExample(int numRanks, std::int64_t height, std::int64_t width) {
  TESSERA_CHECK(numRanks >= 1 && height >= 1 && width >= 1, "teaching: need at least one rank, row and column");
  TeachingExample ex;
  ex.height = height;
  ex.width = width;
  ex.numRanks = numRanks;
  const nn::ConvSpec spec = nn::ConvSpec::square(1, 1, 3, 1, 1, 1, 1, /*bias=*/false);
  ex.conv = QString::fromStdString(spec.describe());
  ex.weight = {1, 0, -1, 2, 0, -2, 1, 0, -1};  // a Sobel kernel: small integers stay exact in f32
  for (std::int64_t i = 0; i < height; ++i)
    for (std::int64_t j = 0; j < width; ++j) {
      ex.x.push_back(static_cast<double>((3 * i + 5 * j) % 7 - 3));
      ex.dy.push_back(static_cast<double>((i + 2 * j) % 3 - 1));
    }
  const core::DeviceMesh mesh({numRanks}, {"sp"});
  const core::Shape shape{1, 1, height, width};
  const core::Layout in(mesh, shape, {core::Placement::shard(3)});
  const core::Layout out = nn::conv_output_layout(spec, in);
  for (int r = 0; r < numRanks; ++r) nn::make_halo_plan(spec, in, out, r);  // refuse before running
  Tensor w = Tensor::empty(spec.weight_shape(), core::DType::F32);
  for (int k = 0; k < 9; ++k) w.data<float>()[k] = static_cast<float>(ex.weight[k]);

  ex.ranks.resize(numRanks);
  std::vector<nn::HaloPlan> plans(numRanks);
  std::mutex mu;
  run::local_ranks(numRanks, [&](comm::Backend& world) {
    const int r = world.rank();
    auto alloc = std::make_shared<core::Allocator>("teaching rank " + std::to_string(r));
    const auto cpuBackend = run::make_compute(run::Device{}, 1);
    compute::Backend& cpu = *cpuBackend;
    const nn::HaloPlan plan = nn::make_halo_plan(spec, in, out, r);
    TeachRank tr;
    tr.rank = r;
    const Tensor x = tensorOf(ex.x, width, plan.own);
    tr.input = gridOf(x, plan.own);
    // Forward: exchange, convolve the buffer "same", crop to the owned outputs.
    nn::HaloExchange fwd(plan, &world, alloc);
    fwd.start_forward(x);
    const Tensor buf = fwd.finish_forward().clone();
    tr.buffer = gridOf(buf, plan.need);
    Tensor same = Tensor::empty(plan.need.shape(), core::DType::F32);
    compute::conv2d_forward(cpu, spec.params(), buf, w, nullptr, same);
    tr.convolved = gridOf(same, plan.need);
    tr.output = cut(tr.convolved, plan.out_box);
    // Backward: buffer gradient, then the adjoint exchange adds the halo gradients.
    const Tensor dy = tensorOf(ex.dy, width, plan.out_box);
    tr.dy = gridOf(dy, plan.out_box);
    Tensor dbuf = Tensor::empty(plan.need.shape(), core::DType::F32);
    compute::conv2d_backward_data(cpu, plan.local_params, dy, w, dbuf, false);
    tr.dbuffer = gridOf(dbuf, plan.need);
    nn::HaloExchange bwd(plan, &world, alloc);
    bwd.start_backward(dbuf);
    tr.dx = gridOf(bwd.finish_backward(), plan.own);
    // Core's sharded ops on the same data: the steps above must agree with them.
    const nn::RankContext ctx{&world, &cpu, alloc};
    nn::Conv2dSaved saved;
    const Tensor y = nn::conv2d_forward(plan, ctx, x, w, nullptr, &saved);
    const nn::Conv2dGrads g = nn::conv2d_backward(plan, ctx, saved, w, dy, true, false);
    const double diff = std::max(maxDiff(y, tr.output), maxDiff(g.dx, tr.dx));
    std::lock_guard<std::mutex> lock(mu);
    ex.sharedOpsDiff = std::max(ex.sharedOpsDiff, diff);
    ex.ranks[r] = std::move(tr);
    plans[r] = plan;
  });
  // The messages, from the plans: a halo is the sender's input over the receiver's recv box; its
  // gradient goes back as the receiver's buffer gradient over the same box.
  for (int r = 0; r < numRanks; ++r)
    for (const nn::HaloPiece& p : plans[r].recvs) {
      ex.halos.push_back({p.peer, r, cut(ex.ranks[p.peer].input, p.box)});
      ex.gradients.push_back({r, p.peer, cut(ex.ranks[r].dbuffer, p.box)});
    }
  ex.steps = stepsOf(ex);
  return ex;
}

}  // namespace tessera::studio
