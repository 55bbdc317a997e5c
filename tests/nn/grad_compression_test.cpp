// Top-k gradient compression with error feedback: the compressor against a naive reference on
// integer-valued gradients (exact), the error-feedback invariant, and the trainer with it: ratio 1
// is the dense run bit for bit, the invariant holds through the trainer in float64, skipped fp16
// steps leave the residuals alone, the bytes it reports, and clear errors for bad options.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "nn/train_models.hpp"
#include "support/catch.hpp"
#include "support/reference/ops_ref.hpp"
#include "train_harness.hpp"
#include "tessera/nn/grad_compression.hpp"

using namespace tessera;

namespace {

/// A gradient entry of rank `rank` at step `step` in bucket `n`: a small integer in [-8, 8],
/// many repeated (ties), from a fixed hash so every run sees the same values.
float int_grad(int rank, int step, std::int64_t i, std::int64_t n) {
  std::uint64_t h = 1469598103934665603ull ^ (std::uint64_t(rank) * 7919 + std::uint64_t(step) * 104729 +
                                              std::uint64_t(i) * 15485863 + std::uint64_t(n) * 32452843);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return float(int(h % 17) - 8);
}

std::vector<float> floats(const core::Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

/// One training step of `o` on the two ranks of `mesh` over `ds`: each rank's figures.
/// `on_rank0` sees rank 0's trainer after its step.
std::vector<nn::StepStats> step_two_ranks(const nn::TrainOptions& o, const core::DeviceMesh& mesh,
                                          const std::shared_ptr<const data::Dataset>& ds,
                                          const std::function<void(nn::Trainer&)>& on_rank0 = {}) {
  std::vector<nn::StepStats> stats(2);
  comm::local::run(2, [&](comm::Backend& world) {
    comm::MeshComm mc(mesh, world);
    compute::cpu::CpuBackend cpu(1);
    auto alloc = std::make_shared<core::Allocator>("rank");
    nn::Trainer tr(o, &mc, cpu, alloc, ds);
    stats[world.rank()] = tr.step();  // each rank writes its own element
    if (world.rank() == 0 && on_rank0) on_rank0(tr);
  });
  return stats;
}

}  // namespace

TEST_CASE("topk_count keeps ceil of ratio times n and at least one", "[nn][topk]") {
  REQUIRE(nn::topk_count(100, 0.01) == 1);
  REQUIRE(nn::topk_count(101, 0.01) == 2);
  REQUIRE(nn::topk_count(7, 0.1) == 1);
  REQUIRE(nn::topk_count(1, 0.001) == 1);
  REQUIRE(nn::topk_count(13, 1.0) == 13);
  REQUIRE(nn::topk_count(0, 0.5) == 0);
  for (double bad : {0.0, -0.1, 1.5, std::nan("")}) REQUIRE_THROWS_AS(nn::topk_count(10, bad), InvalidArgument);
  REQUIRE(nn::parse_grad_compression("topk") == nn::GradCompression::TopK);
  REQUIRE(nn::parse_grad_compression("none") == nn::GradCompression::None);
  REQUIRE_FALSE(nn::parse_grad_compression("top-k"));
}

TEST_CASE("top-k with error feedback matches the naive reference and loses nothing (integer data)",
          "[nn][topk]") {
  const int P = GENERATE(2, 3);
  const double ratio = GENERATE(0.1, 0.3);
  const std::vector<std::int64_t> sizes = {1, 7, 13, 100};  // uneven buckets, one of a single element
  const int steps = 6;
  // The reference, per bucket: each rank's residual in float64 and the applied sums.
  std::mutex mu;
  std::vector<std::vector<std::vector<float>>> applied(P);  // [rank][bucket] Σ over steps
  std::vector<std::vector<std::vector<float>>> residual(P);
  std::vector<std::vector<std::vector<std::vector<float>>>> reduced(P);  // [rank][step][bucket]
  comm::local::run(P, [&](comm::Backend& world) {
    const int rank = world.rank();
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(rank));
    compute::cpu::CpuBackend cpu(1);
    std::vector<std::unique_ptr<nn::TopKCompressor>> cs;
    std::vector<core::Tensor> buckets;
    for (std::int64_t n : sizes) {
      cs.push_back(std::make_unique<nn::TopKCompressor>(cpu, n, core::DType::F32, ratio, P, alloc));
      buckets.push_back(core::Tensor::zeros({n}, core::DType::F32, core::MemCategory::Gradient, alloc));
    }
    std::vector<std::vector<float>> sum(sizes.size());
    std::vector<std::vector<std::vector<float>>> per_step;
    for (int s = 0; s < steps; ++s) {
      std::vector<comm::WorkPtr> works;
      for (std::size_t b = 0; b < sizes.size(); ++b) {
        float* g = buckets[b].data<float>();
        for (std::int64_t i = 0; i < sizes[b]; ++i) g[i] = int_grad(rank, s, i, sizes[b]);
        works.push_back(cs[b]->post(world, buckets[b], 1.0));  // all posted before any wait
      }
      per_step.emplace_back();
      for (std::size_t b = 0; b < sizes.size(); ++b) {
        works[b]->wait();
        cs[b]->finish(buckets[b]);
        cs[b]->commit();
        per_step.back().push_back(floats(buckets[b]));
        sum[b].resize(sizes[b]);
        for (std::int64_t i = 0; i < sizes[b]; ++i) sum[b][i] += buckets[b].data<float>()[i];
      }
    }
    std::vector<std::vector<float>> res;
    for (auto& c : cs) res.push_back(floats(c->residual()));
    std::lock_guard<std::mutex> lock(mu);
    applied[rank] = sum;
    residual[rank] = res;
    reduced[rank] = per_step;
  });
  // Every rank holds the same reduced buckets, bit for bit.
  for (int q = 1; q < P; ++q) REQUIRE(reduced[q] == reduced[0]);
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    const std::int64_t n = sizes[b], k = nn::topk_count(n, ratio);
    std::vector<std::vector<double>> r(P, std::vector<double>(n, 0.0));
    std::vector<double> total(n, 0.0);  // Σ over ranks and steps of the uncompressed gradients
    for (int s = 0; s < steps; ++s) {
      std::vector<double> want(n, 0.0);
      for (int q = 0; q < P; ++q) {
        std::vector<double> acc(n);
        for (std::int64_t i = 0; i < n; ++i) {
          const double g = int_grad(q, s, i, n);
          acc[i] = g + r[q][i];
          total[i] += g;
        }
        for (std::int64_t i : test::ref::topk_indices(acc, k)) want[i] += acc[i], acc[i] = 0;
        r[q] = acc;
      }
      INFO("P=" << P << " ratio " << ratio << " bucket of " << n << " step " << s);
      for (std::int64_t i = 0; i < n; ++i) REQUIRE(double(reduced[0][s][b][i]) == want[i]);
    }
    for (int q = 0; q < P; ++q)
      for (std::int64_t i = 0; i < n; ++i) REQUIRE(double(residual[q][b][i]) == r[q][i]);
    // The invariant: Σ applied + Σ_ranks residual == Σ gradients, exactly for small integers.
    for (std::int64_t i = 0; i < n; ++i) {
      double got = applied[0][b][i];
      for (int q = 0; q < P; ++q) got += residual[q][b][i];
      INFO("P=" << P << " ratio " << ratio << " bucket of " << n << " element " << i);
      REQUIRE(got == total[i]);
    }
  }
}

TEST_CASE("top-k sends a non-finite entry first and a discarded post leaves the residual", "[nn][topk]") {
  // What each rank saw, checked on the test's thread (Catch2 v2 assertions are not thread-safe).
  struct Seen {
    std::vector<float> res1, g1, res2, g3, res3;
    bool nan1 = false, nan3 = false;
  };
  std::vector<Seen> seen(2);
  comm::local::run(2, [&](comm::Backend& world) {
    Seen& out = seen[world.rank()];
    auto alloc = std::make_shared<core::Allocator>("rank");
    compute::cpu::CpuBackend cpu(1);
    nn::TopKCompressor c(cpu, 5, core::DType::F32, 0.2, 2, alloc);  // k = 1
    core::Tensor g = core::Tensor::zeros({5}, core::DType::F32, core::MemCategory::Gradient, alloc);
    float* p = g.data<float>();
    for (int i = 0; i < 5; ++i) p[i] = float(i + 1);
    c.post(world, g, 1.0)->wait();
    c.finish(g);
    c.commit();
    out.res1 = floats(c.residual());
    out.g1 = floats(g);
    for (int i = 0; i < 5; ++i) p[i] = 1;
    p[world.rank() == 0 ? 1 : 3] = std::nanf("");  // a NaN is "largest": it travels, the step is seen to overflow
    c.post(world, g, 1.0)->wait();
    c.finish(g);
    out.nan1 = std::isnan(g.data<float>()[1]);
    out.nan3 = std::isnan(g.data<float>()[3]);
    c.discard();  // the trainer skips the step: the residual is the one before it
    out.res2 = floats(c.residual());
    // Under a loss scale the residual is kept in the loss's units.
    for (int i = 0; i < 5; ++i) p[i] = 0;
    c.post(world, g, 4.0)->wait();  // acc = 4 * residual = 4, 8, 12, 16, 0: 16 is sent
    c.finish(g);
    c.commit();
    out.g3 = floats(g);
    out.res3 = floats(c.residual());
  });
  for (const Seen& s : seen) {
    REQUIRE(s.res1 == std::vector<float>{1, 2, 3, 4, 0});  // 5 was sent
    REQUIRE(s.g1 == std::vector<float>{0, 0, 0, 0, 10});   // both ranks sent 5
    REQUIRE(s.nan1);
    REQUIRE(s.nan3);
    REQUIRE(s.res2 == std::vector<float>{1, 2, 3, 4, 0});
    REQUIRE(s.g3 == std::vector<float>{0, 0, 0, 32, 0});
    REQUIRE(s.res3 == std::vector<float>{1, 2, 3, 0, 0});
  }
}

TEST_CASE("trainer: top-k at ratio 1 equals the dense run bit for bit", "[nn][train][topk]") {
  nn::TrainOptions o = test::options(test::small_convnext(), "adamw");
  o.steps = 3;
  o.bucket_bytes = 3000;  // several uneven buckets
  nn::TrainOptions t = o;
  t.grad_compression = nn::GradCompression::TopK;
  t.topk_ratio = 1.0;
  for (const char* mesh : {"sp=2", "dp=2,sp=2"}) {
    const test::TrainRun dense = test::train(o, core::DeviceMesh::parse(mesh));
    const test::TrainRun topk = test::train(t, core::DeviceMesh::parse(mesh));
    INFO(mesh);
    REQUIRE(topk.replicas_agree);
    // The scatter-add sums 0 + v0 + v1 + ... in group-rank order, the local backend's all-reduce
    // v0 + v1 + ... in the same order: the same roundings, so the same bits (a -0 may become +0).
    REQUIRE(topk.losses == dense.losses);
    REQUIRE(topk.params == dense.params);
  }
}

TEST_CASE("trainer: applied updates plus residuals equal the uncompressed gradients (float64)",
          "[nn][train][topk]") {
  // lr 0 keeps the parameters, so every step's dense gradient is that of the same parameters the
  // compressed run sees; the reduced gradients a step leaves in the buckets are what it applies.
  const int P = GENERATE(2, 3);
  nn::TrainOptions o = test::options(test::small_convnext(), "sgd");
  o.dtype = core::DType::F64;
  o.optimizer.lr = 0;
  o.steps = 4;
  o.bucket_bytes = 5000;  // uneven buckets
  nn::TrainOptions t = o;
  t.grad_compression = nn::GradCompression::TopK;
  t.topk_ratio = 0.05;
  const core::DeviceMesh mesh = core::DeviceMesh::parse("sp=" + std::to_string(P));
  // Per parameter: Σ over steps of the reduced gradients (rank 0), and each rank's final residual.
  std::vector<std::vector<double>> dense_sum, topk_sum;
  std::vector<std::vector<std::vector<double>>> residuals(P);
  std::mutex mu;
  auto add_grads = [&](std::vector<std::vector<double>>& into, nn::Trainer& tr) {
    if (into.empty()) into.resize(tr.parameters().size());
    for (std::size_t i = 0; i < tr.parameters().size(); ++i) {
      const std::vector<double> g = test::to_doubles(tr.parameters()[i]->grad);
      into[i].resize(g.size());
      for (std::size_t j = 0; j < g.size(); ++j) into[i][j] += g[j];
    }
  };
  auto run = [&](const nn::TrainOptions& opt, std::vector<std::vector<double>>& sums, bool keep_residuals) {
    auto ds = test::dataset_for(opt);
    comm::local::run(P, [&](comm::Backend& world) {
      comm::MeshComm mc(mesh, world);
      compute::cpu::CpuBackend cpu(1);
      auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(world.rank()));
      nn::Trainer tr(opt, &mc, cpu, alloc, ds);
      std::vector<std::vector<double>> mine;
      while (tr.next_step() < opt.steps) {
        tr.step();
        add_grads(mine, tr);
      }
      std::lock_guard<std::mutex> lock(mu);
      if (world.rank() == 0) sums = mine;
      if (keep_residuals)
        for (const core::Tensor& r : tr.grad_residuals())  // undefined: a gradient that is not reduced
          residuals[world.rank()].push_back(r.defined() ? test::to_doubles(r) : std::vector<double>{});
    });
  };
  run(o, dense_sum, false);
  run(t, topk_sum, true);
  for (int q = 0; q < P; ++q) REQUIRE(residuals[q].size() == dense_sum.size());
  // float64: each element takes at most steps·(P + 2) roundings of 2^-53 relative to the largest
  // magnitude involved; 1e-9 of the largest dense entry is far above that, and far below one
  // gradient entry lost or counted twice.
  double largest = 0, lost_or_kept = 0;
  for (auto& v : dense_sum)
    for (double x : v) largest = std::max(largest, std::abs(x));
  const double tol = 1e-9 * largest;
  for (std::size_t i = 0; i < dense_sum.size(); ++i)
    for (std::size_t j = 0; j < dense_sum[i].size(); ++j) {
      double got = topk_sum[i][j];
      for (int q = 0; q < P; ++q) {
        if (residuals[q][i].empty()) continue;  // not reduced, so not compressed: got is the dense gradient
        REQUIRE(residuals[q][i].size() == dense_sum[i].size());
        got += residuals[q][i][j];
      }
      lost_or_kept = std::max(lost_or_kept, std::abs(topk_sum[i][j] - dense_sum[i][j]));
      INFO("sp=" << P << " parameter " << i << " element " << j << ": applied + residuals " << got << ", dense "
                 << dense_sum[i][j] << ", tolerance " << tol);
      REQUIRE(std::abs(got - dense_sum[i][j]) <= tol);
    }
  // The compressed run did hold entries back (the check above is not vacuous).
  REQUIRE(lost_or_kept > 1e-3 * largest);
}

TEST_CASE("trainer: a skipped fp16 step leaves the top-k residuals as they were", "[nn][train][topk][precision]") {
  nn::TrainOptions o = test::options(test::small_convnext(), "adamw");
  o.precision = nn::Precision::FP16;
  o.grad_compression = nn::GradCompression::TopK;
  o.topk_ratio = 0.1;
  o.steps = 2;
  o.loss_scale.init = std::ldexp(1.0, 40);  // every step overflows
  bool all_zero = true, all_skipped = true;
  std::size_t residuals = 0;
  std::mutex mu;
  const test::TrainRun r = test::train(o, core::DeviceMesh::parse("sp=2"), {}, [&](nn::Trainer& tr) {
    std::lock_guard<std::mutex> lock(mu);
    for (const core::Tensor& res : tr.grad_residuals()) {
      if (!res.defined()) continue;  // a gradient that is not reduced (replicated input): not compressed
      ++residuals;
      for (double x : test::to_doubles(res)) all_zero = all_zero && x == 0;
    }
  });
  REQUIRE(residuals > 0);
  for (bool s : r.skipped) all_skipped = all_skipped && s;
  REQUIRE(all_skipped);
  REQUIRE(all_zero);
  // One clean step afterwards (a normal scale) does fill them: the check above can fail.
  o.loss_scale.init = 1024;
  o.steps = 1;
  bool any_nonzero = false;
  test::train(o, core::DeviceMesh::parse("sp=2"), {}, [&](nn::Trainer& tr) {
    std::lock_guard<std::mutex> lock(mu);
    for (const core::Tensor& res : tr.grad_residuals())
      if (res.defined())
        for (double x : test::to_doubles(res)) any_nonzero = any_nonzero || (x != 0 && std::isfinite(x));
  });
  REQUIRE(any_nonzero);
}

TEST_CASE("trainer: top-k reports the bytes it sends and the dense bytes", "[nn][train][topk]") {
  nn::TrainOptions o = test::options(test::small_convnext(), "adamw");
  o.steps = 1;
  o.bucket_bytes = std::size_t(1) << 30;  // one bucket
  o.grad_compression = nn::GradCompression::TopK;
  o.topk_ratio = 0.01;
  std::int64_t params = 0;
  auto ds = test::dataset_for(o);
  const core::DeviceMesh mesh = core::DeviceMesh::parse("sp=2");
  std::vector<nn::StepStats> stats = step_two_ranks(o, mesh, ds, [&](nn::Trainer& tr) {
    // the reduced gradients' elements (those with a residual)
    for (const core::Tensor& r : tr.grad_residuals()) params += r.defined() ? r.numel() : 0;
  });
  const std::int64_t k = nn::topk_count(params, 0.01);
  REQUIRE(params > 0);
  std::printf("top-k 0.01, %lld reduced parameters in one bucket over sp=2: %lld bytes received, dense all-reduce "
              "buffer %lld bytes (%.1fx)\n", (long long)params, (long long)stats[0].grad_comm_bytes,
              (long long)stats[0].grad_dense_bytes, double(stats[0].grad_dense_bytes) / double(stats[0].grad_comm_bytes));
  for (const nn::StepStats& s : stats) {
    REQUIRE(s.grad_dense_bytes == params * 4);
    REQUIRE(s.grad_comm_bytes == 2 * k * 8);  // 2 ranks x k pairs of int32 index + f32 value
  }
  // The dense run reports what it reduces.
  o.grad_compression = nn::GradCompression::None;
  stats = step_two_ranks(o, mesh, ds);
  for (const nn::StepStats& s : stats) {
    REQUIRE(s.grad_comm_bytes == params * 4);
    REQUIRE(s.grad_dense_bytes == params * 4);
  }
}

TEST_CASE("trainer: bad top-k options are refused with the option and the fix", "[nn][topk]") {
  nn::TrainOptions o = test::options(test::small_convnext(), "adamw");
  o.grad_compression = nn::GradCompression::TopK;
  auto error_of = [&](const nn::TrainOptions& opt) {
    std::string what;
    comm::local::run(2, [&](comm::Backend& world) {
      comm::MeshComm mc(core::DeviceMesh::parse("sp=2"), world);
      compute::cpu::CpuBackend cpu(1);
      try {
        nn::Trainer tr(opt, &mc, cpu, std::make_shared<core::Allocator>("rank"), test::dataset_for(opt));
      } catch (const InvalidArgument& e) {
        if (world.rank() == 0) what = e.what();
      }
    });
    return what;
  };
  for (double bad : {0.0, -0.5, 1.01}) {
    o.topk_ratio = bad;
    const std::string e = error_of(o);
    INFO(e);
    REQUIRE(e.find("topk_ratio") != std::string::npos);
    REQUIRE(e.find("0 < ratio <= 1") != std::string::npos);
  }
  o.topk_ratio = 0.01;
  o.grad_reduce = nn::Precision::BF16;
  const std::string e = error_of(o);
  INFO(e);
  REQUIRE(e.find("not both") != std::string::npos);
}

TEST_CASE("top-k training still learns the synthetic task", "[nn][train][topk][long]") {
  nn::TrainOptions o = test::learnability_options(100);
  o.grad_compression = nn::GradCompression::TopK;
  o.topk_ratio = 0.1;
  const test::TrainRun r = test::train(o, core::DeviceMesh::parse("sp=2"));
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += r.losses[i] / 5;
  for (int i = 90; i < 100; ++i) last += r.losses[i] / 10;
  std::printf("top-k 0.1 learnability: mean loss of steps 1-5 %.3f, of steps 91-100 %.3f\n", first, last);
  REQUIRE(r.replicas_agree);
  REQUIRE(first > 1.2);
  REQUIRE(last < 0.5 * first);
}

TEST_CASE("trainer: a top-k run resumes from a checkpoint bit for bit (every rank's residual)",
          "[nn][train][topk][checkpoint]") {
  const std::string mesh = GENERATE(std::string("sp=2"), std::string("dp=2,sp=2"));
  INFO(mesh);
  nn::TrainOptions o = test::options(test::small_convnext(), "adamw");
  o.steps = 4;
  o.grad_compression = nn::GradCompression::TopK;
  o.topk_ratio = 0.05;
  const std::string path = (std::filesystem::temp_directory_path() / "tessera_test_topk_resume.ckpt").string();
  const test::TrainRun full = test::train(o, core::DeviceMesh::parse(mesh));
  nn::TrainOptions first = o;
  first.steps = 2;
  test::train(first, core::DeviceMesh::parse(mesh), {}, [&](nn::Trainer& t) { t.save(path); });
  const test::TrainRun b = test::train(o, core::DeviceMesh::parse(mesh), [&](nn::Trainer& t) { t.load(path); });
  REQUIRE(b.losses.size() == 2);
  for (int i = 0; i < 2; ++i) REQUIRE(b.losses[i] == full.losses[2 + i]);
  REQUIRE(b.params == full.params);
  // A dense run refuses the checkpoint, naming the compression.
  nn::TrainOptions dense = o;
  dense.grad_compression = nn::GradCompression::None;
  std::string error;
  try {  // local::run rethrows the first rank's error after every rank has joined
    test::train(dense, core::DeviceMesh::parse(mesh), [&](nn::Trainer& t) { t.load(path); });
  } catch (const InvalidArgument& e) {
    error = e.what();
  }
  std::filesystem::remove(path);
  INFO(error);
  REQUIRE(error.find("gradient compression topk") != std::string::npos);
}
