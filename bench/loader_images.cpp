// bench_loader's test images (loader_images.hpp): procedural pictures written as JPEG with libjpeg.
#include "loader_images.hpp"

// jpeglib.h uses FILE and size_t without including their headers.
#include <cstddef>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace tessera::bench {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser: a hash of the lattice point
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double unit(std::uint64_t h) { return double(h >> 11) * 0x1.0p-53; }  // [0, 1)

/// Value noise: random values on a lattice of spacing `step` pixels, smoothly interpolated.
class Noise {
 public:
  Noise(int height, int width, int step, std::uint64_t seed)
      : step_(step), cols_(width / step + 2), values_(std::size_t((height / step + 2) * cols_)) {
    for (std::size_t i = 0; i < values_.size(); ++i)
      values_[i] = float(2 * unit(mix(seed + i)) - 1);
  }
  float at(int y, int x) const {
    const int gy = y / step_, gx = x / step_;
    const float fy = smooth(float(y % step_) / float(step_)),
                fx = smooth(float(x % step_) / float(step_));
    const float* r0 = &values_[std::size_t(gy * cols_ + gx)];
    const float* r1 = r0 + cols_;
    return (r0[0] * (1 - fx) + r0[1] * fx) * (1 - fy) + (r1[0] * (1 - fx) + r1[1] * fx) * fy;
  }

 private:
  static float smooth(float t) { return t * t * (3 - 2 * t); }
  int step_, cols_;
  std::vector<float> values_;
};

/// A sharp-edged object (an ellipse) of one colour: the edges a photograph has.
struct Blob {
  double cy, cx, ry, rx;
  float rgb[3];
};

/// Interleaved RGB, height × width × 3: shading, objects, noise at four scales and film grain.
std::vector<std::uint8_t> picture(const ImageSetSpec& spec, int index) {
  const int H = spec.height, W = spec.width;
  const std::uint64_t seed = mix(spec.seed * 1000003 + std::uint64_t(index));
  const int steps[4] = {std::max(2, W / 4), std::max(2, W / 16), 32, 8};
  const float amps[4] = {50, 28, 16, 12};
  std::vector<Noise> noise;
  for (int c = 0; c < 3; ++c)
    for (int o = 0; o < 4; ++o) noise.emplace_back(H, W, steps[o], mix(seed + 17 * c + o));
  std::vector<Blob> blobs(12);
  for (std::size_t k = 0; k < blobs.size(); ++k) {
    auto u = [&](int j) { return unit(mix(seed * 31 + k * 8 + j)); };
    blobs[k] = {u(0) * H,
                u(1) * W,
                (0.05 + 0.2 * u(2)) * H,
                (0.03 + 0.15 * u(3)) * W,
                {float(255 * u(4)), float(255 * u(5)), float(255 * u(6))}};
  }
  std::vector<std::uint8_t> px(std::size_t(H) * W * 3);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      float rgb[3] = {float(60 + 120.0 * y / H), float(90 + 80.0 * x / W),
                      float(150 - 60.0 * y / H)};
      for (const Blob& b : blobs) {
        const double dy = (y - b.cy) / b.ry, dx = (x - b.cx) / b.rx;
        if (dy * dy + dx * dx < 1)
          for (int c = 0; c < 3; ++c) rgb[c] = 0.3f * rgb[c] + 0.7f * b.rgb[c];
      }
      const float grain = float(16 * unit(mix(seed ^ (std::uint64_t(y) * W + x))) - 8);
      for (int c = 0; c < 3; ++c) {
        float v = rgb[c] + grain;
        for (int o = 0; o < 4; ++o) v += amps[o] * noise[std::size_t(c * 4 + o)].at(y, x);
        px[(std::size_t(y) * W + x) * 3 + c] = std::uint8_t(std::clamp(v, 0.f, 255.f));
      }
    }
  return px;
}

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
};

[[noreturn]] void on_jpeg_error(j_common_ptr c) {
  std::longjmp(reinterpret_cast<JpegError*>(c->err)->jump, 1);
}

/// Writes RGB `px` as a baseline JPEG at `quality`, chroma 4:2:0 (jpeg_set_defaults).
void write_jpeg(const std::string& path, int height, int width, int quality,
                const std::vector<std::uint8_t>& px) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f)
    throw std::runtime_error("bench_loader: cannot write " + path + " (is the folder writable?)");
  jpeg_compress_struct c{};
  JpegError err{};
  c.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_jpeg_error;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&c);
    std::fclose(f);
    throw std::runtime_error("bench_loader: libjpeg failed writing " + path);
  }
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = JDIMENSION(width), c.image_height = JDIMENSION(height);
  c.input_components = 3, c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(&px[std::size_t(c.next_scanline) * width * 3]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  if (std::fclose(f) != 0)
    throw std::runtime_error("bench_loader: cannot finish " + path + " (disk full?)");
}

}  // namespace

ImageSet write_image_set(const std::string& folder, const ImageSetSpec& spec) {
  namespace fs = std::filesystem;
  ImageSet set{folder, 0};
  for (int i = 0; i < spec.count; ++i) {
    char cls[16];
    std::snprintf(cls, sizeof cls, "c%d", i % spec.classes);
    const fs::path dir = fs::path(folder) / cls;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      throw std::runtime_error("bench_loader: cannot create " + dir.string() + ": " + ec.message());
    char name[32];
    std::snprintf(name, sizeof name, "img_%03d.jpg", i);
    const std::string path = (dir / name).string();
    write_jpeg(path, spec.height, spec.width, spec.quality, picture(spec, i));
    set.bytes += std::int64_t(fs::file_size(path));
  }
  return set;
}

}  // namespace tessera::bench
