// SampleOrder: per-epoch permutations drawn from (seed, epoch) by Fisher–Yates with an exactly
// uniform bounded draw, so every rank (and every platform) computes the same order.
#include <algorithm>
#include <numeric>

#include "tessera/core/error.hpp"
#include "tessera/data/loader.hpp"

namespace tessera::data {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A uniform draw from [0, bound) (bound >= 1): Lemire's multiply-shift with rejection, exact.
std::uint64_t below(std::uint64_t& state, std::uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(splitmix64(state)) * bound;
  auto low = static_cast<std::uint64_t>(m);
  if (low < bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(splitmix64(state)) * bound;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

}  // namespace

SampleOrder::SampleOrder(std::int64_t size, bool shuffle, std::uint64_t seed)
    : size_(size), shuffle_(shuffle), seed_(seed) {
  TESSERA_CHECK(size >= 1, "sample order: the dataset has ", size, " samples; it needs at least one");
}

std::shared_ptr<const std::vector<std::int64_t>> SampleOrder::permutation(std::int64_t epoch) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [e, p] : cache_)
      if (e == epoch) return p;
  }
  auto p = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(size_));
  std::iota(p->begin(), p->end(), std::int64_t{0});
  // The state depends on (seed, epoch) only; a distinct constant keeps it apart from the other
  // streams drawn from the run's seed (weights, DropPath, synthetic pixels).
  std::uint64_t state = seed_ ^ 0x5a4d'91e3'0c7b'26f1ull;
  state = splitmix64(state) ^ static_cast<std::uint64_t>(epoch);
  for (std::int64_t i = size_ - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(below(state, static_cast<std::uint64_t>(i) + 1));
    std::swap((*p)[static_cast<std::size_t>(i)], (*p)[static_cast<std::size_t>(j)]);
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Batches span at most a few epochs at a time: keep the last two asked for.
  if (cache_.size() >= 2) cache_.erase(cache_.begin());
  cache_.emplace_back(epoch, p);
  return p;
}

std::vector<std::int64_t> SampleOrder::epoch(std::int64_t epoch) const {
  TESSERA_CHECK(epoch >= 0, "sample order: epoch ", epoch, " is negative");
  if (shuffle_) return *permutation(epoch);
  std::vector<std::int64_t> out(static_cast<std::size_t>(size_));
  std::iota(out.begin(), out.end(), std::int64_t{0});
  return out;
}

std::vector<std::int64_t> SampleOrder::batch(std::int64_t step, std::int64_t batch) const {
  TESSERA_CHECK(step >= 0, "sample order: batch step ", step, " is negative");
  TESSERA_CHECK(batch >= 1, "sample order: batch size ", batch, " must be at least 1");
  std::vector<std::int64_t> out(static_cast<std::size_t>(batch));
  // Positions step·B + n in 128 bits: no overflow for any int64 step and batch.
  const unsigned __int128 first = static_cast<unsigned __int128>(step) * static_cast<std::uint64_t>(batch);
  const auto size = static_cast<std::uint64_t>(size_);
  std::shared_ptr<const std::vector<std::int64_t>> perm;
  std::int64_t perm_epoch = -1;
  for (std::int64_t n = 0; n < batch; ++n) {
    const unsigned __int128 p = first + static_cast<std::uint64_t>(n);
    const auto place = static_cast<std::int64_t>(p % size);
    if (!shuffle_) {
      out[static_cast<std::size_t>(n)] = place;
      continue;
    }
    const auto e = static_cast<std::int64_t>(p / size);
    if (e != perm_epoch) perm = permutation(e), perm_epoch = e;
    out[static_cast<std::size_t>(n)] = (*perm)[static_cast<std::size_t>(place)];
  }
  return out;
}

}  // namespace tessera::data
