// Conformance suite, part 1: the runner glue, the collectives checks, and the per-backend
// instantiations (one TESSERA_COMM_CONFORMANCE line per compiled-in backend).
#include "comm/conformance.hpp"

#include <thread>


namespace tessera::test::conformance {

std::string run_ranks(const ConformanceTarget& target, int size, const RankFn& fn,
                      std::chrono::milliseconds timeout) {
  try {
    target.run(size, timeout, fn);
    return "";
  } catch (const CheckFailure& e) {
    return detail::cat(target.name, ", ", size, " ranks: check failed: ", e.what());
  } catch (const std::exception& e) {
    return detail::cat(target.name, ", ", size, " ranks: unexpected exception: ", e.what());
  }
}

std::string label(core::DType dtype, std::size_t count) {
  return detail::cat(core::dtype_name(dtype), " count ", count);
}

std::string label(core::DType dtype, comm::ReduceOp op, std::size_t count) {
  return detail::cat(core::dtype_name(dtype), " ", comm::reduce_op_name(op), " count ", count);
}

namespace {

/// Sentinel that no input produces (inputs lie in [-1, 1) or [-1000, 1000]).
template <class T>
constexpr T kSentinel = static_cast<T>(12345);

/// The counts of a reduction check: kCounts, plus kLargeCount for Sum.
std::vector<std::size_t> counts_for(comm::ReduceOp op) {
  std::vector<std::size_t> c(std::begin(kCounts), std::end(kCounts));
  if (op == comm::ReduceOp::Sum) c.push_back(kLargeCount);
  return c;
}

}  // namespace

void check_all_reduce(const ConformanceTarget& target, int size) {
  const bool exact = target.rank_order_reductions;
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    for_each_dtype([&]<class T>() {
      for (comm::ReduceOp op : kAllOps) {
        for (std::size_t count : counts_for(op)) {
          const auto seed =
              case_seed(1, static_cast<int>(core::dtype_of<T>), static_cast<int>(op), count);
          std::vector<T> buf = inputs<T>(seed, b.rank(), count);
          auto work = b.all_reduce(view(buf), op);
          work->wait();
          if (!work->is_completed()) fail(b, "all_reduce: is_completed() false after wait()");
          expect_equal(b, buf, reference_reduce<T>(op, seed, b.size(), 0, count),
                       "all_reduce " + label(core::dtype_of<T>, op, count), exact);
        }
      }
    });
  });
  REQUIRE(err == "");
}

void check_all_gather(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    for_each_dtype([&]<class T>() {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1024}, kLargeCount}) {
        const auto seed = case_seed(2, static_cast<int>(core::dtype_of<T>), count);
        std::vector<T> send = inputs<T>(seed, b.rank(), count);
        std::vector<T> recv(count * static_cast<std::size_t>(b.size()), kSentinel<T>);
        b.all_gather(view(send), view(recv))->wait();
        std::vector<T> expected;
        for (int r = 0; r < b.size(); ++r) {
          auto block = inputs<T>(seed, r, count);
          expected.insert(expected.end(), block.begin(), block.end());
        }
        expect_equal(b, recv, expected, "all_gather " + label(core::dtype_of<T>, count));
        expect_equal(b, send, inputs<T>(seed, b.rank(), count), "all_gather send buffer");
      }
    });
  });
  REQUIRE(err == "");
}

void check_reduce_scatter(const ConformanceTarget& target, int size) {
  const bool exact = target.rank_order_reductions;
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const auto n = static_cast<std::size_t>(b.size());
    for_each_dtype([&]<class T>() {
      for (comm::ReduceOp op : kAllOps) {
        for (std::size_t count : counts_for(op)) {  // the large count: ring steps in several chunks
          const auto seed =
              case_seed(3, static_cast<int>(core::dtype_of<T>), static_cast<int>(op), count);
          std::vector<T> send = inputs<T>(seed, b.rank(), n * count);
          std::vector<T> recv(count, kSentinel<T>);
          b.reduce_scatter(view(send), view(recv), op)->wait();
          const auto offset = static_cast<std::size_t>(b.rank()) * count;
          expect_equal(b, recv, reference_reduce<T>(op, seed, b.size(), offset, count),
                       "reduce_scatter " + label(core::dtype_of<T>, op, count), exact);
        }
      }
    });
  });
  REQUIRE(err == "");
}

void check_broadcast(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    for (int root = 0; root < b.size(); ++root) {
      for_each_dtype([&]<class T>() {
        for (std::size_t count : kCounts) {
          const auto seed = case_seed(4, static_cast<int>(core::dtype_of<T>), root, count);
          std::vector<T> buf =
              b.rank() == root ? inputs<T>(seed, root, count) : std::vector<T>(count, kSentinel<T>);
          b.broadcast(view(buf), root)->wait();
          expect_equal(
              b, buf, inputs<T>(seed, root, count),
              detail::cat("broadcast from root ", root, " ", label(core::dtype_of<T>, count)));
        }
      });
    }
  });
  REQUIRE(err == "");
}

void check_all_to_all(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const auto n = static_cast<std::size_t>(b.size());
    if (!b.capabilities().all_to_all) {
      std::vector<float> send(n), recv(n);
      try {
        b.all_to_all(view(send), view(recv));
      } catch (const Unsupported&) {
        return;
      }
      fail(b, "capabilities().all_to_all is false but all_to_all did not throw Unsupported");
    }
    for_each_dtype([&]<class T>() {
      for (std::size_t block : kCounts) {
        const auto seed = case_seed(5, static_cast<int>(core::dtype_of<T>), block);
        std::vector<T> send = inputs<T>(seed, b.rank(), n * block);
        std::vector<T> recv(n * block, kSentinel<T>);
        b.all_to_all(view(send), view(recv))->wait();
        // Block r of my recv is block (my rank) of rank r's send.
        std::vector<T> expected;
        for (int r = 0; r < b.size(); ++r) {
          auto theirs = inputs<T>(seed, r, n * block);
          auto first = theirs.begin() + static_cast<std::ptrdiff_t>(block) * b.rank();
          expected.insert(expected.end(), first, first + static_cast<std::ptrdiff_t>(block));
        }
        expect_equal(b, recv, expected, "all_to_all block " + label(core::dtype_of<T>, block));
      }
    });
  });
  REQUIRE(err == "");
}

void check_barrier(const ConformanceTarget& target, int size) {
  using namespace std::chrono;
  constexpr auto kHold = milliseconds(60);
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    for (int i = 0; i < 50; ++i) b.barrier();
    // Rank 0 arrives late; nobody may leave before it arrives. The previous barrier lined the
    // ranks up, so each waits about kHold; half of it leaves room for scheduling skew.
    if (b.rank() == 0) std::this_thread::sleep_for(kHold);
    const auto t0 = steady_clock::now();
    b.barrier();
    const auto waited = duration_cast<milliseconds>(steady_clock::now() - t0);
    if (b.rank() != 0 && waited < kHold / 2)
      fail(b, "left the barrier after ", waited.count(), " ms although rank 0 arrived ",
           kHold.count(), " ms late");
  });
  REQUIRE(err == "");
}

void check_mixed_sequence(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const auto n = static_cast<std::size_t>(b.size());
    for (int it = 0; it < 200; ++it) {
      const auto seed = case_seed(6, static_cast<std::uint64_t>(it));
      std::vector<std::int64_t> x = inputs<std::int64_t>(seed, b.rank(), 3);
      b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
      expect_equal(b, x, reference_reduce<std::int64_t>(comm::ReduceOp::Sum, seed, b.size(), 0, 3),
                   detail::cat("all_reduce in iteration ", it));
      std::vector<std::int32_t> root_val = {b.rank() == it % b.size() ? it : -1};
      b.broadcast(view(root_val), it % b.size())->wait();
      if (root_val[0] != it) fail(b, "broadcast in iteration ", it, " gave ", root_val[0]);
      std::vector<std::int32_t> mine = {b.rank() + it}, all(n);
      b.all_gather(view(mine), view(all))->wait();
      for (int r = 0; r < b.size(); ++r)
        if (all[static_cast<std::size_t>(r)] != r + it)
          fail(b, "all_gather in iteration ", it, ": block ", r, " is ",
               all[static_cast<std::size_t>(r)]);
      if (it % 50 == 0) b.barrier();
    }
  });
  REQUIRE(err == "");
}

}  // namespace tessera::test::conformance

// The instantiations live with each backend's tests: local_test.cpp ("[local]") and
// ucx_conformance.cpp ("[ucx]", its own executable: ranks are processes).
