// Tests of the local backend beyond the conformance suite: several Worlds at once, create() and
// the registry, bit-for-bit determinism, abort and late arrivals, local-only rules.
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "comm/conformance.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/core/half.hpp"

namespace {

using namespace tessera;
using namespace std::chrono_literals;
using test::conformance::inputs;
using test::conformance::view;
using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

using test::conformance::missing_from;

/// Runs `fn` on `size` local ranks; returns "" or the rethrown failure's message.
std::string run_local(int size, const std::function<void(comm::Backend&)>& fn) {
  try {
    comm::local::run(size, fn, 10s);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

/// A loop of all_reduces and a p2p ring with seed `seed`; throws on a wrong result.
void busy_rank(comm::Backend& b, std::uint64_t seed, int iterations) {
  for (int it = 0; it < iterations; ++it) {
    const auto s = seed * 1000 + static_cast<std::uint64_t>(it);
    std::vector<double> x = inputs<double>(s, b.rank(), 33);
    b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
    test::conformance::expect_equal(
        b, x, test::conformance::reference_reduce<double>(comm::ReduceOp::Sum, s, b.size(), 0, 33),
        "all_reduce");
    const int next = (b.rank() + 1) % b.size(), prev = (b.rank() + b.size() - 1) % b.size();
    std::vector<std::int64_t> out = inputs<std::int64_t>(s, b.rank(), 5), in(5);
    b.batch_p2p({{comm::P2POp::Kind::Send, view(out), next, it},
                 {comm::P2POp::Kind::Recv, view(in), prev, it}})
        ->wait();
    test::conformance::expect_equal(b, in, inputs<std::int64_t>(s, prev, 5), "ring");
  }
}

}  // namespace

TEST_CASE("two Worlds run concurrently without sharing state", "[comm][local]") {
  SECTION("two runs on separate threads") {
    std::string err_a, err_b;
    std::thread a([&] {
      try {
        comm::local::run(4, [](comm::Backend& b) { busy_rank(b, 1, 200); });
      } catch (const std::exception& e) {
        err_a = e.what();
      }
    });
    std::thread c([&] {
      try {
        comm::local::run(3, [](comm::Backend& b) { busy_rank(b, 2, 200); });
      } catch (const std::exception& e) {
        err_b = e.what();
      }
    });
    a.join();
    c.join();
    REQUIRE(err_a == "");
    REQUIRE(err_b == "");
  }
  SECTION("each thread holds a rank of both worlds and alternates between them") {
    comm::local::World wa(2, 10s), wb(2, 10s);
    std::string errs[2];
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        try {
          auto ba = wa.backend(r);
          auto bb = wb.backend(1 - r);  // the same thread is rank r in A and 1-r in B
          for (int it = 0; it < 100; ++it) {
            std::vector<std::int32_t> xa = {r + 1}, xb = {10 * (r + 1)};
            ba->all_reduce(view(xa), comm::ReduceOp::Sum)->wait();
            bb->all_reduce(view(xb), comm::ReduceOp::Max)->wait();
            if (xa[0] != 3 || xb[0] != 20) throw std::runtime_error("wrong result");
          }
        } catch (const std::exception& e) {
          errs[r] = e.what();
          wa.abort(e.what());
          wb.abort(e.what());
        }
      });
    }
    for (auto& t : threads) t.join();
    REQUIRE(errs[0] == "");
    REQUIRE(errs[1] == "");
  }
}

TEST_CASE("create() needs an in-process World of the right size", "[comm][local]") {
  comm::BackendOptions opts;
  opts.size = 2;
  SECTION("no rendezvous") {
    std::string msg;
    try {
      comm::local::create(opts);
    } catch (const InvalidArgument& e) {
      msg = e.what();
    }
    REQUIRE(missing_from(msg, "in-process World") == "");
    REQUIRE(missing_from(msg, "local::run") == "");
  }
  SECTION("a rendezvous of another kind") {
    struct Foreign : comm::Rendezvous {
      std::string describe() const override { return "env://somewhere:1234"; }
    };
    opts.rendezvous = std::make_shared<Foreign>();
    std::string msg;
    try {
      comm::local::create(opts);
    } catch (const InvalidArgument& e) {
      msg = e.what();
    }
    REQUIRE(missing_from(msg, "env://somewhere:1234") == "");
  }
  SECTION("a World of another size") {
    opts.rendezvous = std::make_shared<comm::local::World>(3);
    std::string msg;
    try {
      comm::local::create(opts);
    } catch (const InvalidArgument& e) {
      msg = e.what();
    }
    REQUIRE(missing_from(msg, "3 ranks") == "");
  }
  SECTION("a World: backends from create() talk to each other with the options' timeout") {
    auto world = std::make_shared<comm::local::World>(2);
    opts.rendezvous = world;
    opts.timeout = 1234ms;
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        comm::BackendOptions o = opts;
        o.rank = r;
        auto b = comm::local::create(o);
        std::vector<float> x = {1.5f};
        b->all_reduce(view(x), comm::ReduceOp::Sum)->wait();
        if (x[0] == 3.0f && b->timeout() == 1234ms && b->name() == "local") ++ok;
      });
    }
    for (auto& t : threads) t.join();
    REQUIRE(ok == 2);
  }
}

TEST_CASE("the built-in comm registry holds exactly the local backend", "[comm][registry]") {
  comm::Registry registry;
  register_builtin_backends(registry);
  REQUIRE(registry.names() == std::vector<std::string>{"local"});
  const auto caps = registry.capabilities("local");
  REQUIRE(caps.all_to_all);
  REQUIRE(caps.split);
  REQUIRE(caps.cuda_memory);  // device buffers staged through their DeviceMemory
  REQUIRE(caps.cuda_staged);
  REQUIRE(!caps.multi_process);

  std::string msg;
  try {
    registry.create("nope", comm::BackendOptions{});
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "'nope'") == "");
  REQUIRE(missing_from(msg, "available: local") == "");

  comm::BackendOptions opts;
  opts.rendezvous = std::make_shared<comm::local::World>(1);
  auto b = registry.create("local", opts);
  REQUIRE(b->name() == "local");
  REQUIRE(b->size() == 1);
}

TEST_CASE("same inputs give the same bits, reduced in rank order", "[comm][local]") {
  constexpr std::size_t kCount = 4099;
  auto once = [&] {
    std::vector<float> result;
    std::mutex mu;
    comm::local::run(4, [&](comm::Backend& b) {
      std::vector<float> x = inputs<float>(77, b.rank(), kCount);
      b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
      if (b.rank() == 2) {
        std::lock_guard lock(mu);
        result = x;
      }
    });
    return result;
  };
  const auto first = once();
  for (int i = 0; i < 3; ++i) {
    const auto again = once();
    REQUIRE(again.size() == first.size());
    REQUIRE(std::memcmp(again.data(), first.data(), first.size() * sizeof(float)) == 0);
  }
  // The order matters for these inputs (so the conformance suite's exact comparison can fail):
  // summing in reverse rank order changes some element.
  const auto forward =
      test::conformance::reference_reduce<float>(comm::ReduceOp::Sum, 77, 4, 0, kCount);
  REQUIRE(std::memcmp(forward.data(), first.data(), kCount * sizeof(float)) == 0);
  int differs = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    float rev = inputs<float>(77, 3, kCount)[i];
    for (int r = 2; r >= 0; --r) rev += test::conformance::input_value<float>(77, r, i);
    if (rev != forward[i]) ++differs;
    if (i > 64) break;  // a few dozen elements are enough to find a difference
  }
  REQUIRE(differs > 0);
}

TEST_CASE("a failing rank's root cause is rethrown, the others see who failed", "[comm][local]") {
  struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  std::mutex mu;
  std::vector<std::string> secondary;
  bool caught_boom = false;
  const auto t0 = Clock::now();
  try {
    comm::local::run(
        4,
        [&](comm::Backend& b) {
          if (b.rank() == 2) {
            std::this_thread::sleep_for(20ms);  // let the others block first
            throw Boom("boom");
          }
          try {
            std::vector<float> x(5);
            if (b.rank() == 3) {
              b.batch_p2p({{comm::P2POp::Kind::Recv, view(x), 2, 0}})->wait();
            } else {
              b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
            }
          } catch (const BackendError& e) {
            std::lock_guard lock(mu);
            secondary.push_back(detail::cat(e.code(), " ", e.what()));
            throw;
          }
        },
        10s);
  } catch (const Boom& e) {
    caught_boom = std::string(e.what()) == "boom";
  }
  REQUIRE(caught_boom);
  REQUIRE(ms_since(t0) < 2000);
  REQUIRE(secondary.size() == 3);
  for (const auto& m : secondary) {
    REQUIRE(missing_from(m, "125 local: rank ") == "");
    REQUIRE(missing_from(m, "aborted: rank 2 failed: boom") == "");
    REQUIRE(missing_from(m, m.find("rank 3") != std::string::npos ? "batch_p2p" : "all_reduce") ==
            "");
  }
}

// A collective's data moves in the last rank's post, into every rank's buffers: a rank that lets
// its Work go before completion (an exception unwinding it) must not leave a late peer to write
// into freed memory, nor wait for that peer. The group fails at once, naming the rank.
TEST_CASE("a Work destroyed before its collective completed fails the group instead of waiting", "[comm][local]") {
  std::string late_error;
  long long abandon_ms = -1, late_ms = -1;
  comm::local::run(
      2,
      [&](comm::Backend& b) {
        if (b.rank() == 0) {
          const auto t0 = Clock::now();
          {
            std::vector<float> x(1024, 1.0f);  // freed with the Work (ASan checks nobody writes it)
            comm::WorkPtr w = b.all_reduce(view(x), comm::ReduceOp::Sum);
          }
          abandon_ms = ms_since(t0);
          return;
        }
        std::this_thread::sleep_for(100ms);  // arrives after rank 0 gave up
        std::vector<float> x(1024, 2.0f);
        const auto t0 = Clock::now();
        try {
          b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
        } catch (const BackendError& e) {
          late_error = e.what();
        }
        late_ms = ms_since(t0);
      },
      10s);
  REQUIRE(abandon_ms >= 0);
  REQUIRE(abandon_ms < 1000);  // did not wait for the late rank
  REQUIRE(missing_from(late_error, "rank 0 abandoned all_reduce") == "");
  REQUIRE(late_ms < 1000);  // failed at once, not at the deadline
}

TEST_CASE("World::abort releases waiting ranks and fails later calls", "[comm][local]") {
  comm::local::World world(3, 10s);
  std::vector<std::string> errs(2);
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto b = world.backend(r);
      std::vector<double> x(3);
      try {
        b->all_reduce(view(x), comm::ReduceOp::Sum)->wait();  // rank 2 never comes
      } catch (const BackendError& e) {
        errs[static_cast<std::size_t>(r)] = e.what();
      }
      try {
        b->barrier();
        errs[static_cast<std::size_t>(r)] += " | barrier after abort did not throw";
      } catch (const BackendError&) {
      }
    });
  }
  std::this_thread::sleep_for(50ms);
  REQUIRE(!world.aborted());
  world.abort("stopped by the test");
  world.abort("a second reason is ignored");
  for (auto& t : threads) t.join();
  REQUIRE(world.aborted());
  REQUIRE(ms_since(t0) < 2000);
  REQUIRE(errs[0] == "local: rank 0: all_reduce aborted: stopped by the test");
  REQUIRE(errs[1] == "local: rank 1: all_reduce aborted: stopped by the test");
}

TEST_CASE("a rank arriving after a timeout fails fast and touches no freed buffer",
          "[comm][local]") {
  std::mutex mu;
  std::string late_msg;
  long long late_ms = -1;
  comm::local::run(
      3,
      [&](comm::Backend& b) {
        if (b.rank() == 2) {
          std::this_thread::sleep_for(300ms);
          std::vector<float> x(64, 1.0f);
          const auto t0 = Clock::now();
          try {
            b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
          } catch (const TimeoutError& e) {
            std::lock_guard lock(mu);
            late_msg = e.what();
            late_ms = ms_since(t0);
          }
          return;
        }
        {
          std::vector<float> x(64, 1.0f);  // freed right after the timeout (ASan checks it)
          try {
            b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
          } catch (const TimeoutError&) {
          }
        }
      },
      100ms);
  REQUIRE(missing_from(late_msg, "rank 2: all_reduce") == "");
  REQUIRE(missing_from(late_msg, "failed earlier") == "");
  REQUIRE(late_ms >= 0);
  REQUIRE(late_ms < 50);
}

TEST_CASE("bf16 and f16 reduce in f32 and copy their bits", "[comm][local]") {
  const std::string err = run_local(3, [](comm::Backend& b) {
    const int r = b.rank();
    // bf16 256 + 1 + 1: rounding after each addition gives 256 (257 is a tie, to even), summing
    // in f32 and rounding once gives 258.
    std::vector<std::uint16_t> h = {core::float_to_bf16(r == 0 ? 256.0f : 1.0f)};
    b.all_reduce({h.data(), 1, core::DType::BF16}, comm::ReduceOp::Sum)->wait();
    if (h[0] != core::float_to_bf16(258.0f))
      throw std::runtime_error("bf16 all_reduce of 256 + 1 + 1 is not 258");
    // f16 reduce_scatter, block q to rank q: 2048 + 1 + 1 = 2050 (not 2048), 1 + 1 + 1 = 3, and
    // 65504 + 65504 − 65504 = 65504 (the f32 partial 131008 does not overflow).
    const float blocks[3][3] = {{2048, 1, 1}, {1, 1, 1}, {65504, 65504, -65504}};
    std::vector<std::uint16_t> send(3), recv(1);
    for (int q = 0; q < 3; ++q) send[static_cast<std::size_t>(q)] = core::float_to_f16(blocks[q][r]);
    b.reduce_scatter({send.data(), 3, core::DType::F16}, {recv.data(), 1, core::DType::F16},
                     comm::ReduceOp::Sum)
        ->wait();
    const float want[3] = {2050, 3, 65504};
    if (recv[0] != core::float_to_f16(want[r]))
      throw std::runtime_error("f16 reduce_scatter: rank " + std::to_string(r) + " did not get " +
                               std::to_string(want[r]));
    std::vector<std::uint16_t> m = {core::float_to_f16(blocks[0][r])};
    b.all_reduce({m.data(), 1, core::DType::F16}, comm::ReduceOp::Max)->wait();
    if (m[0] != core::float_to_f16(2048.0f)) throw std::runtime_error("f16 max of 2048, 1, 1");
    // Copies move the bits: a signalling-NaN pattern survives a broadcast.
    std::vector<std::uint16_t> nan = {std::uint16_t(r == 0 ? 0x7f81 : 0)};
    b.broadcast({nan.data(), 1, core::DType::BF16}, 0)->wait();
    if (nan[0] != 0x7f81) throw std::runtime_error("bf16 broadcast changed the bits");
    // A device buffer that does not name its DeviceMemory cannot be staged: a clear error.
    comm::BufferView cuda{h.data(), 1, core::DType::F32, comm::MemorySpace::Cuda};
    try {
      b.broadcast(cuda, 0);
      throw std::runtime_error("broadcast of a cuda buffer without its DeviceMemory did not throw");
    } catch (const InvalidArgument& e) {
      if (!missing_from(e.what(), "without its DeviceMemory").empty())
        throw std::runtime_error(missing_from(e.what(), "without its DeviceMemory"));
    }
  });
  REQUIRE(err == "");
}

TEST_CASE("in-place all_gather and reduce_scatter", "[comm][local]") {
  const std::string err = run_local(3, [](comm::Backend& b) {
    const auto r = static_cast<std::size_t>(b.rank());
    std::vector<std::int32_t> g(6, -1);
    g[2 * r] = b.rank();
    g[2 * r + 1] = 10 * b.rank();
    b.all_gather({g.data() + 2 * r, 2, core::DType::I32}, view(g))->wait();
    if (g != std::vector<std::int32_t>{0, 0, 1, 10, 2, 20})
      throw std::runtime_error("in-place all_gather gave a wrong result");
    std::vector<std::int64_t> s = {1, 2, 3};
    for (auto& v : s) v *= b.rank() + 1;
    b.reduce_scatter(view(s), {s.data() + r, 1, core::DType::I64}, comm::ReduceOp::Sum)->wait();
    if (s[r] != static_cast<std::int64_t>(6 * (r + 1)))
      throw std::runtime_error("in-place reduce_scatter gave a wrong result");
  });
  REQUIRE(err == "");
}

TEST_CASE("split lists must agree among the members", "[comm][local]") {
  std::mutex mu;
  std::vector<std::string> msgs;
  comm::local::run(3, [&](comm::Backend& b) {
    const std::vector<int> mine = b.rank() == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 2};
    try {
      b.split(mine);
    } catch (const InvalidArgument& e) {
      std::lock_guard lock(mu);
      msgs.push_back(e.what());
    }
  });
  REQUIRE(msgs.size() == 3);
  for (const auto& m : msgs) {
    REQUIRE(missing_from(m, "split") == "");
    REQUIRE(missing_from(m, "{0, 1}") == "");
    REQUIRE(missing_from(m, "{1, 2}") == "");
  }
}

TEST_CASE("World and run() reject bad arguments", "[comm][local]") {
  bool threw = false;
  try {
    comm::local::World w(0);
  } catch (const InvalidArgument&) {
    threw = true;
  }
  REQUIRE(threw);
  threw = false;
  try {
    comm::local::run(0, [](comm::Backend&) {});
  } catch (const InvalidArgument&) {
    threw = true;
  }
  REQUIRE(threw);

  comm::local::World world(2);
  REQUIRE(missing_from(world.describe(), "2 ranks") == "");
  auto b0 = world.backend(0);
  std::string msg;
  try {
    world.backend(0);
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "already created") == "");
  msg.clear();
  try {
    world.backend(2);
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "outside this world of 2 ranks") == "");
  msg.clear();
  try {
    b0->split({0, 0});
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "listed twice") == "");
}

TEST_CASE("the conformance suite's own checks can fail", "[comm][local]") {
  // A wrong all_reduce result must surface as a failed check, not a pass.
  const auto target = test::conformance::ConformanceTarget{
      "local", [](int size, std::chrono::milliseconds timeout,
                  const test::conformance::RankFn& fn) { comm::local::run(size, fn, timeout); }};
  const std::string err = test::conformance::run_ranks(target, 2, [](comm::Backend& b) {
    std::vector<float> x = {1.0f};
    b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
    test::conformance::expect_equal(b, x, std::vector<float>{3.0f}, "deliberately wrong");
  });
  REQUIRE(missing_from(err, "check failed") == "");
  REQUIRE(missing_from(err, "deliberately wrong") == "");
}

TEST_CASE("the conformance suite's bf16/f16 checks can fail", "[comm][local]") {
  // Results wrong by one ulp, by a rounding per addition, or overflowing must fail the check.
  const auto target = test::conformance::ConformanceTarget{
      "local", [](int size, std::chrono::milliseconds timeout,
                  const test::conformance::RankFn& fn) { comm::local::run(size, fn, timeout); }};
  auto check = [&](core::DType dt, bool rank_order,
                   const std::function<void(std::vector<std::uint16_t>&)>& spoil) {
    return test::conformance::run_ranks(target, 4, [&](comm::Backend& b) {
      const std::size_t count = 64;
      std::vector<std::uint16_t> x = test::conformance::half_inputs(dt, 7, b.rank(), 0, count);
      b.all_reduce({x.data(), count, dt}, comm::ReduceOp::Sum)->wait();
      // The true result passes, both ways.
      test::conformance::expect_half_reduction(b, dt, comm::ReduceOp::Sum, x, 7, 4, 0, rank_order,
                                               "true");
      spoil(x);
      test::conformance::expect_half_reduction(b, dt, comm::ReduceOp::Sum, x, 7, 4, 0, rank_order,
                                               "spoiled");
    });
  };
  // One ulp off.
  const std::string ulp = check(core::DType::BF16, true, [](auto& x) { x[3] ^= 1; });
  REQUIRE(missing_from(ulp, "spoiled: element 3") == "");  // by the bound or by the rank-order bits
  // Summed in 16 bits, rounding after every addition: some elements leave the bound.
  const std::string per_add = check(core::DType::F16, false, [](auto& x) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      float acc = 0;
      for (int r = 0; r < 4; ++r)
        acc = core::f16_to_float(core::float_to_f16(
            acc +
            core::f16_to_float(test::conformance::half_inputs(core::DType::F16, 7, r, i, 1)[0])));
      x[i] = core::float_to_f16(acc);
    }
  });
  REQUIRE(missing_from(per_add, "spoiled: element") == "");
  REQUIRE(missing_from(per_add, "f32 accumulation of 4 terms") == "");
  // Inf where the sum is finite.
  const std::string inf = check(core::DType::F16, false, [](auto& x) { x[0] = 0x7c00; });
  REQUIRE(missing_from(inf, "spoiled: element 0") == "");
}

namespace tessera::test::conformance {
/// The local backend: ranks are threads of this process.
ConformanceTarget local_target() {
  return {"local",
          [](int size, std::chrono::milliseconds timeout, const RankFn& fn) {
            comm::local::run(size, fn, timeout);
          },
          /*rank_order_reductions=*/true};
}

}  // namespace tessera::test::conformance

TESSERA_COMM_CONFORMANCE(::tessera::test::conformance::local_target(), "local", "[local]")
