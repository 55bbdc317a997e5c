// copy: y = x converted to y's dtype (f32 ↔ f64, or the same dtype), either side any strides.
// Rows of the last dimension are spread over the pool; each row is one strided loop.
#include "ops_common.hpp"
#include "ops_kernels.hpp"

namespace tessera::compute::cpu::ops {

namespace {

template <class S, class D>
void copy_convert(const core::Tensor& x, core::Tensor& y, ThreadPool& pool) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  const S* src = x.data<S>();
  D* dst = y.data<D>();
  if (x.is_contiguous() && y.is_contiguous()) {
    parallel_flat(pool, n, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) dst[i] = static_cast<D>(src[i]);
    });
    return;
  }
  const int nd = x.ndim();
  const std::int64_t len = nd > 0 ? x.size(nd - 1) : 1, rows = n / len;
  const std::int64_t sx = nd > 0 ? x.stride(nd - 1) : 1, sy = nd > 0 ? y.stride(nd - 1) : 1;
  const std::int64_t per_unit = std::max<std::int64_t>(1, kFlatChunk / len);
  parallel_units(pool, ceil_div(rows, per_unit), per_unit * len, [&](std::int64_t u, int) {
    for (std::int64_t r = u * per_unit; r < std::min(rows, (u + 1) * per_unit); ++r) {
      // Offsets of row r: its index over the leading dims, last of them fastest.
      std::int64_t ox = 0, oy = 0;
      for (std::int64_t d = nd - 2, rest = r; d >= 0; --d) {
        const std::int64_t i = rest % x.size(static_cast<int>(d));
        rest /= x.size(static_cast<int>(d));
        ox += i * x.stride(static_cast<int>(d));
        oy += i * y.stride(static_cast<int>(d));
      }
      const S* s = src + ox;
      D* t = dst + oy;
      for (std::int64_t j = 0; j < len; ++j) t[j * sy] = static_cast<D>(s[j * sx]);
    }
  });
}

}  // namespace

template <class T>
void run_copy(const OpCall& call, ThreadPool& pool) {
  const core::Tensor& x = call.input("x");
  core::Tensor& y = call.output("y");
  switch (y.dtype()) {
    case core::DType::F32: return copy_convert<T, float>(x, y, pool);
    case core::DType::F64: return copy_convert<T, double>(x, y, pool);
    default:
      throw Unsupported(detail::cat("cpu copy: target ", y.describe(),
                                    " is not supported (the cpu backend converts between f32 and f64)"));
  }
}

template void run_copy<float>(const OpCall&, ThreadPool&);
template void run_copy<double>(const OpCall&, ThreadPool&);

}  // namespace tessera::compute::cpu::ops
