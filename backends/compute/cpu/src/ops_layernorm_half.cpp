// Layer norm calls with bf16/f16 activations (x, y, dy, dx) and f32 Master parameters and
// statistics, run on the 16-bit storage directly (ops_layernorm.hpp): each block's rows are
// widened as they are staged in per-worker f32 scratch and each output row is rounded once, so
// the call gives the bits of the widened one (half_calls.cpp) without its whole-tensor copies.
#include <cstdint>
#include <vector>

#include "cpu_ops.hpp"
#include "ops_layernorm.hpp"

namespace tessera::compute::cpu {

namespace {

using core::DType;
using core::Tensor;
using ops::Ncp;
using ops::Split;

// A 16-bit tensor of dtype dt whose pixels form one unit-stride run (an Ncp view in place).
bool half_ncp(const Tensor& t, DType dt) {
  return t.dtype() == dt && ops::has_ncp_view(t, Split::Channels);
}

template <class S>
Ncp<S> half_view(const Tensor& t) {
  const Ncp<char> g = ops::ncp_geometry(t, Split::Channels);
  return {static_cast<S*>(t.raw_data()), g.n, g.c, g.p, g.sn, g.sc};
}

bool all_f32(const OpCall& call, std::initializer_list<const char*> names, bool outputs) {
  for (const char* name : names)
    if ((outputs ? call.output(name) : call.input(name)).dtype() != DType::F32) return false;
  return true;
}

bool forward(const OpCall& call, ThreadPool& pool) {
  const Tensor& x = call.input("x");
  Tensor& y = call.output("y");
  const DType dt = x.dtype();
  if (!half_ncp(x, dt) || !half_ncp(y, dt) || !all_f32(call, {"gamma", "beta"}, false) ||
      !all_f32(call, {"mean", "rstd"}, true))
    return false;
  const std::vector<float> gamma = ops::read_vector<float>(call.input("gamma"));
  const std::vector<float> beta = ops::read_vector<float>(call.input("beta"));
  ops::NcpOut<float> mout(call.output("mean"), false, Split::Samples),
      rout(call.output("rstd"), false, Split::Samples);
  const ops::LayerNormForwardArgs<float, std::uint16_t> a{.x = half_view<const std::uint16_t>(x),
                                                          .y = half_view<std::uint16_t>(y),
                                                          .mean = mout.view,
                                                          .rstd = rout.view,
                                                          .gamma = gamma.data(),
                                                          .beta = beta.data(),
                                                          .eps = call.scalar("eps"),
                                                          .half = dt,
                                                          .like = &x};
  ops::layernorm_forward_blocks(a, pool);
  mout.commit();
  rout.commit();
  return true;
}

bool backward(const OpCall& call, ThreadPool& pool) {
  const Tensor& dy = call.input("dy");
  const Tensor& x = call.input("x");
  Tensor& dx = call.output("dx");
  const DType dt = x.dtype();
  if (!half_ncp(dy, dt) || !half_ncp(x, dt) || !half_ncp(dx, dt) ||
      !all_f32(call, {"gamma", "mean", "rstd"}, false) || !all_f32(call, {"dgamma", "dbeta"}, true))
    return false;
  const std::vector<float> gamma = ops::read_vector<float>(call.input("gamma"));
  const ops::NcpIn<float> min(call.input("mean"), Split::Samples),
      rin(call.input("rstd"), Split::Samples);
  const ops::LayerNormBackwardArgs<float, std::uint16_t> a{.dy = half_view<const std::uint16_t>(dy),
                                                           .x = half_view<const std::uint16_t>(x),
                                                           .mean = min.view,
                                                           .rstd = rin.view,
                                                           .dx = half_view<std::uint16_t>(dx),
                                                           .gamma = gamma.data(),
                                                           .half = dt,
                                                           .like = &dy};
  const std::vector<double> part = ops::layernorm_backward_blocks(a, pool);
  ops::store_layernorm_grads<float>(call, part, x.size(1));
  return true;
}

}  // namespace

bool run_half_norm(const OpCall& call, ThreadPool& pool) {
  if (call.kind == OpKind::LayerNormForward) return forward(call, pool);
  if (call.kind == OpKind::LayerNormBackward) return backward(call, pool);
  return false;
}

}  // namespace tessera::compute::cpu
