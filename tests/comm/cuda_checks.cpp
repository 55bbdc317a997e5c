// The shared CUDA-buffer checks (see cuda_checks.hpp).
#include "comm/cuda_checks.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "comm/nccl_support.hpp"
#if TESSERA_TEST_CUDA_COMPUTE
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/cuda.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/core/tensor.hpp"
#endif

namespace tessera::test::cuda_checks {

using test::conformance::fail;
using test::conformance::inputs;
using test::nccl::DeviceBuffer;

namespace {

template <class T>
void check_all_reduce(comm::Backend& b, comm::ReduceOp op, std::size_t count) {
  const std::uint64_t seed = test::conformance::case_seed(
      1, static_cast<std::uint64_t>(op), count, static_cast<std::uint64_t>(core::dtype_of<T>));
  DeviceBuffer<T> buf(inputs<T>(seed, b.rank(), count));
  b.all_reduce(buf.view(), op)->wait();
  const auto expected = test::conformance::reference_reduce<T>(op, seed, b.size(), 0, count);
  test::conformance::expect_equal(b, buf.download(), expected,
                                  detail::cat("all_reduce ", core::dtype_name(core::dtype_of<T>),
                                              " ", comm::reduce_op_name(op), " count ", count),
                                  /*exact=*/false);
}

}  // namespace

void all_reduce(comm::Backend& b) {
  for (std::size_t count : {std::size_t{1}, std::size_t{4099}, std::size_t{1} << 18}) {
    for (auto op : {comm::ReduceOp::Sum, comm::ReduceOp::Max, comm::ReduceOp::Min}) {
      check_all_reduce<float>(b, op, count);
      check_all_reduce<double>(b, op, count);
      check_all_reduce<std::int32_t>(b, op, count);
      check_all_reduce<std::int64_t>(b, op, count);
    }
    check_all_reduce<float>(b, comm::ReduceOp::Avg, count);
    check_all_reduce<double>(b, comm::ReduceOp::Avg, count);
  }
}

void collectives(comm::Backend& b) {
  const auto n = static_cast<std::size_t>(b.size());
  const std::size_t block = 1001;
  {  // all_gather: block r of recv is rank r's input
    DeviceBuffer<float> send(inputs<float>(11, b.rank(), block));
    DeviceBuffer<float> recv(n * block);
    b.all_gather(send.view(), recv.view())->wait();
    std::vector<float> expected;
    for (int r = 0; r < b.size(); ++r) {
      const auto v = inputs<float>(11, r, block);
      expected.insert(expected.end(), v.begin(), v.end());
    }
    test::conformance::expect_equal(b, recv.download(), expected, "all_gather f32");
  }
  {  // reduce_scatter: rank r gets the sum of block r
    DeviceBuffer<float> send(inputs<float>(12, b.rank(), n * block));
    DeviceBuffer<float> recv(block);
    b.reduce_scatter(send.view(), recv.view(), comm::ReduceOp::Sum)->wait();
    const auto expected = test::conformance::reference_reduce<float>(
        comm::ReduceOp::Sum, 12, b.size(), static_cast<std::size_t>(b.rank()) * block, block);
    test::conformance::expect_equal(b, recv.download(), expected, "reduce_scatter f32 sum", false);
  }
  for (int root = 0; root < b.size(); ++root) {  // broadcast: bits of root's input, any dtype
    DeviceBuffer<std::int64_t> buf(inputs<std::int64_t>(13, b.rank(), block));
    b.broadcast(buf.view(), root)->wait();
    test::conformance::expect_equal(b, buf.download(), inputs<std::int64_t>(13, root, block),
                                    detail::cat("broadcast i64 root ", root));
    std::vector<std::uint16_t> halves(block);
    for (std::size_t i = 0; i < block; ++i) halves[i] = static_cast<std::uint16_t>(root * 1000 + i);
    std::vector<std::uint16_t> mine(block, 0xffff);
    DeviceBuffer<std::uint16_t> h(b.rank() == root ? halves : mine);
    comm::BufferView v{h.data(), block, core::DType::BF16, comm::MemorySpace::Cuda};
    b.broadcast(v, root)->wait();
    if (h.download() != halves) fail(b, "broadcast bf16 root ", root, ": bits differ");
  }
  {  // all_to_all: block r of send goes to rank r, arriving as block (this rank)
    std::vector<std::int32_t> send_host(n * 7);
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t i = 0; i < 7; ++i)
        send_host[r * 7 + i] = static_cast<std::int32_t>(b.rank() * 10000 + r * 100 + i);
    DeviceBuffer<std::int32_t> send(send_host), recv(n * 7);
    b.all_to_all(send.view(), recv.view())->wait();
    std::vector<std::int32_t> expected(n * 7);
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t i = 0; i < 7; ++i)
        expected[r * 7 + i] =
            static_cast<std::int32_t>(r * 10000 + static_cast<std::size_t>(b.rank()) * 100 + i);
    test::conformance::expect_equal(b, recv.download(), expected, "all_to_all i32");
  }
  for (int i = 0; i < 3; ++i) b.barrier();
  {  // is_completed eventually turns true, and wait after it is a no-op
    DeviceBuffer<float> buf(inputs<float>(14, b.rank(), block));
    auto w = b.all_reduce(buf.view(), comm::ReduceOp::Sum);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!w->is_completed())
      if (std::chrono::steady_clock::now() > until) fail(b, "is_completed never turned true");
    w->wait();
    w->wait();
  }
}

void halo(comm::Backend& b) {
  const int left = (b.rank() + b.size() - 1) % b.size(), right = (b.rank() + 1) % b.size();
  const std::size_t halo = 3 * 257;  // a 3-row slab of 257 floats
  for (int step = 0; step < 3; ++step) {
    const std::uint64_t seed = 100 + static_cast<std::uint64_t>(step);
    // To the left goes tag 1, to the right tag 2, so with one rank (left == right == self)
    // the tags alone pair the messages. Receives are posted in the opposite order.
    DeviceBuffer<float> to_left(inputs<float>(seed, 2 * b.rank(), halo));
    DeviceBuffer<float> to_right(inputs<float>(seed, 2 * b.rank() + 1, halo));
    DeviceBuffer<float> from_left(halo), from_right(halo);
    std::vector<comm::P2POp> ops{
        {comm::P2POp::Kind::Recv, from_right.view(), right, 1},
        {comm::P2POp::Kind::Recv, from_left.view(), left, 2},
        {comm::P2POp::Kind::Send, to_left.view(), left, 1},
        {comm::P2POp::Kind::Send, to_right.view(), right, 2},
    };
    b.batch_p2p(ops)->wait();
    // from_left holds what left sent to its right (tag 2); from_right what right sent left.
    test::conformance::expect_equal(b, from_left.download(),
                                    inputs<float>(seed, 2 * left + 1, halo),
                                    detail::cat("halo from the left, step ", step));
    test::conformance::expect_equal(b, from_right.download(), inputs<float>(seed, 2 * right, halo),
                                    detail::cat("halo from the right, step ", step));
  }
  b.batch_p2p({})->wait();  // an empty batch completes at once
}

void split(comm::Backend& b) {
  // Even and odd ranks.
  std::vector<int> mine;
  for (int r = b.rank() % 2; r < b.size(); r += 2) mine.push_back(r);
  auto sub = b.split(mine);
  if (!sub) fail(b, "split: a member got nullptr");
  if (sub->size() != static_cast<int>(mine.size())) fail(b, "split: size ", sub->size());
  const int expect_rank =
      static_cast<int>(std::find(mine.begin(), mine.end(), b.rank()) - mine.begin());
  if (sub->rank() != expect_rank) fail(b, "split: rank ", sub->rank(), ", expected ", expect_rank);
  DeviceBuffer<std::int64_t> x(std::vector<std::int64_t>{b.rank() + 1});
  sub->all_reduce(x.view(), comm::ReduceOp::Sum)->wait();
  std::int64_t sum = 0;
  for (int r : mine) sum += r + 1;
  if (x.download()[0] != sum) fail(b, "split all_reduce: ", x.download()[0], ", expected ", sum);
  sub->barrier();
  // Only rank 0 belongs to the next one.
  auto only0 = b.split({0});
  if ((only0 != nullptr) != (b.rank() == 0)) fail(b, "split {0}: membership wrong");
  if (only0) {
    DeviceBuffer<float> y(std::vector<float>{5.f});
    only0->all_reduce(y.view(), comm::ReduceOp::Max)->wait();
    if (y.download()[0] != 5.f) fail(b, "split {0} all_reduce");
  }
  b.barrier();  // the parent still works
}

#if TESSERA_TEST_CUDA_COMPUTE
void ordered_with_compute(comm::Backend& b) {
  if (b.size() != 1) fail(b, "ordered_with_compute runs on one rank, not ", b.size());
  int device = 0;
  test::nccl::cuda_ok(cudaGetDevice(&device), "cudaGetDevice");
  compute::BackendOptions o;
  o.device = device;
  const std::unique_ptr<compute::Backend> gpu = compute::cuda::create(o);
  auto* cd = dynamic_cast<compute::cuda::CudaDevice*>(gpu.get());
  if (!cd) fail(b, "the cuda compute backend is not a CudaDevice");
  const auto compute_stream = static_cast<cudaStream_t>(cd->compute_stream());
  const auto alloc = std::make_shared<core::Allocator>("rank 0", gpu->device_memory());
  constexpr std::int64_t n = 1 << 20;
  core::Tensor send =
      core::Tensor::zeros({n}, core::DType::F32, core::MemCategory::HaloBuffer, alloc);
  core::Tensor recv =
      core::Tensor::zeros({n}, core::DType::F32, core::MemCategory::HaloBuffer, alloc);
  gpu->synchronize();
  const bool staged =
      b.capabilities().cuda_staged;  // staging reads the bytes on the host at the post
  for (int round = 1; round <= 4; ++round) {
    // Rounds 1-2 batch_p2p, 3-4 all_gather (one rank: a copy); the first of each may set up
    // connections, so only the second is timed.
    cudaHostFn_t hold = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); };
    test::nccl::cuda_ok(cudaLaunchHostFunc(compute_stream, hold, nullptr), "cudaLaunchHostFunc");
    send.fill(static_cast<double>(round));  // kernels on the held compute stream
    recv.fill(-1.0);
    const auto t0 = std::chrono::steady_clock::now();
    comm::WorkPtr w = round <= 2
                          ? b.batch_p2p({{comm::P2POp::Kind::Recv, comm::buffer_of(recv), 0, 9},
                                         {comm::P2POp::Kind::Send, comm::buffer_of(send), 0, 9}})
                          : b.all_gather(comm::buffer_of(send), comm::buffer_of(recv));
    const double post_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    w->wait();
    const core::Tensor h = recv.to_host();
    const float* got = h.data<float>();
    auto expect_at = [&](std::int64_t i) {
      if (got[i] != static_cast<float>(round))
        fail(b, "round ", round, ": element ", i, " of the receive is ", got[i], ", expected ",
             round, " (the transfer was not ordered with the compute stream's writes)");
    };
    for (std::int64_t i = 0; i < n; i += 4099) expect_at(i);
    expect_at(n - 1);
    if (!staged && round % 2 == 0 && post_ms > 150.0)
      fail(b, "round ", round, ": the post took ", post_ms,
           " ms while the compute stream was held for 300 ms: ",
           "it waited for the compute stream on the host instead of having its stream wait on the "
           "device");
  }
}
#endif

}  // namespace tessera::test::cuda_checks
