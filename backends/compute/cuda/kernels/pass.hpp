// The execution model of tessera's own GPU kernels: an op is a short, ordered sequence of passes;
// a pass is `items` independent work items, each running one body over its index, on the host
// (a plain loop, HostLoop below) or on the GPU (a grid-stride kernel). The arithmetic and index
// math live in the bodies, so the CPU runs of the conformance suite check what the GPU computes.
//
// A body is a type with one static function over a POD params struct P (raw pointers, View<T>s,
// int64 sizes, doubles; trivially copyable, passed by value to the kernel):
//
//   template <class T> struct AddBody {
//     static TESSERA_HD void run(const AddParams<T>& p, std::int64_t item);
//   };
//
// Items of one pass never depend on each other (no item reads what another item of its pass
// writes; no atomics), so they may run in any order and concurrently. Passes of one op run in
// order: a pass may read what an earlier one wrote (per-tile partial sums in the workspace, then a
// combine pass that adds them in tile order). Consecutive items touch consecutive elements of the
// innermost (W) dim wherever the op allows, so a warp's loads coalesce.
//
// A launcher L runs passes. It provides
//
//   template <class Body, class P> void pass(const P& p, std::int64_t items);
//       runs Body::run(p, i) for every i in [0, items), all before the next pass starts
//       (stream order on the GPU); items may be 0.
//   void* workspace(std::size_t bytes);
//       memory the op's passes may use, in the launcher's memory space, 256-byte aligned, valid
//       until the op's last pass has run. Called at most once per op, before its first pass, with
//       the size the op's workspace_bytes(params) says (0: may return null). Bodies never allocate.
//   core::Tensor scratch(const core::Shape& shape, core::DType dtype);
//       a contiguous tensor in the launcher's memory (uninitialised, booked as Workspace), valid
//       while the caller holds it and for the passes enqueued meanwhile: the f32 copies of a
//       bf16/f16 call (dispatch.hpp, run_widened). Any number per op.
//   void read_back(void* host_dst, const void* src, std::size_t bytes);
//       copies bytes from the launcher's memory to the host after every pass so far has run (one
//       op uses it: softmax_cross_entropy's label check, which must throw before anything is
//       written).
//
// The GPU launcher (backends/compute/cuda, .cu side) runs a pass as
//
//   template <class Body, class P>
//   __global__ void run_pass(P p, std::int64_t items) {
//     for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
//          i += std::int64_t(gridDim.x) * blockDim.x)
//       Body::run(p, i);
//   }
//
// launched on the rank's compute stream with enough blocks to fill the GPU (items 0: no launch).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.hpp"

namespace tessera::compute::cuda::kernels {

/// Runs passes on the calling thread, items last to first: a body that (wrongly) depends on
/// another item of its own pass then fails here, as it would on the GPU where the order is
/// unknown. `Workspace` is the host memory source: a type with `void* get(std::size_t bytes)` and
/// `tensor(shape, dtype)` (a scratch tensor).
template <class Workspace>
class HostLoop {
 public:
  explicit HostLoop(Workspace& ws) : ws_(ws) {}
  template <class Body, class P>
  void pass(const P& p, std::int64_t items) {
    for (std::int64_t i = items - 1; i >= 0; --i) Body::run(p, i);
  }
  void* workspace(std::size_t bytes) { return bytes ? ws_.get(bytes) : nullptr; }
  template <class Shape, class DType>
  auto scratch(const Shape& shape, DType dtype) {
    return ws_.tensor(shape, dtype);
  }
  void read_back(void* host_dst, const void* src, std::size_t bytes) {
    auto* d = static_cast<unsigned char*>(host_dst);
    const auto* s = static_cast<const unsigned char*>(src);
    for (std::size_t i = 0; i < bytes; ++i) d[i] = s[i];
  }

 private:
  Workspace& ws_;
};

// ---- deterministic reductions --------------------------------------------------------------
// A sum of m terms (one per reduction "row" r of `rows`) is split into tiles(m) tiles; tile t
// adds terms t, t + tiles, t + 2·tiles, … in increasing order in double (consecutive tiles read
// consecutive terms: coalesced), into partial[r·tiles + t]; a combine pass adds the partials of a
// row in tile order. The order depends on m alone, never on the thread or block count, so the
// result is the same bits on every launcher.

/// Terms per tile at least (fewer tiles than m / kTermsPerTile only for small m).
inline constexpr std::int64_t kTermsPerTile = 32;
/// The most tiles of one reduction row (bounds the combine pass's serial loop and the workspace).
inline constexpr std::int64_t kMaxTiles = 1024;

/// Tiles of an m-term sum: between 1 and kMaxTiles, m / kTermsPerTile where that lies between.
TESSERA_HD inline std::int64_t tiles_of(std::int64_t m) {
  const std::int64_t t = m / kTermsPerTile;
  return t < 1 ? 1 : (t > kMaxTiles ? kMaxTiles : t);
}

/// Σ_{t < tiles} partial[t·stride], in order.
TESSERA_HD inline double sum_tiles(const double* partial, std::int64_t tiles,
                                   std::int64_t stride = 1) {
  double s = 0;
  for (std::int64_t t = 0; t < tiles; ++t) s += partial[t * stride];
  return s;
}

/// Rounds a byte count up to the workspace alignment (so several arrays can share one workspace).
inline constexpr std::size_t kWorkspaceAlign = 256;
TESSERA_HD inline std::size_t align_up(std::size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

}  // namespace tessera::compute::cuda::kernels
