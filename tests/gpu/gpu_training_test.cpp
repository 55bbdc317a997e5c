// Training on the GPU (label gpu): every rank on the `cuda` compute backend, P in-process ranks on
// one GPU through the local backend (device buffers staged through their memory), checked as the
// CPU training tests are: sharded == unsharded and GPU == CPU under the float32 equivalence rule
// (tests/nn/train_equivalence.hpp; TF32 off), and the bytes booked per category equal to the
// simulator's replay. The same runs on the CPU with emulated device memory are
// tests/nn/device_training_test.cpp. Without a CUDA device (or without the cuda backend) every
// case prints the reason and ctest counts it as skipped.
#include <string>

#include "nn/halo_adjoint.hpp"
#include "nn/train_equivalence.hpp"
#include "nn/train_harness.hpp"
#include "nn/train_models.hpp"
#include "support/catch.hpp"
#include "tessera/builtin_backends.hpp"

using namespace tessera;
using core::MemCategory;

namespace {

compute::Registry& registry() {
  static compute::Registry r = [] {
    compute::Registry x;
    register_builtin_backends(x);
    return x;
  }();
  return r;
}

/// Empty when the cuda backend can be created here, else why not.
std::string cuda_unavailable() {
  if (!registry().contains("cuda")) return "the cuda compute backend is not built (configure with the CUDA toolkit)";
  try {
    registry().create("cuda", compute::BackendOptions{});
  } catch (const Unsupported& e) {
    return e.what();
  }
  return "";
}

/// Each rank on the GPU (device 0), TF32 off: fp32 arithmetic as the CPU reference's.
test::RankCompute cuda_rank(int rank) {
  compute::BackendOptions o;
  o.tf32 = false;
  return test::on_device(registry().create("cuda", o), rank);
}

#define REQUIRE_CUDA()                                     \
  do {                                                     \
    static const std::string why_ = cuda_unavailable();    \
    if (!why_.empty()) TESSERA_SKIP("no GPU run: " << why_); \
  } while (0)

void sharded_on_gpu_equals_cpu(const nn::TrainOptions& o) {
  const test::Fp32References refs = test::fp32_references(o);  // on the CPU
  for (const char* mesh : {"sp=1", "sp=2", "sp=3", "sp=4", "dp=2,sp=2"}) {
    INFO("mesh " << mesh << " on one GPU");
    const test::TrainRun run = test::train(o, core::DeviceMesh::parse(mesh), {}, {}, test::Fault::None, cuda_rank);
    REQUIRE(run.losses.size() == std::size_t(o.steps));
    REQUIRE_FP32_EQUIVALENT(run, refs);
  }
}

}  // namespace

TEST_CASE("ConvNeXt on one GPU, one rank and sp = 2, 3, 4, dp=2 x sp=2, equals the CPU run", "[gpu][train]") {
  REQUIRE_CUDA();
  sharded_on_gpu_equals_cpu(test::options(test::small_convnext(), "adamw"));
}

TEST_CASE("RegNetY (SyncBN, SE) on one GPU, one rank and sharded, equals the CPU run", "[gpu][train]") {
  REQUIRE_CUDA();
  sharded_on_gpu_equals_cpu(test::options(test::small_regnety(), "sgd"));
}

TEST_CASE("a GPU run books per category what the simulator's replay predicts", "[gpu][train][memory]") {
  REQUIRE_CUDA();
  nn::TrainOptions o = test::options(test::small_convnext(), "adamw");
  o.steps = 2;
  o.loader.prefetch = 2;  // explicit: auto prefetches on the GPU only, and both runs must book the slots
  for (const char* mesh : {"sp=1", "sp=2"}) {
    INFO("mesh " << mesh);
    const auto m = core::DeviceMesh::parse(mesh);
    const test::TrainRun gpu = test::train(o, m, {}, {}, test::Fault::None, cuda_rank);
    const test::TrainRun cpu = test::train(o, m);
    for (std::size_t r = 0; r < gpu.memory.size(); ++r) {
      for (int c = 0; c < core::kNumMemCategories; ++c) {
        const auto cat = static_cast<MemCategory>(c);
        if (cat == MemCategory::Workspace) continue;  // the backend's own scratch (cuDNN's, im2col)
        INFO("rank " << r << ", " << core::mem_category_name(cat));
        REQUIRE(gpu.memory[r].peak[c] == cpu.memory[r].peak[c]);
      }
      std::printf("gpu memory: %s rank %zu: booked peak %.2f MiB, device reserved peak %.2f MiB\n", mesh, r,
                  gpu.memory[r].peak_total / 1048576.0, gpu.memory[r].peak_reserved / 1048576.0);
      REQUIRE(gpu.memory[r].peak_reserved >= gpu.memory[r].peak_total);
    }
  }
}

TEST_CASE("on a GPU, batches prefetched into pinned slots and copied by the loader equal prefetch 0, bit for bit",
          "[gpu][train][loader]") {
  REQUIRE_CUDA();
  nn::TrainOptions o = test::options(test::small_convnext(), "adamw");
  o.steps = 4;
  o.loader.shuffle = true;
  for (const char* mesh : {"sp=1", "sp=2"}) {
    INFO("mesh " << mesh);
    const auto m = core::DeviceMesh::parse(mesh);
    nn::TrainOptions off = o;
    off.loader.prefetch = 0;
    nn::TrainOptions on = o;
    on.loader.prefetch = 3;
    on.loader.workers = 2;
    const test::TrainRun a = test::train(off, m, {}, {}, test::Fault::None, cuda_rank);
    const test::TrainRun b = test::train(on, m, {}, {}, test::Fault::None, cuda_rank);
    REQUIRE(a.losses == b.losses);
    REQUIRE(a.params == b.params);
  }
}

TEST_CASE("halo exchange on GPU buffers is the adjoint of the forward", "[gpu][halo][adjoint]") {
  REQUIRE_CUDA();
  // One cuda backend per rank (its streams and memory), alive for the whole check.
  std::mutex mu;
  std::vector<std::unique_ptr<compute::Backend>> backends;
  test::check_halo_adjoint([&](int) {
    auto b = registry().create("cuda", compute::BackendOptions{});
    auto alloc = std::make_shared<core::Allocator>("rank", b->device_memory());
    std::lock_guard<std::mutex> lock(mu);
    backends.push_back(std::move(b));
    return alloc;
  });
}
