// Training with every tensor in device memory, on a machine without a GPU: the emulated device
// (support/emulated_device.hpp) is memory that core must treat as a device's — Tensor::data<T>()
// refuses it, so any place where core reads or writes a device tensor through the host API
// throws, and every host↔device copy is counted. The kernels are the cpu backend's on the same
// bytes, so a correctly routed run equals the host run bit for bit: losses, gradient norms, final
// parameters on every rank, and the bytes booked per category. Sharded runs exercise the local
// backend's staging of device buffers (halo exchanges, SyncBN sums, gradient buckets). The same
// runs on a real GPU are tests/gpu (label gpu).
#include "support/catch.hpp"
#include "support/emulated_device.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "train_harness.hpp"
#include "train_models.hpp"

using namespace tessera;
using core::MemCategory;

namespace {

/// Each rank: the cpu backend computing in its own emulated device memory (as P ranks share one
/// GPU, each with its own backend and streams). `memories` collects them for the counters.
test::ComputeFactory emulated(std::vector<std::shared_ptr<test::EmulatedDeviceMemory>>* memories = nullptr) {
  auto mu = std::make_shared<std::mutex>();
  return [=](int rank) {
    auto memory = std::make_shared<test::EmulatedDeviceMemory>();
    if (memories) {
      std::lock_guard<std::mutex> lock(*mu);
      memories->push_back(memory);
    }
    auto b = std::make_unique<test::EmulatedDeviceCompute>(std::make_unique<compute::cpu::CpuBackend>(1), memory);
    return test::on_device(std::move(b), rank);
  };
}

void require_identical(const test::TrainRun& dev, const test::TrainRun& host) {
  REQUIRE(dev.replicas_agree);
  REQUIRE(dev.losses == host.losses);
  REQUIRE(dev.grad_norms == host.grad_norms);
  REQUIRE(dev.names == host.names);
  for (std::size_t i = 0; i < host.params.size(); ++i) {
    INFO("parameter " << host.names[i]);
    REQUIRE(dev.params[i] == host.params[i]);
  }
  REQUIRE(dev.memory.size() == host.memory.size());
  for (std::size_t r = 0; r < host.memory.size(); ++r)
    for (int c = 0; c < core::kNumMemCategories; ++c) {
      // Workspace is the compute backend's own scratch: the cpu backend books it with its inputs'
      // allocator, which the emulated device's host aliases do not carry (and cuDNN's differs).
      if (static_cast<MemCategory>(c) == MemCategory::Workspace) continue;
      INFO("rank " << r << ", " << core::mem_category_name(static_cast<MemCategory>(c)));
      REQUIRE(dev.memory[r].peak[c] == host.memory[r].peak[c]);
      REQUIRE(dev.memory[r].current[c] == host.memory[r].current[c]);
    }
}

}  // namespace

TEST_CASE("training in device memory equals the host run bit for bit (ConvNeXt, AdamW, DropPath)",
          "[nn][train][device]") {
  nn::TrainOptions o = test::options(test::small_convnext(), "adamw");
  o.steps = 3;
  // Explicit, so both runs book the same slots (auto would prefetch on the device only); on the
  // device the loader threads upload each batch.
  o.loader.prefetch = 2;
  for (const char* mesh : {"sp=1", "sp=2", "sp=3", "dp=2,sp=2"}) {
    INFO("mesh " << mesh);
    const auto m = core::DeviceMesh::parse(mesh);
    std::vector<std::shared_ptr<test::EmulatedDeviceMemory>> memories;
    const test::TrainRun dev = test::train(o, m, {}, {}, test::Fault::None, emulated(&memories));
    require_identical(dev, test::train(o, m));
    // The copies are explicit and few: parameters up once, each batch up, losses and norms down.
    long up = 0, down = 0;
    for (auto& mem : memories) up += mem->host_to_device, down += mem->device_to_host;
    REQUIRE(up > 0);
    REQUIRE(down > 0);
  }
}

TEST_CASE("training in device memory equals the host run bit for bit (RegNetY, SGD, SyncBN, SE)",
          "[nn][train][device]") {
  nn::TrainOptions o = test::options(test::small_regnety(), "sgd");
  o.steps = 3;
  o.loader.prefetch = 2;  // as above: the same slots on both sides
  for (const char* mesh : {"sp=1", "sp=2", "sp=3"}) {
    INFO("mesh " << mesh);
    const auto m = core::DeviceMesh::parse(mesh);
    require_identical(test::train(o, m, {}, {}, test::Fault::None, emulated()), test::train(o, m));
  }
}

TEST_CASE("in device memory, the loader's threads copying prefetched batches up equal prefetch 0, bit for bit",
          "[nn][train][device][loader]") {
  // The loader threads fill host slots and upload them to device slots (DeviceMemory::upload) while
  // the ranks compute; the trainer's default (prefetch 2) runs above, 0 and 3 with 2 threads here.
  nn::TrainOptions o = test::options(test::small_convnext(), "adamw");
  o.steps = 4;
  o.loader.shuffle = true;
  for (const char* mesh : {"sp=1", "dp=2,sp=2"}) {
    INFO("mesh " << mesh);
    const auto m = core::DeviceMesh::parse(mesh);
    nn::TrainOptions off = o, on = o;
    off.loader.prefetch = 0;
    on.loader.prefetch = 3;
    on.loader.workers = 2;
    const test::TrainRun a = test::train(off, m, {}, {}, test::Fault::None, emulated());
    const test::TrainRun b = test::train(on, m, {}, {}, test::Fault::None, emulated());
    REQUIRE(b.replicas_agree);
    REQUIRE(a.losses == b.losses);
    REQUIRE(a.params == b.params);
    REQUIRE(a.params == test::train(on, m).params);  // and the host run
  }
}

TEST_CASE("a device tensor read through the host API is refused with a clear error", "[core][device]") {
  auto memory = std::make_shared<test::EmulatedDeviceMemory>();
  auto alloc = std::make_shared<core::Allocator>("rank 0", memory);
  core::Tensor t = core::Tensor::zeros({2, 3}, core::DType::F32, MemCategory::Activation, alloc);
  REQUIRE(t.space() == core::MemorySpace::Cuda);
  REQUIRE(t.describe() == "f32[2,3]@cuda");
  REQUIRE_THROWS_WITH(t.data<float>(), Catch::Contains("f32[2,3]@cuda is in cuda memory") &&
                                           Catch::Contains("to_host()"));
  // Through the device memory: fill, a strided copy up, add, and the copy back.
  t.fill(1.5);
  core::Tensor h = core::Tensor::empty({3, 2}, core::DType::F32);
  for (int i = 0; i < 6; ++i) h.data<float>()[i] = float(i);
  core::Tensor ht = core::Tensor::from_blob(h.raw_data(), {2, 3}, core::DType::F32, nullptr, {1, 2});  // transposed view
  core::Tensor u = core::Tensor::empty({2, 3}, core::DType::F32, MemCategory::Activation, alloc);
  u.copy_from(ht);
  t.add_from(u);
  const core::Tensor back = t.to_host();
  REQUIRE(back.is_host());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) REQUIRE(back.at<float>({i, j}) == 1.5f + float(j * 2 + i));
  REQUIRE(memory->host_to_device == 1);
  REQUIRE(memory->device_to_host == 1);
  // Mixing memories in an add is a clear error, not a host access of device memory.
  REQUIRE_THROWS_WITH(t.add_from(h.reshape({2, 3})), Catch::Contains("both must be in the same memory"));
  // The allocator books device tensors by category and reports the device's reserve.
  const core::MemStats s = alloc->stats();
  REQUIRE(s.current_of(MemCategory::Activation) == 2 * 6 * sizeof(float));
  REQUIRE(s.reserved >= s.current_total);
}

TEST_CASE("the local backend stages device buffers through their memory, and refuses anonymous ones",
          "[comm][device]") {
  comm::local::run(2, [](comm::Backend& b) {
    auto memory = std::make_shared<test::EmulatedDeviceMemory>();
    auto alloc = std::make_shared<core::Allocator>("rank", memory);
    core::Tensor t = core::Tensor::empty({4}, core::DType::F32, MemCategory::Gradient, alloc);
    t.fill(double(b.rank() + 1));
    b.all_reduce(comm::buffer_of(t), comm::ReduceOp::Sum)->wait();
    const core::Tensor h = t.to_host();
    for (int i = 0; i < 4; ++i)
      if (h.data<float>()[i] != 3.0f) throw std::runtime_error("staged all_reduce: wrong sum");
    if (memory->device_to_host < 2 || memory->host_to_device < 1)
      throw std::runtime_error("staged all_reduce did not copy through the device memory");
    // A device buffer that does not say which memory holds it cannot be staged.
    comm::BufferView anonymous{t.raw_data(), 4, core::DType::F32, core::MemorySpace::Cuda, nullptr};
    try {
      b.all_reduce(anonymous, comm::ReduceOp::Sum);
    } catch (const InvalidArgument& e) {
      if (std::string(e.what()).find("without its DeviceMemory") == std::string::npos) throw;
      return;
    }
    throw std::runtime_error("an anonymous device buffer was accepted");
  });
}
