// Synthetic shape images: every pixel is a pure function of (seed, sample, c, global h, global w),
// so each rank renders exactly its shard and sharded batches equal unsharded ones bit for bit.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "batch_part.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/dataset.hpp"

namespace tessera::data {

namespace {

// Shape kinds, in this order: disc, square, ring, plus, triangle, diamond, square frame, X,
// horizontal bar, vertical bar, half disc, stripes.
constexpr int kNumKinds = 12;
constexpr double kTwoPi = 6.283185307179586;
// Output gain: before it, pixels have mean ≈ 0 and a standard deviation of 0.26–0.38 for images
// from 16x16 to 256x1024 (measured), so the images come out with roughly unit variance.
constexpr double kGain = 3.2;

// SplitMix64's finaliser: a bijective 64-bit mix.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
std::uint64_t hash2(std::uint64_t a, std::uint64_t b) { return mix(a ^ mix(b + 0x9e3779b97f4a7c15ull)); }
/// Uniform in [0, 1) from a hash.
double unit(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1p-53; }

/// A counter-based stream: the n-th draw depends only on the key and n.
class Stream {
 public:
  explicit Stream(std::uint64_t key) : key_(key) {}
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(hash2(key_, n_++)); }
  int below(int n) { return static_cast<int>(hash2(key_, n_++) % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t key_;
  std::uint64_t n_ = 0;
};

/// Whether (u, v) — coordinates relative to a shape's centre in units of its radius, v pointing
/// down — lies inside a shape of `kind`.
bool inside(int kind, double u, double v) {
  const double au = std::abs(u), av = std::abs(v), q = u * u + v * v;
  switch (kind) {
    case 0: return q <= 1.0;
    case 1: return au <= 0.8 && av <= 0.8;
    case 2: return q >= 0.36 && q <= 1.0;
    case 3: return (au <= 0.28 && av <= 1.0) || (av <= 0.28 && au <= 1.0);
    case 4: return v >= -0.9 && v <= 0.75 && au <= (v + 0.9) * 0.6;
    case 5: return au + av <= 1.0;
    case 6: return std::max(au, av) >= 0.5 && std::max(au, av) <= 0.85;
    case 7: return (std::abs(u - v) <= 0.4 || std::abs(u + v) <= 0.4) && au <= 0.8 && av <= 0.8;
    case 8: return au <= 1.0 && av <= 0.3;
    case 9: return au <= 0.3 && av <= 1.0;
    case 10: return q <= 1.0 && v >= -0.1;
    case 11: return au <= 0.85 && av <= 0.85 && static_cast<int>(std::floor((v + 0.85) / 0.34)) % 2 == 0;
    default: return false;
  }
}

struct Blob {
  int kind = 0;   // index into the shape table
  int label = 0;  // class (classification) or pixel label (segmentation)
  double cx = 0, cy = 0, r = 1;
};

/// Everything about one sample that does not depend on the pixel: its shapes, bottom to top.
struct SampleSpec {
  std::uint64_t key = 0;
  std::vector<Blob> blobs;
  std::int64_t label = 0;  // classification label
};

class Synthetic final : public Dataset {
 public:
  explicit Synthetic(const SyntheticOptions& o) : o_(o) {
    TESSERA_CHECK(o.channels >= 1 && o.height >= 1 && o.width >= 1, "synthetic data: image ", o.channels, "x",
                  o.height, "x", o.width, " must have positive sizes");
    TESSERA_CHECK(o.size >= 1, "synthetic data: size ", o.size, " must be at least 1");
    const int max_classes = o.task == Task::Classify ? kNumKinds : kNumKinds + 1;
    TESSERA_CHECK(o.num_classes >= 2 && o.num_classes <= max_classes, "synthetic data: num_classes ",
                  o.num_classes, " is outside [2, ", max_classes, "]: the generator draws ", kNumKinds,
                  " shape kinds", o.task == Task::Segment ? " plus the background" : "");
  }
  Task task() const noexcept override { return o_.task; }
  int num_classes() const noexcept override { return o_.num_classes; }
  core::Shape image_shape() const override { return {o_.channels, o_.height, o_.width}; }
  std::int64_t size() const noexcept override { return o_.size; }

  void load_into(std::span<const std::int64_t> samples, const core::Layout& layout, int rank,
                 Batch& b) const override {
    const internal::BatchPart p = internal::batch_part(layout, rank, image_shape(), "synthetic data");
    internal::check_into(samples, o_.size, p, o_.task, b, "synthetic data");
    if (b.images.is_meta()) return;
    const std::int64_t image_elems = p.c.size() * p.h.size() * p.w.size(), plane = p.h.size() * p.w.size();
    for (std::int64_t n = 0; n < p.n.size(); ++n) {
      const SampleSpec s = sample(samples[static_cast<std::size_t>(p.n.begin + n)]);
      std::int64_t* seg = o_.task == Task::Segment ? b.labels.data<std::int64_t>() + n * plane : nullptr;
      render(s, p, b.images.data<float>() + n * image_elems, seg);
      if (o_.task == Task::Classify) b.labels.data<std::int64_t>()[n] = s.label;
    }
  }

 private:
  SampleSpec sample(std::int64_t index) const {
    SampleSpec s;
    s.key = hash2(hash2(o_.seed, 0x5ee0), static_cast<std::uint64_t>(index));
    Stream rng(hash2(s.key, 1));
    const double m = std::min(o_.height, o_.width);
    auto place = [&](int kind, int label, double r_lo, double r_hi) {
      Blob b{kind, label, 0, 0, std::max(1.0, m * rng.uniform(r_lo, r_hi))};
      b.cx = o_.width > 2 * b.r ? rng.uniform(b.r, o_.width - b.r) : 0.5 * o_.width;
      b.cy = o_.height > 2 * b.r ? rng.uniform(b.r, o_.height - b.r) : 0.5 * o_.height;
      s.blobs.push_back(b);
    };
    if (o_.task == Task::Classify) {
      // Up to two small distractors of any kind under one large shape that sets the class.
      const int distractors = rng.below(3);
      for (int i = 0; i < distractors; ++i) place(rng.below(kNumKinds), -1, 0.05, 0.10);
      const int cls = rng.below(o_.num_classes);
      place(cls, cls, 0.22, 0.40);
      s.label = cls;
    } else {
      // One to four shapes in painter's order; a pixel's label is the kind of the topmost one.
      const int count = 1 + rng.below(4);
      for (int i = 0; i < count; ++i) {
        const int label = 1 + rng.below(o_.num_classes - 1);
        place(label - 1, label, 0.10, 0.28);
      }
    }
    return s;
  }

  /// Colour of blob `j` in channel `c`: ¾ a per-kind palette entry, ¼ random per sample, kept
  /// ≥ 0.5 away from the background `base`. Colour thus hints at the class (a small ConvNeXt
  /// learns it within a few dozen steps) without settling it: shape does the rest.
  double colour(const SampleSpec& s, int j, std::int64_t c, double base) const {
    const Blob& b = s.blobs[j];
    const double palette = palette_level(b.kind, c);
    const double random = 2 * unit(hash2(hash2(s.key, 2 + j), c)) - 1;
    const double v = 1.3 * (0.75 * palette + 0.25 * random);
    return std::abs(v - base) >= 0.5 ? v : base + (v >= base ? 0.5 : -0.5);
  }

  /// The per-kind palette entry of channel `c`: the kinds in use get evenly spaced levels in
  /// (−1, 1) in a seeded order per channel, so that the palette has mean zero over the classes
  /// and the images stay centred whatever the number of classes.
  double palette_level(int kind, std::int64_t c) const {
    const int used = o_.task == Task::Classify ? o_.num_classes : std::max(1, o_.num_classes - 1);
    const int k = kind % used;
    const std::uint64_t key = hash2(hash2(o_.seed, 0xc0105), static_cast<std::uint64_t>(c));
    int rank = 0;  // position of kind k when the used kinds are ordered by their hash
    const std::uint64_t mine = hash2(key, static_cast<std::uint64_t>(k));
    for (int j = 0; j < used; ++j) {
      const std::uint64_t other = hash2(key, static_cast<std::uint64_t>(j));
      rank += other < mine || (other == mine && j < k);
    }
    return 2 * (rank + 0.5) / used - 1;
  }

  // Renders part `p` of one sample: image (C,H,W) of the part, and the (H,W) labels if `seg`.
  void render(const SampleSpec& s, const internal::BatchPart& p, float* img, std::int64_t* seg) const {
    const std::int64_t lh = p.h.size(), lw = p.w.size();
    // Which blob covers each local pixel (−1: background), topmost first.
    std::vector<int> cover(static_cast<std::size_t>(lh * lw), -1);
    for (std::int64_t h = 0; h < lh; ++h) {
      const double y = static_cast<double>(p.h.begin + h) + 0.5;
      for (std::int64_t w = 0; w < lw; ++w) {
        const double x = static_cast<double>(p.w.begin + w) + 0.5;
        for (int j = static_cast<int>(s.blobs.size()) - 1; j >= 0; --j) {
          const Blob& b = s.blobs[j];
          if (inside(b.kind, (x - b.cx) / b.r, (y - b.cy) / b.r)) {
            cover[h * lw + w] = j;
            break;
          }
        }
      }
    }
    if (seg != nullptr)
      for (std::int64_t i = 0; i < lh * lw; ++i) seg[i] = cover[i] < 0 ? 0 : s.blobs[cover[i]].label;

    // Background: a smooth gradient plus one slow wave per axis, separable so that a row and a
    // column term are computed once per channel from global coordinates only.
    std::vector<double> row(lh), col(lw), fill(s.blobs.size());
    for (std::int64_t c = p.c.begin; c < p.c.end; ++c) {
      Stream rng(hash2(hash2(s.key, 0xb9), static_cast<std::uint64_t>(c)));
      const double base = rng.uniform(-0.3, 0.3), gx = rng.uniform(-0.4, 0.4), gy = rng.uniform(-0.4, 0.4);
      const double ax = rng.uniform(0, 0.2), fx = rng.uniform(0.5, 3), px = rng.uniform(0, kTwoPi);
      const double ay = rng.uniform(0, 0.2), fy = rng.uniform(0.5, 3), py = rng.uniform(0, kTwoPi);
      for (std::int64_t h = 0; h < lh; ++h) {
        const double t = (static_cast<double>(p.h.begin + h) + 0.5) / o_.height;
        row[h] = gy * (t - 0.5) + ay * std::sin(kTwoPi * fy * t + py);
      }
      for (std::int64_t w = 0; w < lw; ++w) {
        const double t = (static_cast<double>(p.w.begin + w) + 0.5) / o_.width;
        col[w] = gx * (t - 0.5) + ax * std::sin(kTwoPi * fx * t + px);
      }
      for (std::size_t j = 0; j < s.blobs.size(); ++j) fill[j] = colour(s, static_cast<int>(j), c, base);
      const std::uint64_t noise_key = hash2(hash2(s.key, 0x0153), static_cast<std::uint64_t>(c));
      float* out = img + (c - p.c.begin) * lh * lw;
      for (std::int64_t h = 0; h < lh; ++h) {
        const std::uint64_t row_key = hash2(noise_key, static_cast<std::uint64_t>(p.h.begin + h));
        for (std::int64_t w = 0; w < lw; ++w) {
          const int j = cover[h * lw + w];
          const double noise = 0.1 * (2 * unit(hash2(row_key, static_cast<std::uint64_t>(p.w.begin + w))) - 1);
          out[h * lw + w] = static_cast<float>(kGain * ((j < 0 ? base + row[h] + col[w] : fill[j]) + noise));
        }
      }
    }
  }

  SyntheticOptions o_;
};

}  // namespace

std::unique_ptr<Dataset> make_synthetic(const SyntheticOptions& options) {
  return std::make_unique<Synthetic>(options);
}

}  // namespace tessera::data
