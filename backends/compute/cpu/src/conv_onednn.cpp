// Pointwise convolutions through oneDNN's matmul: per sample, group and block of pixels one 2-d
// product on the NCHW planes in place (row stride H·W), single-threaded, the blocks spread over the
// backend's pool. oneDNN (Debian's 2.6, OpenMP runtime) would otherwise start an OpenMP team per
// calling thread, several per process with in-process ranks; each task sets its thread's team to
// one for the call and restores it (a peer in the same process keeps its threads).
#include "conv_onednn.hpp"

#include <algorithm>
#include <mutex>
#include <type_traits>

#include "convert.hpp"
#include "gemm_util.hpp"
#include "onednn_util.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/core/error.hpp"

namespace tessera::compute::cpu {

using core::DType;
using core::Tensor;

#if TESSERA_HAVE_ONEDNN

OnednnCache::OnednnCache() = default;
OnednnCache::~OnednnCache() = default;

const Matmul& OnednnCache::get(const MatmulShape& s) {
  auto it = entries_.find(s);
  if (it != entries_.end()) return *it->second;
  // oneDNN's global primitive cache hands a primitive created on one rank's thread to another
  // rank's backend through its own synchronisation, which ThreadSanitizer cannot see (CI's tsan
  // run reported it). Creating under one process-wide lock makes that hand-off visible, and costs
  // nothing: a backend creates each shape once.
  static std::mutex creating;
  const std::lock_guard lock(creating);
  OneThread one;  // the primitive is laid out for the one thread that will run it
  using dims = dnnl::memory::dims;
  auto m = std::make_unique<Matmul>();
  try {
    m->a = dnnl::memory::desc(dims{s.m, s.k}, dnnl_type(s.ab), dims{s.a_rs, s.a_cs});
    m->b = dnnl::memory::desc(dims{s.k, s.n}, dnnl_type(s.ab), dims{s.b_rs, s.b_cs});
    m->c = dnnl::memory::desc(dims{s.m, s.n}, dnnl_type(s.c), dims{s.c_rs, s.c_cs});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (s.sum) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(m->a, m->b, m->c), attr,
                                          onednn_engine());
    m->impl = pd.impl_info_str();
    m->scratch = pd.scratchpad_desc();
    m->scratch_bytes = m->scratch.get_size();
    m->prim = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    throw Unsupported(tessera::detail::cat("cpu (oneDNN): no matmul for ", core::dtype_name(s.ab),
                                           " ", s.m, "x", s.k, " · ", s.k, "x", s.n, " -> ",
                                           core::dtype_name(s.c), ": ", e.what()));
  }
  return *entries_.emplace(s, std::move(m)).first->second;
}

const std::string& OnednnCache::impl(const MatmulShape& s) { return get(s).impl; }

template <class S>
void onednn_pointwise_forward(const ConvContext& c, OnednnCache& cache, PlaneView<const S> x,
                              const float* w, const float* bias, PlaneView<S> y) {
  const ConvDims& d = c.d;
  const int g_n = c.p.groups, cpi = d.cin / g_n, cpo = d.cout / g_n, hw = d.h * d.w;
  const int blocks = ceil_div(hw, kOnednnPixelBlock), tail = hw - (blocks - 1) * kOnednnPixelBlock;
  const DType dt = dtype_for<S>(c);
  auto shape = [&](int np) {
    return MatmulShape{dt, dt, cpo, cpi, np, cpi, 1, x.sc, 1, y.sc, 1, bias != nullptr};
  };
  const Matmul& full = cache.get(shape(std::min(kOnednnPixelBlock, hw)));
  const Matmul& last = cache.get(shape(tail));
  Tensor wbuf, bbuf;
  const S* ws = weights_as<S>(c, w, std::int64_t(d.cout) * cpi, wbuf);
  const S* bs = bias ? weights_as<S>(c, bias, d.cout, bbuf) : nullptr;
  const Scratch scratch(c, std::max(full.scratch_bytes, last.scratch_bytes));
  c.pool.run(d.n * blocks, [&](int task, int worker) {
    OneThread one;
    const int n = task / blocks, b = task % blocks, p0 = b * kOnednnPixelBlock;
    const int np = std::min(kOnednnPixelBlock, hw - p0);
    const Matmul& mm = b == blocks - 1 ? last : full;
    for (int g = 0; g < g_n; ++g) {
      S* yb = y.plane(n, g * cpo) + p0;
      if (bs)
        for (int r = 0; r < cpo; ++r) std::fill(yb + r * y.sc, yb + r * y.sc + np, bs[g * cpo + r]);
      run_matmul(mm, ws + std::int64_t(g) * cpo * cpi, x.plane(n, g * cpi) + p0, yb,
                 scratch.at(worker));
    }
  });
}

template <class S>
void onednn_pointwise_backward_data(const ConvContext& c, OnednnCache& cache, PlaneView<const S> dy,
                                    const float* w, PlaneView<S> dx, bool accumulate) {
  const ConvDims& d = c.d;
  const int g_n = c.p.groups, cpi = d.cin / g_n, cpo = d.cout / g_n, hw = d.h * d.w;
  const int blocks = ceil_div(hw, kOnednnPixelBlock), tail = hw - (blocks - 1) * kOnednnPixelBlock;
  const DType dt = dtype_for<S>(c);
  // A = Wᵀ (cpi × cpo): element (i, o) is W[o·cpi + i].
  auto shape = [&](int np) {
    return MatmulShape{dt, dt, cpi, cpo, np, 1, cpi, dy.sc, 1, dx.sc, 1, accumulate};
  };
  const Matmul& full = cache.get(shape(std::min(kOnednnPixelBlock, hw)));
  const Matmul& last = cache.get(shape(tail));
  Tensor wbuf;
  const S* ws = weights_as<S>(c, w, std::int64_t(d.cout) * cpi, wbuf);
  const Scratch scratch(c, std::max(full.scratch_bytes, last.scratch_bytes));
  c.pool.run(d.n * blocks, [&](int task, int worker) {
    OneThread one;
    const int n = task / blocks, b = task % blocks, p0 = b * kOnednnPixelBlock;
    const Matmul& mm = b == blocks - 1 ? last : full;
    for (int g = 0; g < g_n; ++g)
      run_matmul(mm, ws + std::int64_t(g) * cpo * cpi, dy.plane(n, g * cpo) + p0,
                 dx.plane(n, g * cpi) + p0, scratch.at(worker));
  });
}

template <class S>
void onednn_pointwise_backward_weight(const ConvContext& c, OnednnCache& cache,
                                      PlaneView<const S> x, PlaneView<const S> dy, float* dw,
                                      float* db, bool accumulate) {
  const ConvDims& d = c.d;
  const int g_n = c.p.groups, cpi = d.cin / g_n, cpo = d.cout / g_n, hw = d.h * d.w;
  const int blocks = ceil_div(hw, kOnednnPixelBlock), tail = hw - (blocks - 1) * kOnednnPixelBlock;
  const DType dt = dtype_for<S>(c);
  // dW_g (cpo × cpi) += dY block (cpo × np) · X blockᵀ (np × cpi: element (p, i) at i·sc + p).
  auto shape = [&](int np) {
    return MatmulShape{dt, DType::F32, cpo, np, cpi, dy.sc, 1, 1, x.sc, cpi, 1, true};
  };
  const Matmul& full = cache.get(shape(std::min(kOnednnPixelBlock, hw)));
  const Matmul& last = cache.get(shape(tail));
  const std::int64_t wsize = std::int64_t(d.cout) * cpi, part = wsize + d.cout;
  const int parts = c.pool.size(), total = d.n * blocks;
  // Per part: its dW and db partials, then a row of kOnednnPixelBlock f32 (db of bf16 rows).
  const std::int64_t stride = part + kOnednnPixelBlock;
  Tensor partials = workspace<float>(c, stride * parts);
  const Scratch scratch(c, std::max(full.scratch_bytes, last.scratch_bytes));
  c.pool.run(parts, [&](int t, int worker) {
    OneThread one;
    float* pw = partials.data<float>() + stride * t;
    float* pb = pw + wsize;
    float* row = pw + part;
    std::fill(pw, pw + part, 0.0f);
    for (int task = total * t / parts; task < total * (t + 1) / parts; ++task) {
      const int n = task / blocks, b = task % blocks, p0 = b * kOnednnPixelBlock;
      const int np = std::min(kOnednnPixelBlock, hw - p0);
      const Matmul& mm = b == blocks - 1 ? last : full;
      for (int g = 0; g < g_n; ++g) {
        const S* dyb = dy.plane(n, g * cpo) + p0;
        run_matmul(mm, dyb, x.plane(n, g * cpi) + p0, pw + std::int64_t(g) * cpo * cpi,
                   scratch.at(worker));
        if (db) add_row_sums(dyb, dy.sc, cpo, np, pb + g * cpo, row, c.half);
      }
    }
  });
  reduce_partials(dw, wsize, partials.data<float>(), parts, stride, accumulate);
  if (db) reduce_partials(db, d.cout, partials.data<float>() + wsize, parts, stride, accumulate);
}

#else  // built without oneDNN: onednn_applies() is false, so these are never reached

struct Matmul {};
OnednnCache::OnednnCache() = default;
const std::string& OnednnCache::impl(const MatmulShape& s) {
  get(s);
  static const std::string none;
  return none;
}
OnednnCache::~OnednnCache() = default;
const Matmul& OnednnCache::get(const MatmulShape&) {
  throw Unsupported(
      "cpu: this build has no oneDNN (TESSERA_WITH_ONEDNN=OFF or libdnnl-dev missing)");
}
template <class S>
void onednn_pointwise_forward(const ConvContext&, OnednnCache& cache, PlaneView<const S>,
                              const float*, const float*, PlaneView<S>) {
  cache.get({});
}
template <class S>
void onednn_pointwise_backward_data(const ConvContext&, OnednnCache& cache, PlaneView<const S>,
                                    const float*, PlaneView<S>, bool) {
  cache.get({});
}
template <class S>
void onednn_pointwise_backward_weight(const ConvContext&, OnednnCache& cache, PlaneView<const S>,
                                      PlaneView<const S>, float*, float*, bool) {
  cache.get({});
}

#endif

#define TESSERA_INSTANTIATE(S)                                                                    \
  template void onednn_pointwise_forward<S>(const ConvContext&, OnednnCache&, PlaneView<const S>, \
                                            const float*, const float*, PlaneView<S>);            \
  template void onednn_pointwise_backward_data<S>(                                                \
      const ConvContext&, OnednnCache&, PlaneView<const S>, const float*, PlaneView<S>, bool);    \
  template void onednn_pointwise_backward_weight<S>(const ConvContext&, OnednnCache&,             \
                                                    PlaneView<const S>, PlaneView<const S>,       \
                                                    float*, float*, bool);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(std::uint16_t)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu
