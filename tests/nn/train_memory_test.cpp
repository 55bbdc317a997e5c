// Memory accounting of a training step: the peak activation bytes per rank shrink with the
// number of spatial shards (at most 1/P of the one-rank figure plus the halo buffers), and
// activation checkpointing lowers them further. The figures are printed.
#include <cstdio>

#include "support/catch.hpp"
#include "train_harness.hpp"
#include "train_models.hpp"

using namespace tessera;
using core::MemCategory;

namespace {

nn::TrainOptions memory_run(const std::string& checkpointing) { return test::memory_options(checkpointing); }

struct Peaks {
  std::size_t activation = 0, halo = 0;  // the largest over the ranks
};

Peaks peaks(const test::TrainRun& r) {
  Peaks p;
  for (const core::MemStats& m : r.memory) {
    p.activation = std::max(p.activation, m.peak_of(MemCategory::Activation));
    p.halo = std::max(p.halo, m.peak_of(MemCategory::HaloBuffer));
  }
  return p;
}

}  // namespace

TEST_CASE("peak activation memory per rank falls as 1/P with spatial shards", "[nn][train][memory]") {
  const Peaks one = peaks(test::train(memory_run("none"), core::DeviceMesh({1}, {"sp"})));
  REQUIRE(one.activation > 0);
  REQUIRE(one.halo == 0);  // a single rank exchanges nothing
  std::printf("memory: convnext 16-32-48-64, input 3x64x512, batch 2: one rank %.2f MiB of activations\n",
              one.activation / 1048576.0);
  for (const int P : {2, 4}) {
    const Peaks p = peaks(test::train(memory_run("none"), core::DeviceMesh({P}, {"sp"})));
    const double bound = static_cast<double>(one.activation) / P + static_cast<double>(p.halo);
    std::printf("memory: sp=%d: %.2f MiB activations + %.3f MiB halo buffers per rank; bound 1/%d + halo = %.2f MiB\n",
                P, p.activation / 1048576.0, p.halo / 1048576.0, P, bound / 1048576.0);
    INFO("P=" << P << ": activation peak " << p.activation << " bytes, halo peak " << p.halo << ", one rank "
              << one.activation);
    REQUIRE(p.halo > 0);
    REQUIRE(static_cast<double>(p.activation) <= bound);
    REQUIRE(static_cast<double>(p.activation) >= 0.8 * static_cast<double>(one.activation) / P);  // no missing bookings
  }
}

TEST_CASE("activation checkpointing lowers the peak activation memory", "[nn][train][memory]") {
  for (const int P : {1, 2}) {
    const core::DeviceMesh mesh({P}, {"sp"});
    const std::size_t none = peaks(test::train(memory_run("none"), mesh)).activation;
    const std::size_t block = peaks(test::train(memory_run("block"), mesh)).activation;
    const std::size_t stage = peaks(test::train(memory_run("stage"), mesh)).activation;
    std::printf("memory: sp=%d activations: none %.2f MiB, block %.2f MiB, stage %.2f MiB\n", P,
                none / 1048576.0, block / 1048576.0, stage / 1048576.0);
    INFO("P=" << P << ": none " << none << ", block " << block << ", stage " << stage);
    // Block checkpointing keeps every block's input plus one block's internals during its
    // recompute; stage checkpointing keeps only stage inputs but a whole stage's internals while
    // it recomputes, so with two blocks per stage it lands between the two.
    REQUIRE(block < 0.8 * none);
    REQUIRE(stage < 0.8 * none);
  }
}
