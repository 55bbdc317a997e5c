// Internal to the image datasets: the per-sample geometry (zoom, crop, flip drawn from a counter
// hash), the filter taps that map output pixels back to source pixels, and the resampling passes.
// No I/O: the caller decodes the source rows and columns the taps name.
#pragma once

#include <cstdint>
#include <vector>

#include "image_decode.hpp"

namespace tessera::data::internal {

/// splitmix64's finaliser: a bijective mix of a 64-bit counter.
std::uint64_t splitmix64(std::uint64_t x);

/// Draw `stream` of a sample in an epoch, uniform in [0, 1): with mix = splitmix64,
/// u = (mix(mix(mix(mix(seed) ^ sample) ^ epoch) ^ stream) >> 11) · 2^−53. A pure function of its
/// arguments: every thread and rank draws the same. Streams: 0 zoom, 1 crop row, 2 crop column,
/// 3 flip.
double uniform_draw(std::uint64_t seed, std::int64_t sample, std::int64_t epoch, int stream);

/// What the transform of every sample depends on (ImageFolderOptions' part of it).
struct TransformSpec {
  int height = 0, width = 0;  ///< output size
  bool augment = true;
  double scale_min = 1.0, scale_max = 1.0;
  bool flip = true;
  std::uint64_t seed = 0;
};

/// One sample's geometry: the source is scaled by k to resized_h × resized_w (covering the output),
/// the output is the window at (crop_y, crop_x) of that, mirrored left-right when flip.
struct Geometry {
  double k = 1.0;
  std::int64_t resized_h = 0, resized_w = 0;
  std::int64_t crop_y = 0, crop_x = 0;
  bool flip = false;
};

/// The geometry of `sample` in `epoch` for a src_h × src_w source. With augment: zoom
/// s = scale_min + (scale_max − scale_min)·u0, k = max(H/h, W/w)·s, resized = max(out,
/// round(src·k)) per side, crop = floor(u·(resized − out + 1)) (u1 rows, u2 columns, clamped),
/// flip = flip && u3 < 1/2. Without: s = 1, crop = (resized − out) / 2, no flip.
Geometry draw_geometry(const TransformSpec& spec, int src_h, int src_w, std::int64_t sample,
                       std::int64_t epoch);

/// Resized-grid coordinates of output positions [o0, o1) on one axis (`out_len` long): o + crop,
/// or crop + out_len − 1 − o when mirrored.
std::vector<std::int64_t> resized_coords(std::int64_t o0, std::int64_t o1, std::int64_t crop,
                                         std::int64_t out_len, bool mirror);

/// For each output position of one axis, the source pixels its value is made of: source indices
/// first[i] .. first[i] + count[i] − 1 with weights weights[offset[i] ...] (summing to 1).
struct AxisTaps {
  std::vector<int> first, count;
  std::vector<std::size_t> offset;
  std::vector<float> weights;
  int src0 = 0, src1 = 0;  ///< the source range all taps lie in: what to decode
  bool identity = false;   ///< k == 1: one tap of weight 1 each (the source pixel itself)
};

/// Linear taps at scale k over a source of `src_len` pixels, PIL's BILINEAR: centre
/// c = (r + 0.5)/k in source pixels, support σ = max(1/k, 1), taps x in [floor(c − σ + 0.5),
/// floor(c + σ + 0.5)) cut to the source, weight tri((x − c + 0.5)/σ) (tri(t) = max(0, 1 − |t|)),
/// normalised over the taps kept. For k ≥ 1 that is bilinear with half-pixel centres and
/// edge-clamping; for k < 1 an antialiased triangle; at k == 1 the identity. Weights depend on r
/// only, so every part of an image computes a pixel alike.
AxisTaps linear_taps(const std::vector<std::int64_t>& resized, double k, int src_len);

/// Nearest source pixel of each resized coordinate: min(floor((r + 0.5)/k), src_len − 1).
std::vector<int> nearest_taps(const std::vector<std::int64_t>& resized, double k, int src_len);

/// Channel `c` of an output of `out_channels` from a decoded pixel's samples: gray replicated,
/// alpha dropped, RGB to luma (0.299, 0.587, 0.114) when out_channels == 1. `src_channels` as
/// DecodedRegion::channels.
template <class T>
inline float channel_value(const T* px, int src_channels, int c, int out_channels) {
  if (src_channels <= 2) return static_cast<float>(px[0]);
  if (out_channels == 1)
    return 0.299f * static_cast<float>(px[0]) + 0.587f * static_cast<float>(px[1]) +
           0.114f * static_cast<float>(px[2]);
  return static_cast<float>(px[c]);
}

/// Writes output channel `c` (of `out_channels`) for the output positions `rows` × `cols` name,
/// from `src` (a decoded region holding rows.src0..src1 × cols.src0..src1): resampled (horizontal
/// pass on each source row, then vertical; fused multiply-adds in tap order), then scaled as
/// v·a + b (the normalisation). `out` is rows × cols floats, row-major; `scratch` is reused.
void resample_channel(const DecodedRegion& src, int c, int out_channels, const AxisTaps& rows,
                      const AxisTaps& cols, float a, float b, float* out,
                      std::vector<float>& scratch);

}  // namespace tessera::data::internal
