// The nccl backend on real GPUs (label gpu;comm;nccl: excluded by the default `gpu|slow` filter;
// the GPU check bundle runs them: tests/gpu/README.md). Every rank is a separate process with its own device
// (rank r on device r % count); NCCL refuses two ranks on one GPU, so a one-GPU machine runs
// one rank, where collectives are local copies and the halo exchange sends to itself. The checks
// themselves (comm/cuda_checks.cpp) are shared with the ucx staging tests. Where no GPU is visible
// every test reports ctest's skip status with the reason.
#include <algorithm>
#include <cstring>
#include <thread>

#include "comm/cuda_checks.hpp"
#include "comm/nccl_support.hpp"
#include "comm/process_runner.hpp"

namespace {

using namespace tessera;
using test::conformance::fail;
using test::cuda_checks::expect_throw;
using test::nccl::DeviceBuffer;

constexpr std::chrono::milliseconds kTimeout{30'000};

/// 1 and, with several GPUs, min(count, 4): the group sizes each test runs.
std::vector<int> sizes(const test::nccl::Devices& d) {
  std::vector<int> s{1};
  if (d.count >= 2) s.push_back(std::min(d.count, 4));
  return s;
}

void run(int size, const test::conformance::RankFn& fn,
         std::chrono::milliseconds timeout = kTimeout) {
  test::run_in_processes(TESSERA_NCCL_PLUGIN, size, timeout, fn);
}

}  // namespace

TEST_CASE("nccl (GPU): all_reduce sum/avg/max/min over f32, f64, i32, i64", "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  for (int size : sizes(devices)) {
    INFO("size " << size);
    run(size, test::cuda_checks::all_reduce);
  }
}

TEST_CASE("nccl (GPU): all_gather, reduce_scatter, broadcast from every root, all_to_all, barrier",
          "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  for (int size : sizes(devices)) {
    INFO("size " << size);
    run(size, test::cuda_checks::collectives);
  }
}

TEST_CASE(
    "nccl (GPU): batch_p2p periodic halo exchange with tags (self as both neighbours on one GPU)",
    "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  for (int size : sizes(devices)) {
    INFO("size " << size);
    run(size, test::cuda_checks::halo);
  }
}

TEST_CASE("nccl (GPU): split into sub-groups (ncclCommSplit), non-members get nullptr",
          "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  for (int size : sizes(devices)) {
    INFO("size " << size);
    run(size, test::cuda_checks::split);
  }
}

TEST_CASE(
    "nccl (GPU): host buffers are refused, bad counts, roots and peers are caught before NCCL",
    "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  run(1, [](comm::Backend& b) {
    if (!b.capabilities().cuda_memory) fail(b, "capabilities().cuda_memory is false");
    std::vector<float> host(4, 1.f);
    expect_throw<Unsupported>(b, "host all_reduce", "host memory", [&] {
      b.all_reduce(test::conformance::view(host), comm::ReduceOp::Sum);
    });
    expect_throw<InvalidArgument>(b, "host pointer marked Cuda", "is host memory", [&] {
      b.all_reduce({host.data(), host.size(), core::DType::F32, comm::MemorySpace::Cuda},
                   comm::ReduceOp::Sum);
    });
    DeviceBuffer<float> a(4), c(5);
    expect_throw<InvalidArgument>(b, "all_gather counts", "expected size() * send.count",
                                  [&] { b.all_gather(a.view(), c.view()); });
    expect_throw<InvalidArgument>(b, "broadcast root", "root 3", [&] { b.broadcast(a.view(), 3); });
    expect_throw<InvalidArgument>(b, "p2p peer", "outside this group", [&] {
      b.batch_p2p({{comm::P2POp::Kind::Send, a.view(), 1, 0}});
    });
    // The communicator is still usable after refused calls.
    DeviceBuffer<float> ok(std::vector<float>{2.f});
    b.all_reduce(ok.view(), comm::ReduceOp::Sum)->wait();
    if (ok.download()[0] != 2.f) fail(b, "all_reduce after refused calls");
  });
}

TEST_CASE(
    "nccl (GPU): operations on the cuda compute backend's tensors wait for its stream on the "
    "device",
    "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
#if TESSERA_TEST_CUDA_COMPUTE
  run(1, test::cuda_checks::ordered_with_compute);
#else
  TESSERA_SKIP("the cuda compute backend is not built here (cuDNN not found)");
#endif
}

TEST_CASE("nccl (GPU): a receive nobody sends ends at the deadline with ncclCommAbort, not a hang",
          "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  try {
    run(
        1,
        [](comm::Backend& b) {
          DeviceBuffer<float> r(16);
          // A receive from itself with no matching send: NCCL waits (or refuses the group).
          try {
            b.batch_p2p({{comm::P2POp::Kind::Recv, r.view(), 0, 0}})->wait();
          } catch (const TimeoutError& e) {
            if (std::string(e.what()).find("ncclCommAbort") == std::string::npos)
              fail(b, "the timeout does not mention the abort: ", e.what());
          } catch (const BackendError&) {
            // NCCL refused the unmatched group: also fine, as long as it did not hang.
          }
          // The group is unusable afterwards, and says so.
          expect_throw<BackendError>(b, "after the failure", "failed earlier", [&] {
            DeviceBuffer<float> x(1);
            b.all_reduce(x.view(), comm::ReduceOp::Sum);
          });
        },
        std::chrono::milliseconds(3000));
  } catch (const std::exception& e) {
    msg = e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(msg);
  REQUIRE(msg.find("rank process hung") == std::string::npos);
  REQUIRE(s < 30.0);
}

TEST_CASE("nccl (GPU): a rank that skips a collective makes the others time out naming the op",
          "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  if (devices.count < 2)
    TESSERA_SKIP("needs 2 GPUs (NCCL refuses two ranks on one device); " << devices.count << " visible");
  std::string msg;
  try {
    run(
        2,
        [](comm::Backend& b) {
          if (b.rank() == 1) {  // never joins the all_reduce; outlives rank 0's deadline
            std::this_thread::sleep_for(std::chrono::seconds(6));
            return;
          }
          DeviceBuffer<float> x(8);
          b.all_reduce(x.view(), comm::ReduceOp::Sum)->wait();
        },
        std::chrono::milliseconds(3000));
  } catch (const std::exception& e) {
    msg = e.what();
  }
  INFO(msg);
  REQUIRE(test::conformance::missing_from(msg, "all_reduce #0") == "");
  REQUIRE(test::conformance::missing_from(msg, "timed out") == "");
}
