// The cuda backend's mapping of a convolution's output window onto cuDNN's symmetric padding
// (backends/compute/cuda/src/conv_window.hpp), checked on the CPU: for every small geometry, what
// cuDNN would compute from the plan (its own output-extent formula and zero padding, on the input
// rows the plan gives it, or on the zero-padded frame) equals the definition of
// compute::Conv2dParams, row by row, on a 1-d signal.
#include <array>
#include <vector>

#include "conv_window.hpp"
#include "support/catch.hpp"

namespace {

using tessera::compute::cuda::ConvDimPlan;
using tessera::compute::cuda::cudnn_out_extent;
using tessera::compute::cuda::plan_conv_dim;

// Σ_i w[i]·x[o·s − p + i·d] with x zero outside [0, x.size()).
std::vector<double> conv1d(const std::vector<double>& x, const std::vector<double>& w,
                           std::int64_t out, int s, int p, int d) {
  std::vector<double> y(static_cast<std::size_t>(out), 0.0);
  for (std::int64_t o = 0; o < out; ++o)
    for (std::size_t i = 0; i < w.size(); ++i) {
      const std::int64_t j = o * s - p + static_cast<std::int64_t>(i) * d;
      if (j >= 0 && j < static_cast<std::int64_t>(x.size()))
        y[static_cast<std::size_t>(o)] += w[i] * x[static_cast<std::size_t>(j)];
    }
  return y;
}

}  // namespace

TEST_CASE("cuda conv window: cuDNN on the planned rows computes exactly the call's outputs",
          "[cuda][conv]") {
  int checked = 0, framed = 0;
  for (int in = 1; in <= 9; ++in)
    for (int k = 1; k <= 4; ++k)
      for (int s = 1; s <= 3; ++s)
        for (int d = 1; d <= 2; ++d)
          for (int p = -4; p <= 5; ++p)
            for (int out = 1; out <= 8; ++out) {
              std::vector<double> x(static_cast<std::size_t>(in)), w(static_cast<std::size_t>(k));
              for (int i = 0; i < in; ++i) x[static_cast<std::size_t>(i)] = 1.0 + i * 0.37;
              for (int i = 0; i < k; ++i) w[static_cast<std::size_t>(i)] = 0.5 + i * 1.3;
              const std::vector<double> want = conv1d(x, w, out, s, p, d);
              const ConvDimPlan plan = plan_conv_dim(in, out, k, s, p, d);
              std::vector<double> given;  // the rows cuDNN reads
              int pad = 0;
              if (plan.direct) {
                REQUIRE(plan.first >= 0);
                REQUIRE(plan.first + plan.rows <= in);
                REQUIRE(plan.pad >= 0);
                given.assign(x.begin() + plan.first, x.begin() + plan.first + plan.rows);
                pad = plan.pad;
              } else {
                ++framed;
                for (std::int64_t j = 0; j < plan.frame_rows; ++j) {
                  const std::int64_t src = plan.frame_lo + j;
                  given.push_back(src >= 0 && src < in ? x[static_cast<std::size_t>(src)] : 0.0);
                }
              }
              INFO("in " << in << " out " << out << " k " << k << " s " << s << " p " << p << " d "
                         << d << (plan.direct ? " direct" : " framed"));
              // cuDNN's own extent must be the call's, and its values the definition's.
              REQUIRE(cudnn_out_extent(static_cast<std::int64_t>(given.size()), k, s, pad, d) ==
                      out);
              REQUIRE(conv1d(given, w, out, s, pad, d) == want);
              ++checked;
            }
  REQUIRE(checked > 10000);
  REQUIRE(framed > 0);
}

TEST_CASE("cuda conv window: the usual geometries need no frame", "[cuda][conv]") {
  // 3x3 same padding, a stride-2 downsample, a 7x7 depthwise, a 2x2 patchify: the input as it is.
  for (const auto& [in, out, k, s, p] : std::vector<std::array<int, 5>>{
           {56, 56, 3, 1, 1}, {56, 28, 3, 2, 1}, {56, 56, 7, 1, 3}, {224, 56, 4, 4, 0}}) {
    const ConvDimPlan plan = plan_conv_dim(in, out, k, s, p, 1);
    REQUIRE(plan.direct);
    REQUIRE(plan.first == 0);
    REQUIRE(plan.rows == in);
    REQUIRE(plan.pad == p);
  }
  // A shard's interior with its halo already received: a window inside the input, no padding.
  const ConvDimPlan shard = plan_conv_dim(30, 28, 3, 1, 0, 1);
  REQUIRE(shard.direct);
}
