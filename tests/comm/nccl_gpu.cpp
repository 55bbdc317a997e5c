// The nccl backend on real GPUs (label gpu;comm;nccl: excluded by the default `gpu|slow` filter;
// tests/gpu/run_nccl_checks.sh runs them). Every rank is a separate process with its own device
// (rank r on device r % count); NCCL refuses two ranks on one GPU, so a one-GPU machine runs
// one rank, where collectives are local copies and the halo exchange sends to itself. Device
// buffers are filled and read back with plain CUDA runtime calls; expected values come from the
// host reference of the conformance suite. Where no GPU is visible every test prints why it
// skips and passes.
#include <algorithm>
#include <cstring>
#include <thread>

#include "comm/nccl_support.hpp"
#include "comm/process_runner.hpp"

namespace {

using namespace tessera;
using test::conformance::fail;
using test::conformance::inputs;
using test::nccl::DeviceBuffer;

constexpr std::chrono::milliseconds kTimeout{30'000};

/// 1 and, with several GPUs, min(count, 4): the group sizes each test runs.
std::vector<int> sizes(const test::nccl::Devices& d) {
  std::vector<int> s{1};
  if (d.count >= 2) s.push_back(std::min(d.count, 4));
  return s;
}

void run(int size, const test::conformance::RankFn& fn, std::chrono::milliseconds timeout = kTimeout) {
  test::run_in_processes(TESSERA_NCCL_PLUGIN, size, timeout, fn);
}

/// Checks that `f` throws E with `part` in its message (inside a rank).
template <class E, class F>
void expect_throw(const comm::Backend& b, const std::string& what, const std::string& part, F&& f) {
  try {
    f();
  } catch (const E& e) {
    if (std::string(e.what()).find(part) == std::string::npos)
      fail(b, what, ": the message lacks '", part, "': ", e.what());
    return;
  }
  fail(b, what, ": no exception of the expected type");
}

template <class T>
void check_all_reduce(comm::Backend& b, comm::ReduceOp op, std::size_t count) {
  const std::uint64_t seed = test::conformance::case_seed(1, static_cast<std::uint64_t>(op), count,
                                                          static_cast<std::uint64_t>(core::dtype_of<T>));
  DeviceBuffer<T> buf(inputs<T>(seed, b.rank(), count));
  b.all_reduce(buf.view(), op)->wait();
  const auto expected = test::conformance::reference_reduce<T>(op, seed, b.size(), 0, count);
  test::conformance::expect_equal(b, buf.download(), expected,
                                  detail::cat("all_reduce ", core::dtype_name(core::dtype_of<T>), " ",
                                              comm::reduce_op_name(op), " count ", count),
                                  /*exact=*/false);
}

}  // namespace

TEST_CASE("nccl (GPU): all_reduce sum/avg/max/min over f32, f64, i32, i64", "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  for (int size : sizes(devices)) {
    INFO("size " << size);
    run(size, [](comm::Backend& b) {
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
    });
  }
}

TEST_CASE("nccl (GPU): all_gather, reduce_scatter, broadcast from every root, all_to_all, barrier",
          "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  for (int size : sizes(devices)) {
    INFO("size " << size);
    run(size, [](comm::Backend& b) {
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
            expected[r * 7 + i] = static_cast<std::int32_t>(r * 10000 + static_cast<std::size_t>(b.rank()) * 100 + i);
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
    });
  }
}

TEST_CASE("nccl (GPU): batch_p2p periodic halo exchange with tags (self as both neighbours on one GPU)",
          "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  for (int size : sizes(devices)) {
    INFO("size " << size);
    run(size, [](comm::Backend& b) {
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
        test::conformance::expect_equal(b, from_left.download(), inputs<float>(seed, 2 * left + 1, halo),
                                        detail::cat("halo from the left, step ", step));
        test::conformance::expect_equal(b, from_right.download(), inputs<float>(seed, 2 * right, halo),
                                        detail::cat("halo from the right, step ", step));
      }
      b.batch_p2p({})->wait();  // an empty batch completes at once
    });
  }
}

TEST_CASE("nccl (GPU): split into sub-groups (ncclCommSplit), non-members get nullptr", "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  for (int size : sizes(devices)) {
    INFO("size " << size);
    run(size, [](comm::Backend& b) {
      // Even and odd ranks.
      std::vector<int> mine;
      for (int r = b.rank() % 2; r < b.size(); r += 2) mine.push_back(r);
      auto sub = b.split(mine);
      if (!sub) fail(b, "split: a member got nullptr");
      if (sub->size() != static_cast<int>(mine.size())) fail(b, "split: size ", sub->size());
      const int expect_rank = static_cast<int>(std::find(mine.begin(), mine.end(), b.rank()) - mine.begin());
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
    });
  }
}

TEST_CASE("nccl (GPU): host buffers are refused, bad counts, roots and peers are caught before NCCL",
          "[nccl][gpu]") {
  TESSERA_NCCL_REQUIRE_GPU(devices);
  run(1, [](comm::Backend& b) {
    if (!b.capabilities().cuda_memory) fail(b, "capabilities().cuda_memory is false");
    std::vector<float> host(4, 1.f);
    expect_throw<Unsupported>(b, "host all_reduce", "host memory", [&] {
      b.all_reduce(test::conformance::view(host), comm::ReduceOp::Sum);
    });
    expect_throw<InvalidArgument>(b, "host pointer marked Cuda", "is host memory", [&] {
      b.all_reduce({host.data(), host.size(), core::DType::F32, comm::MemorySpace::Cuda}, comm::ReduceOp::Sum);
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
  if (devices.count < 2) {
    WARN("SKIPPED: needs 2 GPUs (NCCL refuses two ranks on one device); " << devices.count << " visible");
    return;
  }
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
