// Plumbing shared by the non-convolution CPU kernels: (N,C,P) views with copy fallbacks, task
// splitting, fixed-order partial sums.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"
#include "thread_pool.hpp"

namespace tessera::compute::cpu::ops {

/// How a tensor's dims map onto (N, C, P): Channels = dim 0, dim 1, dims 2.. (NCHW, (N,C));
/// Samples = dim 0, none (C = 1), dims 1.. (anything with a leading sample dim).
enum class Split { Channels, Samples };

/// A tensor seen as (N, C, P): sample, channel, pixel. The pixels of one (n, c) are contiguous;
/// N and C have any strides (element units). T may be const.
template <class T>
struct Ncp {
  T* data = nullptr;
  std::int64_t n = 0, c = 0, p = 0, sn = 0, sc = 0;
  T* plane(std::int64_t i, std::int64_t ch) const { return data + i * sn + ch * sc; }
};

/// True when the pixel dims of `t` (see Split) form one unit-stride run, so an Ncp view exists.
bool has_ncp_view(const core::Tensor& t, Split split);
/// The (N, C, P) sizes and strides of `t`; requires has_ncp_view(t, split).
Ncp<char> ncp_geometry(const core::Tensor& t, Split split);

/// A Workspace tensor like `t` (shape, dtype, allocator), uninitialised.
core::Tensor workspace_like(const core::Tensor& t);
/// A contiguous 1-d Workspace tensor of `count` elements of `dtype`, booked with `like`'s allocator.
core::Tensor workspace(const core::Tensor& like, core::DType dtype, std::int64_t count);

/// An input as an Ncp view of itself when its pixels are contiguous, else of a Workspace copy.
template <class T>
class NcpIn {
 public:
  explicit NcpIn(const core::Tensor& t, Split split = Split::Channels)
      : hold_(has_ncp_view(t, split) ? t : t.clone(core::MemCategory::Workspace)) {
    const Ncp<char> g = ncp_geometry(hold_, split);
    view = {hold_.data<T>(), g.n, g.c, g.p, g.sn, g.sc};
  }
  Ncp<const T> view;

 private:
  core::Tensor hold_;
};

/// An output written in place when its pixels are contiguous, else through a contiguous Workspace
/// copy (holding the old values when `keep_old`) that commit() copies back.
template <class T>
class NcpOut {
 public:
  NcpOut(core::Tensor& t, bool keep_old, Split split = Split::Channels) : dst_(t) {
    if (!has_ncp_view(t, split)) {
      tmp_ = workspace_like(t);
      if (keep_old) tmp_.copy_from(t);
    }
    const core::Tensor& target = tmp_.defined() ? tmp_ : dst_;
    const Ncp<char> g = ncp_geometry(target, split);
    view = {target.data<T>(), g.n, g.c, g.p, g.sn, g.sc};
  }
  void commit() {
    if (tmp_.defined()) dst_.copy_from(tmp_);
  }
  Ncp<T> view;

 private:
  core::Tensor& dst_;
  core::Tensor tmp_;
};

/// An elementwise input as one contiguous array (itself, or a Workspace copy of a view).
template <class T>
class FlatIn {
 public:
  explicit FlatIn(const core::Tensor& t)
      : hold_(t.is_contiguous() ? t : t.clone(core::MemCategory::Workspace)) {}
  const T* data() const { return hold_.data<T>(); }

 private:
  core::Tensor hold_;
};

/// An elementwise output as one contiguous array: itself, or a Workspace copy (holding the old
/// values when `keep_old`) that commit() copies back.
template <class T>
class FlatOut {
 public:
  FlatOut(core::Tensor& t, bool keep_old) : dst_(t) {
    if (!t.is_contiguous()) {
      tmp_ = workspace_like(t);
      if (keep_old) tmp_.copy_from(t);
    }
  }
  T* data() const { return (tmp_.defined() ? tmp_ : dst_).template data<T>(); }
  void commit() {
    if (tmp_.defined()) dst_.copy_from(tmp_);
  }

 private:
  core::Tensor& dst_;
  core::Tensor tmp_;
};

/// A 1-d tensor (any stride) as a vector.
template <class T>
std::vector<T> read_vector(const core::Tensor& t) {
  std::vector<T> v(static_cast<std::size_t>(t.size(0)));
  const T* p = t.data<T>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = p[static_cast<std::int64_t>(i) * t.stride(0)];
  return v;
}

/// Pixels per block of the kernels that stage `rows` rows of a pixel block (layer norm, softmax):
/// the staged block fits in 128 KiB, so it stays in L2 (512 KiB here) between passes.
template <class T>
std::int64_t block_pixels(std::int64_t pixels, std::int64_t rows) {
  const std::int64_t fit = (128 * 1024) / std::max<std::int64_t>(1, rows * std::int64_t(sizeof(T)));
  return std::min(pixels, std::clamp<std::int64_t>(fit / 16 * 16, 16, 1024));
}

/// Rows ahead that the row-walking kernels prefetch: the rows of a pixel block are short runs
/// (a few cache lines) H·W apart, too short for the hardware prefetcher to learn.
inline constexpr std::int64_t kPrefetchRows = 4;

/// Prefetches the `count` elements at p (for reading, or for writing when `write`).
template <class T>
inline void prefetch_run(const T* p, std::int64_t count, bool write = false) {
  constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(T));
  for (std::int64_t i = 0; i < count; i += kLine) {
    if (write)
      __builtin_prefetch(p + i, 1);
    else
      __builtin_prefetch(p + i, 0);
  }
}

/// Per-worker scratch, booked as Workspace: `t_count` elements of T and `d_count` doubles each.
template <class T>
struct Scratch {
  Scratch(const core::Tensor& like, int workers, std::int64_t t_count, std::int64_t d_count)
      : tn(t_count), dn(d_count),
        t(workspace(like, core::dtype_of<T>, tn * workers)),
        d(workspace(like, core::DType::F64, dn * workers)) {}
  T* ts(int w) const { return t.data<T>() + tn * w; }
  double* ds(int w) const { return d.data<double>() + dn * w; }
  std::int64_t tn, dn;
  core::Tensor t, d;
};

/// Elements below which a call runs on the calling thread alone (waking workers costs more).
inline constexpr std::int64_t kMinParallelElements = 1 << 15;
/// Number of chunks of a fixed-order reduction (independent of the thread count).
inline constexpr std::int64_t kReduceChunks = 32;

/// Runs fn(unit, worker) for every unit in [0, units), in contiguous ranges of units spread over
/// the pool (several ranges per thread). Each unit's result must depend on the unit alone.
/// `unit_elems` (elements touched per unit) keeps small calls on the calling thread.
template <class Fn>
void parallel_units(ThreadPool& pool, std::int64_t units, std::int64_t unit_elems, Fn&& fn) {
  if (units <= 0) return;
  const bool small = units * std::max<std::int64_t>(unit_elems, 1) < kMinParallelElements;
  const std::int64_t tasks =
      pool.size() == 1 || small ? 1 : std::min<std::int64_t>(units, 4 * std::int64_t(pool.size()));
  pool.run(static_cast<int>(tasks), [&](int t, int worker) {
    const std::int64_t u0 = units * t / tasks, u1 = units * (t + 1) / tasks;
    for (std::int64_t u = u0; u < u1; ++u) fn(u, worker);
  });
}

/// Elements per unit of a flat elementwise loop (a multiple of every SIMD width).
inline constexpr std::int64_t kFlatChunk = 1 << 14;

/// Runs fn(begin, end) over [0, n) in chunks of kFlatChunk elements spread over the pool.
template <class Fn>
void parallel_flat(ThreadPool& pool, std::int64_t n, Fn&& fn) {
  const std::int64_t units = (n + kFlatChunk - 1) / kFlatChunk;
  parallel_units(pool, units, kFlatChunk, [&](std::int64_t u, int) {
    fn(u * kFlatChunk, std::min(n, (u + 1) * kFlatChunk));
  });
}

/// Runs fn(plane, begin, end) over the pixels [0, pixels) of `planes` planes, in pieces of at most
/// kFlatChunk pixels spread over the pool.
template <class Fn>
void parallel_planes(ThreadPool& pool, std::int64_t planes, std::int64_t pixels, Fn&& fn) {
  const std::int64_t pieces = std::max<std::int64_t>(1, (pixels + kFlatChunk - 1) / kFlatChunk);
  parallel_units(pool, planes * pieces, std::min(pixels, kFlatChunk), [&](std::int64_t u, int) {
    const std::int64_t b = (u % pieces) * kFlatChunk;
    fn(u / pieces, b, std::min(pixels, b + kFlatChunk));
  });
}

/// A fixed-order reduction: units are grouped into min(units, kReduceChunks) chunks of
/// consecutive units (from `units` alone, never the thread count); chunk k calls
/// fn(unit, worker, acc) for its units in order with acc = its own `width` zeroed doubles.
/// Returns the chunk-major partials; sum_partials adds them in chunk order.
template <class Fn>
std::vector<double> chunk_partials(ThreadPool& pool, std::int64_t units, std::int64_t unit_elems,
                                   std::int64_t width, Fn&& fn) {
  const std::int64_t chunks = std::min(units, kReduceChunks);
  std::vector<double> part(static_cast<std::size_t>(std::max<std::int64_t>(chunks, 0) * width), 0.0);
  parallel_units(pool, chunks, unit_elems * (units / std::max<std::int64_t>(chunks, 1)),
                 [&](std::int64_t k, int worker) {
                   double* acc = part.data() + k * width;
                   for (std::int64_t u = units * k / chunks; u < units * (k + 1) / chunks; ++u)
                     fn(u, worker, acc);
                 });
  return part;
}

/// Σ over chunks (in order) of element i of chunk-major `part` (width = part.size() / chunks).
inline double sum_partials(const std::vector<double>& part, std::int64_t width, std::int64_t i) {
  double s = 0;
  if (width <= 0) return s;
  for (std::size_t k = static_cast<std::size_t>(i); k < part.size(); k += static_cast<std::size_t>(width))
    s += part[k];
  return s;
}

/// Writes reduction results: dst[i·stride] = (accumulate ? dst[i·stride] : 0) + v(i), as T.
template <class T, class V>
void store_reduced(T* dst, std::int64_t stride, std::int64_t count, bool accumulate, V&& v) {
  for (std::int64_t i = 0; i < count; ++i) {
    T& d = dst[i * stride];
    d = static_cast<T>((accumulate ? static_cast<double>(d) : 0.0) + v(i));
  }
}

/// Ceiling of a / b for a ≥ 0, b > 0.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace tessera::compute::cpu::ops
