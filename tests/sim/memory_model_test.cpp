// The simulator's memory model against the runtime: a replay on meta tensors must book the same
// peak bytes per category as a real training step on in-process ranks (ConvNeXt and RegNet,
// sp = 1, 2, 4, checkpointing none and block; pipeline stages with micro-batches). Both figures
// are printed.
#include <cstdio>

#include <algorithm>
#include <cmath>
#include <utility>

#include "nn/train_harness.hpp"
#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/sim/replay.hpp"
#include "tessera/sim/stage_cut.hpp"

using namespace tessera;
using core::MemCategory;

namespace {

nn::TrainOptions small_run(const std::string& family, const std::string& checkpointing) {
  nn::TrainOptions o = simtest::small_run(family);
  o.checkpointing = checkpointing;
  return o;
}

double rel_diff(std::size_t a, std::size_t b) {
  if (a == b) return 0.0;
  return std::abs(double(a) - double(b)) / double(std::max(a, b));
}

// Wraps the CPU backend and splits the allocator's peaks into those reached outside kernel calls
// (what core books: the memory model's subject) and those reached inside them (the CPU kernels'
// own scratch, booked as Workspace and freed before the call returns; a GPU backend's scratch is
// another matter, so the replay does not model it). It restarts the allocator's peak tracking
// around every call and keeps the maxima itself.
class ScratchMeter final : public compute::Backend {
 public:
  ScratchMeter(compute::Backend& inner, core::AllocatorPtr alloc) : inner_(inner), alloc_(std::move(alloc)) {}
  std::string_view name() const noexcept override { return inner_.name(); }
  int num_threads() const noexcept override { return inner_.num_threads(); }
  void set_num_threads(int n) override { inner_.set_num_threads(n); }
  compute::Capabilities capabilities() const noexcept override { return inner_.capabilities(); }
  void execute(const compute::OpCall& call) override {
    fold(outside);
    alloc_->reset_peaks();
    inner_.execute(call);
    fold(inside);
    alloc_->reset_peaks();
  }
  void clear() { outside = inside = core::MemStats{}; }
  void fold(core::MemStats& m) const {
    const core::MemStats s = alloc_->stats();
    for (int c = 0; c < core::kNumMemCategories; ++c) m.peak[c] = std::max(m.peak[c], s.peak[c]);
    m.peak_total = std::max(m.peak_total, s.peak_total);
  }
  core::MemStats outside, inside;

 private:
  compute::Backend& inner_;
  core::AllocatorPtr alloc_;
};

// One real training step per rank on the local backend: per rank, the peaks outside kernel calls
// and the peak inside them.
std::vector<std::pair<core::MemStats, core::MemStats>> measure(const nn::TrainOptions& o, const core::DeviceMesh& mesh) {
  std::vector<std::pair<core::MemStats, core::MemStats>> out(mesh.size());
  auto ds = test::dataset_for(o);
  comm::local::run(mesh.size(), [&](comm::Backend& world) {
    comm::MeshComm mc(mesh, world);
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(world.rank()));
    compute::cpu::CpuBackend cpu(1);
    ScratchMeter meter(cpu, alloc);
    nn::Trainer t(o, &mc, meter, alloc, ds);
    meter.clear();
    t.step();
    meter.fold(meter.outside);
    out[world.rank()] = {meter.outside, meter.inside};
  });
  return out;
}

/// Prints rank r's peaks, runtime / replay, per category.
void print_rank(int r, const core::MemStats& m, const core::MemStats& s, const core::MemStats& scratch) {
  std::printf("  rank %d:", r);
  for (int c = 0; c < core::kNumMemCategories; ++c)
    std::printf(" %s %zu/%zu", std::string(core::mem_category_name(MemCategory(c))).c_str(), m.peak[c], s.peak[c]);
  std::printf(" total %zu/%zu; cpu kernel scratch peak (16-bit conversions included; not modelled) %zu\n",
              m.peak_total, s.peak_total, scratch.peak_of(MemCategory::Workspace));
}

}  // namespace

TEST_CASE("replayed peak memory per category equals the runtime's", "[sim][replay][memory]") {
  const std::string family = GENERATE(std::string("convnext"), std::string("regnet"));
  const std::string ckpt = GENERATE(std::string("none"), std::string("block"));
  const int P = GENERATE(1, 2, 4);
  const nn::TrainOptions o = small_run(family, ckpt);
  const core::DeviceMesh mesh({P}, {"sp"});
  const auto real = measure(o, mesh);
  const std::vector<sim::RankReplay> replay = sim::replay_all(o, mesh);
  REQUIRE(replay.size() == static_cast<std::size_t>(P));
  std::printf("memory model: %s 16-32-48-64 depths 1-1-2-1, 3x64x256, batch 2, ckpt=%s, sp=%d "
              "(peak bytes, runtime / replay)\n", family.c_str(), ckpt.c_str(), P);
  for (int r = 0; r < P; ++r) {
    const core::MemStats& m = real[r].first;
    const core::MemStats& s = replay[r].memory;
    print_rank(r, m, s, real[r].second);
    for (int c = 0; c < core::kNumMemCategories; ++c) {
      INFO(family << " ckpt=" << ckpt << " sp=" << P << " rank " << r << " "
                  << core::mem_category_name(MemCategory(c)) << ": runtime " << m.peak[c] << ", replay " << s.peak[c]);
      REQUIRE(rel_diff(m.peak[c], s.peak[c]) <= 0.02);
    }
    INFO("total: runtime " << m.peak_total << ", replay " << s.peak_total);
    REQUIRE(rel_diff(m.peak_total, s.peak_total) <= 0.02);
    REQUIRE(s.peak_of(MemCategory::Activation) > 0);
    if (P > 1) REQUIRE(s.peak_of(MemCategory::HaloBuffer) > 0);
  }
}

TEST_CASE("a replayed program has the runtime's kernels and transfers with dependencies", "[sim][replay]") {
  const nn::TrainOptions o = small_run("convnext", "none");
  const core::DeviceMesh mesh({2}, {"sp"});
  const sim::RankReplay r = sim::replay_rank(o, mesh, 1);
  REQUIRE(r.coords == std::vector<int>{1});
  int compute = 0, collectives = 0, p2p = 0;
  for (std::size_t i = 0; i < r.program.size(); ++i) {
    const sim::ProgramOp& op = r.program[i];
    for (int d : op.deps) REQUIRE((d >= 0 && d < static_cast<int>(i)));
    if (op.kind == sim::ProgramOp::Kind::Compute) {
      ++compute;
      REQUIRE(op.bytes > 0);
    } else if (op.kind == sim::ProgramOp::Kind::Collective) {
      ++collectives;
      REQUIRE(op.group == std::vector<int>{0, 1});
    } else {
      ++p2p;
      for (const sim::P2PTransfer& t : op.transfers) REQUIRE(t.peer == 0);  // rank 1's only neighbour
    }
  }
  REQUIRE(compute > 50);
  REQUIRE(collectives >= 2);  // loss and at least one gradient bucket
  REQUIRE(p2p > 0);
  // The first op is a kernel without dependencies; the optimizer's first kernel waits for the
  // gradient all-reduces.
  REQUIRE(r.program.front().deps.empty());
  bool optimizer_waits = false;
  for (const sim::ProgramOp& op : r.program)
    if (op.layer == "optimizer" && op.kind == sim::ProgramOp::Kind::Compute) {
      for (int d : op.deps)
        if (r.program[d].kind == sim::ProgramOp::Kind::Collective && r.program[d].layer == "grad_bucket")
          optimizer_waits = true;
      break;
    }
  REQUIRE(optimizer_waits);
  // Deterministic: a second replay gives the same program.
  const sim::RankReplay again = sim::replay_rank(o, mesh, 1);
  REQUIRE(again.program.size() == r.program.size());
  for (std::size_t i = 0; i < r.program.size(); ++i) {
    REQUIRE(again.program[i].name == r.program[i].name);
    REQUIRE(again.program[i].deps == r.program[i].deps);
  }
}

TEST_CASE("in bf16 and fp16 the replayed peak memory per category equals the runtime's", "[sim][replay][memory]") {
  const std::string family = GENERATE(std::string("convnext"), std::string("regnet"));
  const nn::Precision precision = GENERATE(nn::Precision::BF16, nn::Precision::FP16);
  const int P = GENERATE(1, 2);
  nn::TrainOptions o = small_run(family, "none");
  o.precision = precision;
  const core::DeviceMesh mesh({P}, {"sp"});
  const auto real = measure(o, mesh);
  const std::vector<sim::RankReplay> replay = sim::replay_all(o, mesh);
  REQUIRE(replay.size() == static_cast<std::size_t>(P));
  std::printf("memory model, %s: %s, sp=%d (peak bytes, runtime / replay)\n",
              std::string(nn::precision_name(precision)).c_str(), family.c_str(), P);
  for (int r = 0; r < P; ++r) {
    const core::MemStats& m = real[r].first;
    const core::MemStats& s = replay[r].memory;
    print_rank(r, m, s, real[r].second);
    for (int c = 0; c < core::kNumMemCategories; ++c) {
      INFO(family << " sp=" << P << " rank " << r << " " << core::mem_category_name(MemCategory(c)) << ": runtime "
                  << m.peak[c] << ", replay " << s.peak[c]);
      REQUIRE(m.peak[c] == s.peak[c]);  // to the byte
    }
    REQUIRE(m.peak_total == s.peak_total);
  }
}

TEST_CASE("with top-k compression the replay books the residuals and sends the runtime's pairs",
          "[sim][replay][memory][topk]") {
  const nn::TrainOptions dense = small_run("convnext", "none");
  nn::TrainOptions o = dense;
  o.grad_compression = nn::GradCompression::TopK;
  o.topk_ratio = 0.01;
  const core::DeviceMesh mesh({2}, {"sp"});
  const auto real = measure(o, mesh);
  const std::vector<sim::RankReplay> replay = sim::replay_all(o, mesh);
  const std::vector<sim::RankReplay> replay_dense = sim::replay_all(dense, mesh);
  std::printf("memory model, top-k 0.01: convnext, sp=2 (peak bytes, runtime / replay)\n");
  for (int r = 0; r < 2; ++r) {
    const core::MemStats& m = real[r].first;
    const core::MemStats& s = replay[r].memory;
    const core::MemStats& d = replay_dense[r].memory;
    print_rank(r, m, s, real[r].second);
    for (int c = 0; c < core::kNumMemCategories; ++c) {
      INFO("rank " << r << " " << core::mem_category_name(MemCategory(c)) << ": runtime " << m.peak[c] << ", replay "
                   << s.peak[c]);
      REQUIRE(rel_diff(m.peak[c], s.peak[c]) <= 0.02);
    }
    // Every gradient bucket travels as one all_gather of 2 ranks x k (int32, f32) pairs, with k
    // from the dense run's all-reduce of the same bucket.
    std::vector<std::int64_t> dense_buckets, topk_bytes;
    std::size_t residual = 0;
    for (const sim::ProgramOp& op : replay_dense[r].program)
      if (op.kind == sim::ProgramOp::Kind::Collective && op.layer == "grad_bucket") {
        dense_buckets.push_back(op.bytes);
        residual += static_cast<std::size_t>(op.bytes);
      }
    // The residual: one f32 per element of the reduced buckets, kept as optimizer state beside
    // AdamW's two moments; the dense run's peak plus it is a floor of this one's.
    INFO("rank " << r << ": optimizer state " << s.current_of(MemCategory::OptimizerState) << " vs dense "
                 << d.current_of(MemCategory::OptimizerState) << ", reduced buckets " << residual);
    REQUIRE(residual > 0);
    REQUIRE(s.current_of(MemCategory::OptimizerState) == d.current_of(MemCategory::OptimizerState) + residual);
    REQUIRE(s.peak_total >= d.peak_total + residual);
    for (const sim::ProgramOp& op : replay[r].program)
      if (op.kind == sim::ProgramOp::Kind::Collective && op.layer == "grad_bucket") {
        REQUIRE(op.name == "all_gather");
        topk_bytes.push_back(op.bytes);
      }
    REQUIRE(topk_bytes.size() == dense_buckets.size());
    REQUIRE_FALSE(topk_bytes.empty());
    for (std::size_t b = 0; b < topk_bytes.size(); ++b)
      REQUIRE(topk_bytes[b] == 2 * nn::topk_count(dense_buckets[b] / 4, 0.01) * 8);
  }
}

TEST_CASE("with pipeline stages the replayed peak memory of each stage equals the runtime's",
          "[sim][replay][memory][pipeline]") {
  const std::string mesh_text = GENERATE(std::string("pp=2"), std::string("dp=1,pp=2,sp=2"));
  const int m = GENERATE(1, 3);
  nn::TrainOptions o = small_run("convnext", "none");
  o.batch = m == 1 ? 2 : 3;
  o.micro_batches = m;
  const core::DeviceMesh mesh = core::DeviceMesh::parse(mesh_text);
  o.stage_starts = sim::balanced_stage_starts(o, mesh, sim::DeviceCatalog().get("a100-80gb"));
  const auto real = measure(o, mesh);
  const std::vector<sim::RankReplay> replay = sim::replay_all(o, mesh);
  std::printf(
      "memory model, pipeline: convnext, %s, M=%d, stages start at unit %d (peak bytes, "
      "runtime / replay)\n",
      mesh_text.c_str(), m, o.stage_starts.at(0));
  for (int r = 0; r < mesh.size(); ++r) {
    const core::MemStats& rt = real[r].first;
    const core::MemStats& s = replay[r].memory;
    print_rank(r, rt, s, real[r].second);
    for (int c = 0; c < core::kNumMemCategories; ++c) {
      INFO(mesh_text << " M=" << m << " rank " << r << " "
                     << core::mem_category_name(MemCategory(c)) << ": runtime " << rt.peak[c]
                     << ", replay " << s.peak[c]);
      REQUIRE(rt.peak[c] == s.peak[c]);  // to the byte
    }
    REQUIRE(rt.peak_total == s.peak_total);
    REQUIRE(s.peak_of(MemCategory::Activation) > 0);
  }
}
