// (N, C, P) views of tensors and workspace for the non-convolution kernels.
#include "ops_common.hpp"

namespace tessera::compute::cpu::ops {

namespace {
// First pixel dim of a tensor under `split`.
int first_pixel_dim(Split split) { return split == Split::Channels ? 2 : 1; }
}  // namespace

bool has_ncp_view(const core::Tensor& t, Split split) {
  std::int64_t expect = 1;
  for (int d = t.ndim() - 1; d >= first_pixel_dim(split); --d) {
    if (t.size(d) == 1) continue;
    if (t.stride(d) != expect) return false;
    expect *= t.size(d);
  }
  return true;
}

Ncp<char> ncp_geometry(const core::Tensor& t, Split split) {
  TESSERA_ASSERT(t.ndim() >= (split == Split::Channels ? 2 : 1), "tensor ", t.describe(),
                 " has no (N, C, P) view");
  Ncp<char> g;
  g.n = t.size(0);
  g.sn = t.stride(0);
  if (split == Split::Channels) {
    g.c = t.size(1);
    g.sc = t.stride(1);
  } else {
    g.c = 1;
    g.sc = 0;
  }
  g.p = 1;
  for (int d = first_pixel_dim(split); d < t.ndim(); ++d) g.p *= t.size(d);
  return g;
}

core::Tensor workspace_like(const core::Tensor& t) {
  return core::Tensor::empty(t.shape(), t.dtype(), core::MemCategory::Workspace, t.allocator());
}

core::Tensor workspace(const core::Tensor& like, core::DType dtype, std::int64_t count) {
  return core::Tensor::empty({std::max<std::int64_t>(count, 1)}, dtype, core::MemCategory::Workspace,
                             like.allocator());
}

}  // namespace tessera::compute::cpu::ops
