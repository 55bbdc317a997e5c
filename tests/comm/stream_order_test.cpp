// Device buffers given to a communication backend are moved after the work that produced them
// and before the work that uses them, on a machine without a GPU: the emulated device in deferred
// mode queues its writes as a compute stream does, so a reader not ordered after them sees the
// bytes from before. The plugins are tests/comm/plugins/stream_plugin.cpp, loaded as the CLI loads
// ucx and nccl: "streamtest" moves buffers on a stream it exports (tessera_comm_plugin_v1_stream,
// as nccl and the ucx staging do), "streamhost" inside its calls. What is checked here is the host
// side's contract (plugin_v1.h): the plugin's stream waits for the producer on the device, with no
// host wait; without a stream the host waits. The CUDA calls that implement it on a GPU
// (CudaMemory::stream_waits_for_issued, the plugins' streams) run in the gpu-labelled tests.
#include <chrono>
#include <cstring>
#include <string>

#include "comm/conformance.hpp"
#include "comm/store_rendezvous.hpp"
#include "support/emulated_device.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/comm/plugin_loader.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/core/tensor.hpp"

namespace {

using namespace tessera;
using core::MemCategory;
using core::Tensor;
using Kind = comm::P2POp::Kind;

constexpr std::int64_t kCount = 1000;

/// One rank of a test plugin, loaded through a registry.
std::unique_ptr<comm::Backend> plugin(const char* name) {
  comm::Registry reg;
  const auto st = comm::load_plugin(
      std::string(TESSERA_TEST_PLUGIN_DIR) + "/libtessera-comm-" + name + ".so", &reg);
  INFO(st.why);
  REQUIRE(st.loaded);
  comm::BackendOptions o;
  o.rendezvous = std::make_shared<test::StoreRendezvous>();
  o.timeout = std::chrono::seconds(10);
  return reg.create(name, o);  // keeps the library loaded
}

/// One rank's emulated device: its memory (deferred once `defer()` is called) and an allocator.
struct Device {
  std::shared_ptr<test::EmulatedDeviceMemory> memory =
      std::make_shared<test::EmulatedDeviceMemory>();
  core::AllocatorPtr alloc = std::make_shared<core::Allocator>("rank 0", memory);

  /// kCount floats of `value` (written at once: deferred mode is not on yet).
  Tensor buffer(float value) {
    Tensor t = Tensor::empty({kCount}, core::DType::F32, MemCategory::HaloBuffer, alloc);
    t.fill(value);
    return t;
  }
  /// From now on writes wait in the memory's queue; counters start from zero.
  void defer() {
    memory->set_deferred(true);
    memory->synchronizations = 0;
    memory->stream_orders = 0;
  }
};

/// "" when every element of `t` (read back to the host, after everything queued) is `v`, else the
/// first one that is not.
std::string mismatch(const Tensor& t, float v) {
  const Tensor h = t.to_host();
  const float* p = h.data<float>();
  for (std::int64_t i = 0; i < h.numel(); ++i)
    if (p[i] != v) return detail::cat("element ", i, " is ", p[i], ", expected ", v);
  return "";
}

/// The exchange of every test: `send` to this rank itself, into `recv`.
std::vector<comm::P2POp> exchange(const Tensor& send, const Tensor& recv) {
  return {{Kind::Recv, comm::buffer_of(recv), 0, 3}, {Kind::Send, comm::buffer_of(send), 0, 3}};
}

}  // namespace

TEST_CASE(
    "the emulated device: a stream not ordered after queued writes moves the bytes from before",
    "[comm][order]") {
  // The instrument itself: without this, the tests below could not fail.
  Device dev;
  Tensor send = dev.buffer(1.f), recv = dev.buffer(0.f);
  dev.defer();
  send.fill(7.0);  // the producer's write, still queued
  recv.fill(5.0);  // a write the transfer must come after
  test::EmulatedStream stream;
  const bool ordered = GENERATE(false, true);
  INFO("ordered " << ordered);
  if (ordered) REQUIRE(dev.memory->stream_waits_for_issued(&stream));
  void* to = recv.raw_data();
  const void* from = send.raw_data();
  stream.enqueue([to, from] { std::memcpy(to, from, kCount * sizeof(float)); });
  stream.run();
  // Unordered: the transfer read 1s, and the queued write of 5s landed after it.
  REQUIRE(mismatch(recv, ordered ? 7.f : 5.f) == "");
  REQUIRE(mismatch(send, 7.f) == "");
}

TEST_CASE("a plugin's stream waits for the producers of device buffers on the device, not the host",
          "[comm][order]") {
  auto b = plugin("streamtest");
  Device dev;
  Tensor send = dev.buffer(1.f), recv = dev.buffer(0.f);
  dev.defer();
  auto& m = *dev.memory;

  SECTION("batch_p2p") {
    send.fill(7.0);  // written by the producer's stream, not yet run
    recv.fill(5.0);  // the transfer must land after this write too
    CHECK(m.queued() == 2);
    auto w = b->batch_p2p(exchange(send, recv));
    CHECK(m.synchronizations == 0);  // the host did not wait for the producer ...
    CHECK(m.queued() == 2);          // ... whose writes still wait in its queue,
    CHECK(m.stream_orders == 1);     // but the plugin's stream waits for them
    w->wait();
    CHECK(m.queued() == 0);
    REQUIRE(mismatch(recv, 7.f) == "");
  }
  SECTION("a collective") {
    send.fill(9.0);
    auto w = b->all_gather(comm::buffer_of(send), comm::buffer_of(recv));
    CHECK(m.synchronizations == 0);
    CHECK(m.queued() == 1);
    CHECK(m.stream_orders == 1);  // one memory behind both buffers: one wait
    w->wait();
    REQUIRE(mismatch(recv, 9.f) == "");
  }
  SECTION("the same batch_p2p step after step, each call ordered anew") {
    const std::vector<comm::P2POp> ops = exchange(send, recv);
    for (int round = 1; round <= 3; ++round) {
      INFO("call " << round);
      send.fill(10.0 + round);  // this step's producer write, queued after the last exchange
      auto w = b->batch_p2p(ops);
      CHECK(m.synchronizations == 0);
      CHECK(m.queued() == 1);
      CHECK(m.stream_orders == round);
      w->wait();
      REQUIRE(mismatch(recv, 10.f + static_cast<float>(round)) == "");
    }
  }
}

TEST_CASE(
    "without a plugin stream, or with a memory that cannot order one, the host waits for the "
    "producer first",
    "[comm][order]") {
  Device dev;
  Tensor send = dev.buffer(1.f), recv = dev.buffer(0.f);
  auto check = [&](comm::Backend& b, long expected_syncs) {
    dev.defer();
    send.fill(7.0);
    recv.fill(5.0);
    auto w = b.batch_p2p(exchange(send, recv));
    CHECK(dev.memory->synchronizations == expected_syncs);
    CHECK(dev.memory->stream_orders == 0);
    w->wait();
    REQUIRE(mismatch(recv, 7.f) == "");
  };
  SECTION("a plugin that moves buffers inside its calls (no stream symbol)") {
    auto b = plugin("streamhost");
    check(*b, 1);
  }
  SECTION("a memory that cannot order the plugin's stream") {
    auto b = plugin("streamtest");
    dev.memory->orders_streams = false;
    check(*b, 1);
  }
  SECTION("the local backend, which stages device buffers through their memory") {
    comm::local::World world(1, std::chrono::seconds(10));
    auto b = world.backend(0);
    check(*b, 0);  // the staging copies themselves come after the queued writes
  }
}
