// The image datasets' geometry and resampling: counter-hash draws, PIL-style bilinear taps and the
// two separable passes. Every output pixel is computed from its own coordinates only, so a rank's
// part of an image equals the same pixels of the whole.
#include "image_transform.hpp"

#include <algorithm>
#include <cmath>

#include "tessera/core/error.hpp"

namespace tessera::data::internal {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double uniform_draw(std::uint64_t seed, std::int64_t sample, std::int64_t epoch, int stream) {
  std::uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ static_cast<std::uint64_t>(sample));
  h = splitmix64(h ^ static_cast<std::uint64_t>(epoch));
  h = splitmix64(h ^ static_cast<std::uint64_t>(stream));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

namespace {

// Offset uniform in [0, range] from draw u in [0, 1).
std::int64_t pick(double u, std::int64_t range) {
  return std::min(range, static_cast<std::int64_t>(std::floor(u * static_cast<double>(range + 1))));
}

}  // namespace

Geometry draw_geometry(const TransformSpec& spec, int src_h, int src_w, std::int64_t sample,
                       std::int64_t epoch) {
  const double s = spec.augment ? spec.scale_min + (spec.scale_max - spec.scale_min) *
                                                       uniform_draw(spec.seed, sample, epoch, 0)
                                : 1.0;
  Geometry g;
  g.k =
      std::max(static_cast<double>(spec.height) / src_h, static_cast<double>(spec.width) / src_w) *
      s;
  g.resized_h = std::max<std::int64_t>(spec.height, std::llround(src_h * g.k));
  g.resized_w = std::max<std::int64_t>(spec.width, std::llround(src_w * g.k));
  const std::int64_t range_h = g.resized_h - spec.height, range_w = g.resized_w - spec.width;
  if (spec.augment) {
    g.crop_y = pick(uniform_draw(spec.seed, sample, epoch, 1), range_h);
    g.crop_x = pick(uniform_draw(spec.seed, sample, epoch, 2), range_w);
    g.flip = spec.flip && uniform_draw(spec.seed, sample, epoch, 3) < 0.5;
  } else {
    g.crop_y = range_h / 2;
    g.crop_x = range_w / 2;
  }
  return g;
}

std::vector<std::int64_t> resized_coords(std::int64_t o0, std::int64_t o1, std::int64_t crop,
                                         std::int64_t out_len, bool mirror) {
  std::vector<std::int64_t> r;
  r.reserve(static_cast<std::size_t>(o1 - o0));
  for (std::int64_t o = o0; o < o1; ++o) r.push_back(mirror ? crop + out_len - 1 - o : crop + o);
  return r;
}

AxisTaps linear_taps(const std::vector<std::int64_t>& resized, double k, int src_len) {
  AxisTaps t;
  t.identity = k == 1.0;
  t.src0 = src_len;
  t.src1 = 0;
  const double scale = 1.0 / k, support = std::max(scale, 1.0);
  std::vector<double> w;
  for (const std::int64_t r : resized) {
    const double centre = (static_cast<double>(r) + 0.5) * scale;
    int x0 = std::max(0, static_cast<int>(std::floor(centre - support + 0.5)));
    int x1 = std::min(src_len, static_cast<int>(std::floor(centre + support + 0.5)));
    if (t.identity) x0 = static_cast<int>(std::min<std::int64_t>(r, src_len - 1)), x1 = x0 + 1;
    TESSERA_ASSERT(x1 > x0, "resized coordinate ", r, " at scale ", k, " maps outside a source of ",
                   src_len, " pixels");
    w.clear();
    double sum = 0;
    for (int x = x0; x < x1; ++x) {
      const double v =
          t.identity ? 1.0 : std::max(0.0, 1.0 - std::abs((x - centre + 0.5) / support));
      w.push_back(v);
      sum += v;
    }
    // Zero-weight taps at either end change nothing: drop them so they are not decoded.
    std::size_t lo = 0, hi = w.size();
    while (hi > lo + 1 && w[hi - 1] == 0) --hi;
    while (lo + 1 < hi && w[lo] == 0) ++lo;
    t.first.push_back(x0 + static_cast<int>(lo));
    t.count.push_back(static_cast<int>(hi - lo));
    t.offset.push_back(t.weights.size());
    for (std::size_t i = lo; i < hi; ++i) t.weights.push_back(static_cast<float>(w[i] / sum));
    t.src0 = std::min(t.src0, t.first.back());
    t.src1 = std::max(t.src1, t.first.back() + t.count.back());
  }
  return t;
}

std::vector<int> nearest_taps(const std::vector<std::int64_t>& resized, double k, int src_len) {
  std::vector<int> idx;
  idx.reserve(resized.size());
  for (const std::int64_t r : resized) {
    const double x = std::floor((static_cast<double>(r) + 0.5) / k);
    idx.push_back(static_cast<int>(std::min<double>(x, src_len - 1)));
  }
  return idx;
}

namespace {

// One output row of one channel at k == 1: source samples `stride` apart from the leftmost
// column, reversed when mirrored. The stride is a template argument so the loop
// vectorises (interleaved loads).
template <int kStride, class T>
void copy_row(const T* px, int n, bool mirror, float a, float b, float* out) {
  for (int j = 0; j < n; ++j) out[j] = std::fma(static_cast<float>(px[j * kStride]), a, b);
  if (mirror) std::reverse(out, out + n);  // in cache: cheaper than a reversed loop
}

// k == 1 on both axes: one pass from the decoded samples straight into the output (crop and flip
// are the taps' source indices).
template <class T>
void copy_channel(const T* data, const DecodedRegion& src, int c, int out_channels,
                  const AxisTaps& rows, const AxisTaps& cols, float a, float b, float* out) {
  const int ch = src.channels, n = static_cast<int>(cols.first.size());
  const bool mirror = n > 1 && cols.first[1] < cols.first[0];
  const int left = std::min(cols.first.front(), cols.first.back()) - src.region.col0;
  const bool luma = out_channels == 1 && ch >= 3;
  const int src_c = ch <= 2 ? 0 : c;
  for (std::size_t y = 0; y < rows.first.size(); ++y, out += n) {
    const T* px =
        data + (static_cast<std::size_t>(rows.first[y] - src.region.row0) * src.region.cols() +
                static_cast<std::size_t>(left)) *
                   ch;
    if (luma) {
      for (int j = 0; j < n; ++j)
        out[mirror ? n - 1 - j : j] = std::fma(channel_value(px + j * ch, ch, c, 1), a, b);
      continue;
    }
    px += src_c;
    switch (ch) {
      case 1:
        copy_row<1>(px, n, mirror, a, b, out);
        break;
      case 2:
        copy_row<2>(px, n, mirror, a, b, out);
        break;
      case 3:
        copy_row<3>(px, n, mirror, a, b, out);
        break;
      default:
        copy_row<4>(px, n, mirror, a, b, out);
        break;
    }
  }
}

// Channel c of one decoded row as floats: a strided copy (the stride a template argument, so it
// vectorises), or luma.
template <int kStride, class T>
void strided_line(const T* px, int n, float* line) {
  for (int x = 0; x < n; ++x) line[x] = static_cast<float>(px[x * kStride]);
}

template <class T>
void to_line(const T* row, int n, int ch, int c, int out_channels, float* line) {
  if (out_channels == 1 && ch >= 3) {
    for (int x = 0; x < n; ++x) line[x] = channel_value(row + x * ch, ch, c, 1);
    return;
  }
  const T* px = row + (ch <= 2 ? 0 : c);
  switch (ch) {
    case 1:
      strided_line<1>(px, n, line);
      break;
    case 2:
      strided_line<2>(px, n, line);
      break;
    case 3:
      strided_line<3>(px, n, line);
      break;
    default:
      strided_line<4>(px, n, line);
      break;
  }
}

// The horizontal taps as `width` dense rows of one entry per output column (tap i of every
// column, then tap i + 1 ...), padded with weight 0 at the column's first source pixel: a padded
// tap adds exactly 0, so a column's sum is the same whatever the width, and the loop over
// columns vectorises (gathers).
struct DenseTaps {
  int width = 0;
  std::vector<int> index;  // into the decoded line
  std::vector<float> weight;
};

DenseTaps dense_taps(const AxisTaps& t, int col0) {
  DenseTaps d;
  const std::size_t n = t.first.size();
  d.width = n > 0 ? *std::max_element(t.count.begin(), t.count.end()) : 0;
  d.index.resize(n * d.width);
  d.weight.resize(n * d.width);
  for (std::size_t x = 0; x < n; ++x)
    for (int i = 0; i < d.width; ++i) {
      const bool real = i < t.count[x];
      d.index[i * n + x] = t.first[x] - col0 + (real ? i : 0);
      d.weight[i * n + x] = real ? t.weights[t.offset[x] + i] : 0.0f;
    }
  return d;
}

template <class T>
void resample_typed(const T* data, const DecodedRegion& src, int c, int out_channels,
                    const AxisTaps& rows, const AxisTaps& cols, float a, float b, float* out,
                    std::vector<float>& scratch) {
  const int ch = src.channels, src_cols = src.region.cols();
  const std::size_t ncols = cols.first.size(),
                    nrows = static_cast<std::size_t>(rows.src1 - rows.src0);
  const DenseTaps h = dense_taps(cols, src.region.col0);
  scratch.resize(static_cast<std::size_t>(src_cols) + nrows * ncols);  // all written below
  float* line = scratch.data();
  float* tmp = line + src_cols;
  // Horizontal pass: each source row the vertical taps need, to the part's output columns; the
  // first tap's product starts the sum (fma(w, v, 0) == w·v).
  for (std::size_t y = 0; y < nrows; ++y) {
    const std::size_t row = static_cast<std::size_t>(rows.src0 - src.region.row0) + y;
    to_line(data + row * src_cols * ch, src_cols, ch, c, out_channels, line);
    float* t = tmp + y * ncols;
    for (std::size_t x = 0; x < ncols; ++x) t[x] = h.weight[x] * line[h.index[x]];
    for (int i = 1; i < h.width; ++i) {
      const float* w = h.weight.data() + i * ncols;
      const int* idx = h.index.data() + i * ncols;
      for (std::size_t x = 0; x < ncols; ++x) t[x] = std::fma(w[x], line[idx[x]], t[x]);
    }
  }
  // Vertical pass: whole output rows at a time (vectorisable over columns).
  for (std::size_t y = 0; y < rows.first.size(); ++y) {
    float* o = out + y * ncols;
    const float* w = rows.weights.data() + rows.offset[y];
    const float* t0 = tmp + static_cast<std::size_t>(rows.first[y] - rows.src0) * ncols;
    for (std::size_t x = 0; x < ncols; ++x) o[x] = w[0] * t0[x];
    for (int i = 1; i < rows.count[y]; ++i) {
      const float* t = t0 + static_cast<std::size_t>(i) * ncols;
      for (std::size_t x = 0; x < ncols; ++x) o[x] = std::fma(w[i], t[x], o[x]);
    }
    for (std::size_t x = 0; x < ncols; ++x) o[x] = std::fma(o[x], a, b);
  }
}

}  // namespace

void resample_channel(const DecodedRegion& src, int c, int out_channels, const AxisTaps& rows,
                      const AxisTaps& cols, float a, float b, float* out,
                      std::vector<float>& scratch) {
  if (rows.first.empty() || cols.first.empty()) return;
  const bool wide = src.bit_depth == 16;
  if (rows.identity && cols.identity) {
    if (wide)
      copy_channel(src.u16.data(), src, c, out_channels, rows, cols, a, b, out);
    else
      copy_channel(src.u8.data(), src, c, out_channels, rows, cols, a, b, out);
  } else if (wide) {
    resample_typed(src.u16.data(), src, c, out_channels, rows, cols, a, b, out, scratch);
  } else {
    resample_typed(src.u8.data(), src, c, out_channels, rows, cols, a, b, out, scratch);
  }
}

}  // namespace tessera::data::internal
