// Fuzz target: the JPEG and PNG region decoders (core/src/data/image_decode.hpp) on one image file
// in memory: probe (or its header alone, where the end-marker check refuses the file), then the
// whole image and a few regions in each mode that applies (and DCT scales for a JPEG). A
// tessera::Error is a clean rejection; a region that decodes to pixels other than the same
// rectangle of the full decode is a finding, as is any other exception or crash.
#include <cstdint>
#include <string>

#include "../../core/src/data/image_decode.hpp"
#include "fuzz_support.hpp"

namespace {

using namespace tessera::data::internal;

// Headers may claim up to 2^28 pixels; decoding that much is a memory test, not a parser test.
constexpr std::int64_t kMaxFuzzPixels = std::int64_t{1} << 20;

/// One decode request: the input, its probe, and the mode and scale to decode it in.
struct Request {
  const std::uint8_t* data;
  std::size_t size;
  ImageInfo info;
  DecodeMode mode;
  int denom;
};

DecodedRegion decode(const Request& q, Region region) {
  return decode_region_memory(q.data, q.size, "fuzz input", q.info, region, q.mode, q.denom);
}

/// Decodes `region` and checks it against the same rectangle of `full`.
void check_region(const Request& q, const DecodedRegion& full, Region region) {
  const DecodedRegion got = decode(q, region);
  for (int r = 0; r < region.rows(); ++r)
    for (int c = 0; c < region.cols(); ++c)
      for (int k = 0; k < got.channels; ++k)
        if (got.at(r, c, k) != full.at(region.row0 + r, region.col0 + c, k))
          tessera::fuzz::finding("image", "a region differs from the full decode");
}

void decode_all(const Request& q) {
  const int w = (q.info.width + q.denom - 1) / q.denom;
  const int h = (q.info.height + q.denom - 1) / q.denom;
  const DecodedRegion full = decode(q, Region{0, h, 0, w});
  const Region regions[] = {
      {h / 3, h - h / 3, w / 4, w - w / 4}, {h - 1, h, 0, 1}, {0, h, w / 2, w / 2 + 1}};
  for (const Region& region : regions) {
    try {
      check_region(q, full, region);
    } catch (const tessera::Error& e) {
      // The full decode succeeded, so a region can only fail where it reads less (never more).
      tessera::fuzz::finding(
          "image", std::string("a region failed where the full image decoded: ") + e.what());
    }
  }
}

/// probe_image_memory(), or where it refuses the file's end (most mutated inputs: a damaged
/// stream rarely keeps its end marker), the header alone, so the decoders also meet truncated and
/// corrupt streams. Throws tessera::Error where neither can be read.
ImageInfo probe_for_decode(const std::uint8_t* data, std::size_t size) {
  try {
    return probe_image_memory(data, size, "fuzz input");
  } catch (const tessera::Error&) {
    if (size >= 2 && data[0] == 0xff && data[1] == 0xd8)
      return probe_jpeg_header(data, size, "fuzz input");
    return probe_png_header(data, size, "fuzz input");
  }
}

void decode_every_way(const std::uint8_t* data, std::size_t size, const ImageInfo& info) {
  const bool mask = info.palette || info.channels == 1;
  for (DecodeMode mode : {DecodeMode::Color, DecodeMode::Index}) {
    if (mode == DecodeMode::Index && !mask) continue;
    for (int denom : {1, 2, 8}) {
      if (denom > 1 && info.format != ImageFormat::Jpeg) break;
      try {
        decode_all(Request{data, size, info, mode, denom});
      } catch (const tessera::InternalError& e) {
        tessera::fuzz::finding("image", e.what());  // a broken invariant is no clean rejection
      } catch (const tessera::Error&) {
        // A corrupt stream is refused; the other modes and scales are still tried.
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tessera::fuzz::run_one("image", [&] {
    const ImageInfo info = probe_for_decode(data, size);
    if (info.width <= 0 || info.height <= 0) return;
    if (static_cast<std::int64_t>(info.width) * info.height > kMaxFuzzPixels) return;
    decode_every_way(data, size, info);
  });
}
