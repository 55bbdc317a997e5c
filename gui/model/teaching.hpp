// Teaching mode's data: one small sharded convolution run for real — core's halo plans, its
// HaloExchange over the in-process `local` backend and the cpu backend's kernels — recorded step
// by step (send halos, receive, convolve, crop; and backward: buffer gradient, halo gradients
// sent back, added), so that every number the view shows is one core computed.
#pragma once

#include <QString>
#include <vector>

#include "tessera/nn/halo_plan.hpp"

namespace tessera::studio {

/// One channel's values over a box of global (row, column) indices.
struct Grid {
  nn::Box box;                 ///< global indices (one sample, one channel)
  std::vector<double> values;  ///< row-major, rows() × cols()
  std::int64_t rows() const { return box.r[2].size(); }
  std::int64_t cols() const { return box.r[3].size(); }
  double at(std::int64_t globalRow, std::int64_t globalCol) const;  ///< throws outside the box
  bool contains(std::int64_t globalRow, std::int64_t globalCol) const;
};

/// A message between two ranks: a halo (forward) or a halo gradient (backward).
struct TeachMessage {
  int from = -1, to = -1;
  Grid grid;  ///< what travelled, at the global indices it covers
};

/// One rank's tensors through forward and backward.
struct TeachRank {
  int rank = 0;
  Grid input;   ///< its shard of x (plan.own)
  Grid buffer;  ///< x with the received halos (plan.need)
  Grid convolved;  ///< 3×3 "same" convolution of the buffer (border columns wrong where the buffer ends)
  Grid output;  ///< the kept part (plan.out_box); equals core's nn::conv2d_forward
  Grid dy;      ///< output gradient (plan.out_box)
  Grid dbuffer; ///< gradient w.r.t. the buffer (plan.need): conv2d_backward_data
  Grid dx;      ///< input gradient after the halo gradients were added (plan.own): HaloExchange
};

struct TeachStep {
  enum Kind { Shards, SendHalos, Receive, Convolve, Crop, OutputGrad, BufferGrad, SendGrads, AddGrads };
  Kind kind;
  bool backward = false;
  QString title, text;
};

struct TeachingExample {
  QString conv;                 ///< "conv 3x3/s1/p1 1->1"
  std::int64_t height = 0, width = 0;
  int numRanks = 0;
  std::vector<double> weight;   ///< 3×3, row-major
  std::vector<double> x, dy;    ///< global input and output gradient (row-major H × W)
  std::vector<TeachRank> ranks;
  std::vector<TeachMessage> halos;      ///< forward messages
  std::vector<TeachMessage> gradients;  ///< backward messages (the adjoint: to the halos' owners)
  /// Max |nn::conv2d_forward − output| and |nn::conv2d_backward dx − dx| over every rank: core's
  /// sharded ops and the steps shown agree (0 in exact arithmetic; the values are small integers).
  double sharedOpsDiff = 0;
  std::vector<TeachStep> steps;
};

/// Runs the example: a 1×1×height×width input of small integers, a 3×3 kernel (stride 1,
/// padding 1), sharded along W over `ranks` in-process ranks. Throws what core throws for an
/// impossible split (a shard narrower than the halo).
TeachingExample buildTeachingExample(int ranks = 3, std::int64_t height = 6, std::int64_t width = 12);

}  // namespace tessera::studio
