// Conformance suite, part 2: batch_p2p (ring, neighbour exchange, self sends, tags, ordering,
// non-blocking completion, size mismatch).
#include "comm/conformance.hpp"

namespace tessera::test::conformance {
namespace {

comm::P2POp send_op(comm::BufferView buf, int peer, int tag = 0) {
  return {comm::P2POp::Kind::Send, buf, peer, tag};
}
comm::P2POp recv_op(comm::BufferView buf, int peer, int tag = 0) {
  return {comm::P2POp::Kind::Recv, buf, peer, tag};
}

/// Seed of the message `src` sends to `dst` in check `check`, case `c`.
std::uint64_t msg_seed(std::uint64_t check, int src, int dst, std::uint64_t c = 0) {
  return case_seed(check, static_cast<std::uint64_t>(src), static_cast<std::uint64_t>(dst), c);
}

}  // namespace

void check_p2p_ring(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const int next = (b.rank() + 1) % b.size();
    const int prev = (b.rank() + b.size() - 1) % b.size();
    for (std::size_t count : kCounts) {
      std::vector<float> out = inputs<float>(msg_seed(10, b.rank(), next, count), 0, count);
      std::vector<float> in(count, -7.0f);
      std::vector<std::int64_t> out64 =
          inputs<std::int64_t>(msg_seed(11, b.rank(), next, count), 0, count);
      std::vector<std::int64_t> in64(count, -7);
      // Receives first: a batch must not depend on the order of its operations.
      b.batch_p2p({recv_op(view(in), prev), recv_op(view(in64), prev, 1), send_op(view(out), next),
                   send_op(view(out64), next, 1)})
          ->wait();
      expect_equal(b, in, inputs<float>(msg_seed(10, prev, b.rank(), count), 0, count),
                   detail::cat("ring f32 from rank ", prev, " count ", count));
      expect_equal(b, in64, inputs<std::int64_t>(msg_seed(11, prev, b.rank(), count), 0, count),
                   detail::cat("ring i64 from rank ", prev, " count ", count));
    }
  });
  REQUIRE(err == "");
}

void check_p2p_neighbours(const ConformanceTarget& target, int size) {
  // Halo-exchange shape: non-periodic 1-D; tag 1 travels rightwards, tag 2 leftwards.
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const int left = b.rank() - 1, right = b.rank() + 1;
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1024}}) {
      std::vector<double> to_right = inputs<double>(msg_seed(12, b.rank(), right, count), 0, count);
      std::vector<double> to_left = inputs<double>(msg_seed(12, b.rank(), left, count), 0, count);
      std::vector<double> from_left(count, 9.0), from_right(count, 9.0);
      std::vector<comm::P2POp> ops;
      if (left >= 0) ops.push_back(recv_op(view(from_left), left, 1));
      if (right < b.size()) ops.push_back(recv_op(view(from_right), right, 2));
      if (right < b.size()) ops.push_back(send_op(view(to_right), right, 1));
      if (left >= 0) ops.push_back(send_op(view(to_left), left, 2));
      b.batch_p2p(ops)->wait();
      if (left >= 0)
        expect_equal(b, from_left, inputs<double>(msg_seed(12, left, b.rank(), count), 0, count),
                     detail::cat("halo from the left, count ", count));
      if (right < b.size())
        expect_equal(b, from_right, inputs<double>(msg_seed(12, right, b.rank(), count), 0, count),
                     detail::cat("halo from the right, count ", count));
    }
  });
  REQUIRE(err == "");
}

void check_p2p_self(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    for (std::size_t count : kCounts) {
      std::vector<std::int32_t> out =
          inputs<std::int32_t>(msg_seed(13, b.rank(), b.rank(), count), 0, count);
      std::vector<std::int32_t> in_a(count, 5), in_b(count, 5);
      b.batch_p2p({send_op(view(out), b.rank(), 3), recv_op(view(in_a), b.rank(), 3)})->wait();
      b.batch_p2p({recv_op(view(in_b), b.rank(), 4), send_op(view(out), b.rank(), 4)})->wait();
      expect_equal(b, in_a, out, detail::cat("send to self (send first), count ", count));
      expect_equal(b, in_b, out, detail::cat("send to self (receive first), count ", count));
    }
  });
  REQUIRE(err == "");
}

void check_p2p_tags(const ConformanceTarget& target, int size) {
  // Each rank sends its successor tags 7, 5, 6, 5 (count = tag, the second tag-5 message a
  // different payload); the successor posts receives in the order 5, 6, 7, 5.
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const int next = (b.rank() + 1) % b.size();
    const int prev = (b.rank() + b.size() - 1) % b.size();
    auto payload = [](int src, int dst, int tag, int nth) {
      return inputs<float>(msg_seed(14, src, dst, static_cast<std::uint64_t>(tag * 10 + nth)), 0,
                           static_cast<std::size_t>(tag));
    };
    std::vector<float> s7 = payload(b.rank(), next, 7, 0), s5a = payload(b.rank(), next, 5, 0),
                       s6 = payload(b.rank(), next, 6, 0), s5b = payload(b.rank(), next, 5, 1);
    std::vector<float> r5a(5), r6(6), r7(7), r5b(5);
    b.batch_p2p({send_op(view(s7), next, 7), send_op(view(s5a), next, 5),
                 send_op(view(s6), next, 6), send_op(view(s5b), next, 5),
                 recv_op(view(r5a), prev, 5), recv_op(view(r6), prev, 6),
                 recv_op(view(r7), prev, 7), recv_op(view(r5b), prev, 5)})
        ->wait();
    expect_equal(b, r5a, payload(prev, b.rank(), 5, 0), "first tag-5 message");
    expect_equal(b, r6, payload(prev, b.rank(), 6, 0), "tag-6 message");
    expect_equal(b, r7, payload(prev, b.rank(), 7, 0), "tag-7 message");
    expect_equal(b, r5b, payload(prev, b.rank(), 5, 1), "second tag-5 message");
  });
  REQUIRE(err == "");
}

void check_p2p_order_across_batches(const ConformanceTarget& target, int size) {
  // Two batches on one channel: receives match sends in posting order, even when the second
  // receive is waited for first.
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const int next = (b.rank() + 1) % b.size();
    const int prev = (b.rank() + b.size() - 1) % b.size();
    std::vector<double> a = inputs<double>(msg_seed(15, b.rank(), next, 0), 0, 16);
    std::vector<double> c = inputs<double>(msg_seed(15, b.rank(), next, 1), 0, 16);
    std::vector<double> x(16), y(16);
    auto w1 = b.batch_p2p({send_op(view(a), next, 8)});
    auto w2 = b.batch_p2p({send_op(view(c), next, 8)});
    auto wx = b.batch_p2p({recv_op(view(x), prev, 8)});
    auto wy = b.batch_p2p({recv_op(view(y), prev, 8)});
    wy->wait();
    wx->wait();
    w2->wait();
    w1->wait();
    expect_equal(b, x, inputs<double>(msg_seed(15, prev, b.rank(), 0), 0, 16),
                 "first posted receive");
    expect_equal(b, y, inputs<double>(msg_seed(15, prev, b.rank(), 1), 0, 16),
                 "second posted receive");
  });
  REQUIRE(err == "");
}

void check_p2p_is_completed(const ConformanceTarget& target) {
  // Rank 0 sends only after a barrier, so rank 1's receive cannot be complete before it.
  auto err = run_ranks(target, 3, [&](comm::Backend& b) {
    std::vector<std::int64_t> buf = {42, 43};
    if (b.rank() == 1) {
      auto work = b.batch_p2p({recv_op(view(buf), 0, 4)});
      if (work->is_completed()) fail(b, "is_completed() true before the peer sent");
      b.barrier();
      work->wait();
      if (!work->is_completed()) fail(b, "is_completed() false after wait()");
      work->wait();  // a second wait is a no-op
      expect_equal(b, buf, std::vector<std::int64_t>{7, 8}, "received message");
    } else if (b.rank() == 0) {
      b.barrier();
      std::vector<std::int64_t> msg = {7, 8};
      b.batch_p2p({send_op(view(msg), 1, 4)})->wait();
    } else {
      b.barrier();
    }
  });
  REQUIRE(err == "");
}

void check_p2p_size_mismatch(const ConformanceTarget& target) {
  auto err = run_ranks(target, 2, [&](comm::Backend& b) {
    if (b.rank() == 0) {
      std::vector<float> msg(8, 1.0f);
      b.batch_p2p({send_op(view(msg), 1, 2)})->wait();
      return;
    }
    std::vector<float> buf(7);
    try {
      b.batch_p2p({recv_op(view(buf), 0, 2)})->wait();
    } catch (const InvalidArgument& e) {
      const std::string m = e.what();
      for (const char* part : {"rank 0", "rank 1", "tag 2", "8", "7"})
        if (m.find(part) == std::string::npos)
          fail(b, "size-mismatch message lacks '", part, "': ", m);
      return;
    }
    fail(b, "receiving 7 elements of an 8-element message did not throw InvalidArgument");
  });
  REQUIRE(err == "");
}

}  // namespace tessera::test::conformance
