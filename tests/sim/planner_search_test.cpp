// The planner's branch and bound against the exhaustive search: the same best plan (config and
// iteration time) over small models, topologies, batch sizes, precisions, compressions and memory
// caps (one where the fastest configuration does not fit); lower bounds never above the engine's
// time; the same result on 1 and 2 threads; progress counts that add up; a cancel from the
// progress callback.
#include <algorithm>
#include <atomic>
#include <cstdio>

#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/sim/planner.hpp"

using namespace tessera;

namespace {

struct Space {
  const char* family;
  const char* topology;
  int devices;
  int batch;
};

sim::PlanOptions options_for(const Space& s) {
  sim::PlanOptions o;
  o.train = simtest::small_run(s.family);
  o.train.batch = s.batch;
  o.devices = s.devices;
  o.checkpointing = {"none", "block"};
  return o;
}

sim::PlanResult run(sim::PlanOptions o, const sim::Topology& t, bool exhaustive, int threads) {
  o.exhaustive = exhaustive;
  o.threads = threads;
  return sim::plan(o, t, sim::DeviceCatalog{});
}

std::string key(const sim::PlanConfig& c) {
  return c.mesh + " " + c.shard + " " + c.checkpointing + " " + c.precision + " " + c.compression +
         " M=" + std::to_string(c.micro_batches);
}

const sim::PlanEntry* find(const sim::PlanResult& r, const sim::PlanConfig& c) {
  for (const sim::PlanEntry& e : r.entries)
    if (key(e.config) == key(c)) return &e;
  return nullptr;
}

// The exhaustive plan's entries are all simulated, each at or above its bound; the branch and
// bound's list the same candidates, the simulated ones with the same figures, the pruned ones
// with bounds under the engine's time; the best plan is the same; the counts add up.
void require_same_best(const sim::PlanResult& all, const sim::PlanResult& bb) {
  for (const sim::PlanEntry& e : all.entries) {
    INFO(key(e.config));
    REQUIRE(e.simulated);
    REQUIRE(e.lower_bound_s > 0);
    REQUIRE(e.lower_bound_s <= e.iteration_s);
  }
  REQUIRE(bb.entries.size() == all.entries.size());
  REQUIRE(bb.skipped.size() == all.skipped.size());
  int simulated = 0;
  for (const sim::PlanEntry& e : bb.entries) {
    INFO(key(e.config));
    const sim::PlanEntry* x = find(all, e.config);
    REQUIRE(x != nullptr);
    REQUIRE(e.lower_bound_s <= x->iteration_s);
    REQUIRE(e.peak_bytes <= x->peak_bytes);
    if (e.memory_exact) REQUIRE(e.peak_bytes == x->peak_bytes);
    if (e.memory_exact) REQUIRE(e.fits == x->fits);
    if (!e.simulated) continue;
    ++simulated;
    REQUIRE(e.iteration_s == x->iteration_s);
    REQUIRE(e.compute_busy_s == x->compute_busy_s);
    REQUIRE(e.lower_bound_s == x->lower_bound_s);
  }
  REQUIRE((all.best_fit() >= 0) == (bb.best_fit() >= 0));
  if (all.best_fit() >= 0) {
    const sim::PlanEntry& a = all.entries[static_cast<std::size_t>(all.best_fit())];
    const sim::PlanEntry& b = bb.entries[static_cast<std::size_t>(bb.best_fit())];
    REQUIRE(key(a.config) == key(b.config));
    REQUIRE(a.iteration_s == b.iteration_s);
  }
  const sim::PlanProgress& p = bb.progress;
  REQUIRE_FALSE(bb.cancelled);
  REQUIRE(p.total == all.progress.total);
  REQUIRE(p.done == p.total);
  REQUIRE(p.simulated == simulated);
  REQUIRE(p.pruned == static_cast<int>(bb.entries.size()) - simulated);
  REQUIRE(all.progress.simulated == static_cast<int>(all.entries.size()));
  REQUIRE(all.progress.pruned == 0);
  std::printf("plan search: %d candidates, %d simulated, %d pruned (exhaustive: %d simulated)\n",
              p.total, p.simulated, p.pruned, all.progress.simulated);
}

void require_identical(const sim::PlanResult& a, const sim::PlanResult& b) {
  REQUIRE(a.entries.size() == b.entries.size());
  for (std::size_t i = 0; i < a.entries.size(); ++i) {
    const sim::PlanEntry &x = a.entries[i], &y = b.entries[i];
    REQUIRE(key(x.config) == key(y.config));
    REQUIRE(x.simulated == y.simulated);
    REQUIRE(x.iteration_s == y.iteration_s);
    REQUIRE(x.lower_bound_s == y.lower_bound_s);
    REQUIRE(x.peak_bytes == y.peak_bytes);
    REQUIRE(x.fits == y.fits);
  }
  REQUIRE(a.skipped.size() == b.skipped.size());
  REQUIRE(a.best_fit() == b.best_fit());
  REQUIRE(a.progress.simulated == b.progress.simulated);
  REQUIRE(a.progress.pruned == b.progress.pruned);
}

}  // namespace

TEST_CASE("branch and bound finds the exhaustive search's best plan, bounds under the engine",
          "[sim][planner][search]") {
  const Space spaces[] = {{"convnext", "dgx-a100", 4, 2},
                          {"regnet", "dgx-a100", 8, 8},
                          {"convnext", "dgx-a100:2", 16, 4},
                          {"convnext", "cpu-host:4", 4, 4},
                          {"regnet", "rtx4090x4", 4, 2}};
  for (const Space& s : spaces) {
    INFO(s.family << " on " << s.topology << ", " << s.devices << " devices, batch " << s.batch);
    const sim::Topology t = sim::Topology::preset(s.topology);
    const sim::PlanOptions o = options_for(s);
    require_same_best(run(o, t, true, 1), run(o, t, false, 2));
  }
}

TEST_CASE("branch and bound: precisions, compressions and a cap the fastest plan exceeds",
          "[sim][planner][search]") {
  SECTION("fp32 and bf16, dense and top-k, on shared memory") {
    sim::PlanOptions o = options_for({"convnext", "cpu-host:4", 4, 4});
    o.precisions = {"fp32", "bf16"};
    o.compressions = {"none", "topk"};
    const sim::Topology t = sim::Topology::preset("cpu-host:4");
    const sim::PlanResult all = run(o, t, true, 2), bb = run(o, t, false, 2);
    require_same_best(all, bb);
    // The best per compression is the exhaustive one too: the verdict's two best plans.
    const sim::CompressionVerdict va = all.compression_verdict(), vb = bb.compression_verdict();
    REQUIRE(va.best_topk >= 0);
    REQUIRE(key(all.entries[std::size_t(va.best_topk)].config) ==
            key(bb.entries[std::size_t(vb.best_topk)].config));
    REQUIRE(key(all.entries[std::size_t(va.best_dense)].config) ==
            key(bb.entries[std::size_t(vb.best_dense)].config));
    // Each simulated configuration's twin with the other compression is simulated too (or does
    // not fit): the verdict compares pairs.
    REQUIRE(vb.compared > 0);
    for (const sim::PlanEntry& e : bb.entries) {
      if (!e.simulated) continue;
      sim::PlanConfig twin = e.config;
      twin.compression = e.config.compression == "topk" ? "none" : "topk";
      const sim::PlanEntry* t = find(bb, twin);
      REQUIRE(t != nullptr);
      REQUIRE((t->simulated || !t->fits));
    }
  }
  SECTION("a memory cap just under the fastest plan's peak") {
    sim::PlanOptions o = options_for({"convnext", "dgx-a100", 8, 4});
    o.checkpointing = {"none", "block", "stage"};
    const sim::Topology t = sim::Topology::preset("dgx-a100");
    const sim::PlanResult free = run(o, t, true, 2);
    REQUIRE(free.best_fit() == 0);
    o.memory_cap_bytes = static_cast<double>(free.entries[0].peak_bytes - 1);
    const sim::PlanResult all = run(o, t, true, 2), bb = run(o, t, false, 2);
    REQUIRE_FALSE(all.entries[0].fits);
    REQUIRE(all.best_fit() > 0);
    require_same_best(all, bb);
  }
}

TEST_CASE("the planner's result does not depend on its thread count", "[sim][planner][search]") {
  const sim::Topology t = sim::Topology::preset("dgx-a100:2");
  const sim::PlanOptions o = options_for({"convnext", "dgx-a100:2", 16, 4});
  require_identical(run(o, t, false, 1), run(o, t, false, 2));
  require_identical(run(o, t, true, 1), run(o, t, true, 2));
}

TEST_CASE("plan progress: serialised counts that add up, and a cancel that stops the plan",
          "[sim][planner][search]") {
  const sim::Topology t = sim::Topology::preset("dgx-a100:2");
  sim::PlanOptions o = options_for({"convnext", "dgx-a100:2", 16, 4});
  o.threads = 2;
  std::vector<sim::PlanProgress> seen;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  o.progress = [&](const sim::PlanProgress& p) {  // from the planner's threads: no REQUIRE here
    if (inside.fetch_add(1) != 0) overlapped = true;
    seen.push_back(p);
    inside.fetch_sub(1);
  };
  const sim::PlanResult r = sim::plan(o, t, sim::DeviceCatalog{});
  REQUIRE_FALSE(overlapped);  // never two calls at once
  REQUIRE_FALSE(seen.empty());
  const sim::PlanProgress& last = seen.back();
  REQUIRE(last.done == last.total);
  REQUIRE(last.simulated == r.progress.simulated);
  REQUIRE(last.pruned == r.progress.pruned);
  REQUIRE(last.best_s == r.entries[std::size_t(r.best_fit())].iteration_s);
  REQUIRE(last.best == sim::describe(r.entries[std::size_t(r.best_fit())].config));
  for (const sim::PlanProgress& p : seen) {
    REQUIRE(p.total == last.total);
    REQUIRE(p.done <= p.total);
    REQUIRE(p.simulated + p.pruned <= p.done);
  }

  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  o.progress = [&](const sim::PlanProgress&) { cancel = true; };
  const sim::PlanResult c = sim::plan(o, t, sim::DeviceCatalog{});
  REQUIRE(c.cancelled);
  REQUIRE(c.progress.done < c.progress.total);
  REQUIRE(c.progress.simulated + c.progress.pruned == static_cast<int>(c.entries.size()));
}

TEST_CASE("branch and bound with pipeline stages and micro-batches: the same best, valid bounds",
          "[sim][planner][search][pipeline]") {
  // A stage's relaxed schedule bounds its own end as for any rank (its pipeline transfers are
  // point-to-point ops, timed at least as their transfer alone), and every stage is simulated.
  const Space spaces[] = {{"convnext", "dgx-a100", 4, 4}, {"regnet", "cpu-host:4", 4, 4}};
  for (const Space& s : spaces) {
    INFO(s.family << " on " << s.topology << ", " << s.devices << " devices, batch " << s.batch);
    const sim::Topology t = sim::Topology::preset(s.topology);
    sim::PlanOptions o = options_for(s);
    o.pipeline_stages = {1, 2, 4};
    o.micro_batches = {1, 2};
    require_same_best(run(o, t, true, 1), run(o, t, false, 2));
  }
}
