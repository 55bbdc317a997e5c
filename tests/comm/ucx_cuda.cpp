// The ucx plugin with CUDA buffers, staged through pinned host memory (Debian's UCX has no CUDA
// transport). Every rank is a separate process; unlike NCCL, several ranks may share one GPU, so
// a one-GPU machine runs groups of 1 to 4 ranks. The checks are the nccl tests' own
// (comm/cuda_checks.cpp) plus what staging adds: host and CUDA buffers mixed in one call, and a
// host pointer marked Cuda refused. Label gpu (the GPU check bundle runs them: tests/gpu/README.md; where no
// GPU is visible they print why they skip). The test without the gpu label runs everywhere: with
// no GPU, a CUDA buffer gets an error saying CUDA is not usable, never a crash.
#include <string>
#include <vector>

#include "comm/cuda_checks.hpp"
#include "comm/nccl_support.hpp"
#include "comm/process_runner.hpp"

namespace {

using namespace tessera;
using test::conformance::fail;
using test::conformance::inputs;
using test::cuda_checks::expect_throw;
using test::nccl::DeviceBuffer;

constexpr std::chrono::milliseconds kTimeout{60'000};

void run(int size, const test::conformance::RankFn& fn) {
  test::run_in_processes(TESSERA_UCX_PLUGIN, size, kTimeout, [fn](comm::Backend& b) {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 1) cudaSetDevice(b.rank() % count);
    fn(b);
  });
}

}  // namespace

TEST_CASE("ucx (GPU): CUDA buffers staged through host memory pass the nccl checks at 1-4 ranks",
          "[ucx][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  for (int size : {1, 2, 3, 4}) {
    INFO("size " << size);
    run(size, [](comm::Backend& b) {
      const auto caps = b.capabilities();
      if (!caps.cuda_memory || !caps.cuda_staged)
        fail(b, "capabilities: cuda_memory and cuda_staged expected");
      test::cuda_checks::all_reduce(b);
      test::cuda_checks::collectives(b);
      test::cuda_checks::halo(b);
      test::cuda_checks::split(b);
    });
  }
}

TEST_CASE("ucx (GPU): staging copies of the cuda compute backend's tensors follow its stream",
          "[ucx][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
#if TESSERA_TEST_CUDA_COMPUTE
  run(1, test::cuda_checks::ordered_with_compute);
#else
  TESSERA_SKIP("the cuda compute backend is not built here (cuDNN not found)");
#endif
}

TEST_CASE(
    "ucx (GPU): host and CUDA buffers mixed in one call, and a host pointer marked Cuda refused",
    "[ucx][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  run(3, [](comm::Backend& b) {
    const std::size_t n = 777;
    const auto size = static_cast<std::size_t>(b.size());
    // all_gather from a host send into a CUDA recv, and back.
    std::vector<float> host_send = inputs<float>(21, b.rank(), n);
    DeviceBuffer<float> dev_recv(size * n);
    b.all_gather(test::conformance::view(host_send), dev_recv.view())->wait();
    std::vector<float> expected;
    for (int r = 0; r < b.size(); ++r) {
      const auto v = inputs<float>(21, r, n);
      expected.insert(expected.end(), v.begin(), v.end());
    }
    test::conformance::expect_equal(b, dev_recv.download(), expected, "all_gather host -> CUDA");
    DeviceBuffer<float> dev_send(inputs<float>(22, b.rank(), n));
    std::vector<float> host_recv(size * n);
    b.all_gather(dev_send.view(), test::conformance::view(host_recv))->wait();
    expected.clear();
    for (int r = 0; r < b.size(); ++r) {
      const auto v = inputs<float>(22, r, n);
      expected.insert(expected.end(), v.begin(), v.end());
    }
    test::conformance::expect_equal(b, host_recv, expected, "all_gather CUDA -> host");

    // A ring halo: a CUDA buffer to the right, a host buffer to the left, receives the other way.
    const int left = (b.rank() + b.size() - 1) % b.size(), right = (b.rank() + 1) % b.size();
    DeviceBuffer<double> to_right(inputs<double>(23, b.rank(), n)), from_left(n);
    std::vector<double> to_left = inputs<double>(24, b.rank(), n), from_right(n);
    b.batch_p2p({{comm::P2POp::Kind::Recv, test::conformance::view(from_right), right, 5},
                 {comm::P2POp::Kind::Send, to_right.view(), right, 6},
                 {comm::P2POp::Kind::Recv, from_left.view(), left, 6},
                 {comm::P2POp::Kind::Send, test::conformance::view(to_left), left, 5}})
        ->wait();
    test::conformance::expect_equal(b, from_left.download(), inputs<double>(23, left, n),
                                    "halo CUDA from the left");
    test::conformance::expect_equal(b, from_right, inputs<double>(24, right, n),
                                    "halo host from the right");

    // The same pinned buffers serve repeated calls: 50 all_reduces of a gradient-bucket size.
    DeviceBuffer<float> bucket(std::vector<float>(1 << 16, 1.f));
    for (int i = 0; i < 50; ++i) b.all_reduce(bucket.view(), comm::ReduceOp::Avg)->wait();
    const auto got = bucket.download();
    for (std::size_t i = 0; i < got.size(); i += 4099)
      if (got[i] != 1.f) fail(b, "repeated all_reduce avg: element ", i, " is ", got[i]);

    // Refused before any communication, on every rank alike: the group stays usable.
    std::vector<float> host(4, 1.f);
    expect_throw<InvalidArgument>(b, "host pointer marked Cuda", "is host memory", [&] {
      b.all_reduce({host.data(), host.size(), core::DType::F32, comm::MemorySpace::Cuda},
                   comm::ReduceOp::Sum);
    });
    DeviceBuffer<float> ok(std::vector<float>{2.f});
    b.all_reduce(ok.view(), comm::ReduceOp::Sum)->wait();
    if (ok.download()[0] != 2.f * static_cast<float>(b.size()))
      fail(b, "all_reduce after a refused call");
  });
}

TEST_CASE(
    "ucx: capabilities say CUDA buffers are staged, and without a GPU a CUDA buffer gets a clear "
    "error",
    "[ucx][staging]") {
  const auto devices = test::nccl::probe_devices();
  std::string msg;
  try {
    test::run_in_processes(TESSERA_UCX_PLUGIN, 2, kTimeout, [&devices](comm::Backend& b) {
      const auto caps = b.capabilities();
      if (!caps.cuda_memory || !caps.cuda_staged)
        fail(b, "capabilities: cuda_memory and cuda_staged expected");
      if (devices.count > 0) return;  // the gpu-labelled tests cover real device buffers
      std::vector<float> host(8, 1.f);
      expect_throw<BackendError>(
          b, "CUDA buffer without a GPU", "CUDA is not usable in this process", [&] {
            b.all_reduce({host.data(), host.size(), core::DType::F32, comm::MemorySpace::Cuda},
                         comm::ReduceOp::Sum);
          });
      // Host buffers still work.
      b.all_reduce(test::conformance::view(host), comm::ReduceOp::Sum)->wait();
      if (host[0] != 2.f) fail(b, "host all_reduce after the refused CUDA one: ", host[0]);
    });
  } catch (const std::exception& e) {
    msg = e.what();
  }
  INFO(msg);
  REQUIRE(msg.empty());
  if (devices.count > 0)
    WARN("a GPU is visible here: the gpu-labelled ucx tests check CUDA buffers");
}
