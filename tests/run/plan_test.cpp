// run::plan: the planner through the run layer equals sim::plan called with the same inputs, its
// configurations come fastest first with fit flags that follow the devices' capacities (or the
// cap), bad choices are refused naming the field, and its record has exactly the fields and JSON
// types docs/records.md ("Plan") lists.
#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "run/expect.hpp"
#include "run/records_doc.hpp"
#include "support/catch.hpp"
#include "tessera/run/plan.hpp"
#include "tessera/run/resolve.hpp"

using namespace tessera;
using Json = nlohmann::ordered_json;
using runtest::has;
using runtest::message;

namespace {

/// ConvNeXt-atto on a small input: every candidate replays in milliseconds.
run::RunSpec small_spec(const std::string& topology) {
  run::RunSpec s = run::RunSpec::for_simulation();
  s.model = "convnext-atto";
  s.input = "3x64x256";
  s.batch = 2;
  s.topology = topology;
  return s;
}

run::PlanChoices small_choices() {
  run::PlanChoices c;
  c.devices = 4;
  c.shards = {"W", "H"};
  c.checkpointing = {"none", "block"};
  return c;
}

/// The smallest capacity of the topology's first `n` devices: the limit with no cap.
double smallest_capacity(const run::SimSetup& s, int n) {
  double least = 0;
  const std::vector<int> devices = s.topology.devices();
  for (int i = 0; i < n; ++i) {
    const double c = s.catalog.get(s.topology.nodes()[devices[i]].device).capacity_bytes;
    least = i == 0 ? c : std::min(least, c);
  }
  return least;
}

void require_same(const sim::PlanEntry& a, const sim::PlanEntry& b) {
  REQUIRE(a.config.mesh == b.config.mesh);
  REQUIRE(a.config.shard == b.config.shard);
  REQUIRE(a.config.checkpointing == b.config.checkpointing);
  REQUIRE(a.config.precision == b.config.precision);
  REQUIRE(a.iteration_s == b.iteration_s);
  REQUIRE(a.peak_bytes == b.peak_bytes);
  REQUIRE(a.activation_peak_bytes == b.activation_peak_bytes);
  REQUIRE(a.limit_bytes == b.limit_bytes);
  REQUIRE(a.fits == b.fits);
  REQUIRE(a.comm_busy_s == b.comm_busy_s);
}

}  // namespace

TEST_CASE("plan: run::plan equals the sim planner called directly, fastest first, fits by capacity",
          "[run]") {
  const run::RunSpec spec = small_spec("dgx-a100");
  const run::PlanRun p = run::plan(spec, small_choices());

  run::RunSpec one = spec;
  one.mesh = "sp=1";
  const run::SimSetup setup = run::resolve_sim(one);
  sim::PlanOptions o;
  o.train = setup.train;
  o.engine = setup.engine;
  o.devices = 4;
  o.shards = {"W", "H"};
  o.checkpointing = {"none", "block"};
  const sim::PlanResult direct = sim::plan(o, setup.topology, setup.catalog);

  REQUIRE(p.result.devices == 4);
  REQUIRE(p.result.entries.size() == direct.entries.size());
  REQUIRE(p.result.entries.size() >= 6);
  for (std::size_t i = 0; i < direct.entries.size(); ++i)
    require_same(p.result.entries[i], direct.entries[i]);
  REQUIRE(p.result.skipped.size() == direct.skipped.size());
  REQUIRE_FALSE(p.result.skipped.empty());  // sp=4 along H: 64 rows are 2 blocks of 32
  REQUIRE(p.result.best_fit() == direct.best_fit());

  const double limit = smallest_capacity(setup, 4);
  for (std::size_t i = 0; i < p.result.entries.size(); ++i) {
    const sim::PlanEntry& e = p.result.entries[i];
    if (i > 0) REQUIRE(p.result.entries[i - 1].iteration_s <= e.iteration_s);
    REQUIRE(e.limit_bytes == limit);
    REQUIRE(e.fits == (static_cast<double>(e.peak_bytes) <= limit));
  }

  // The record says the same: the CLI's --json and Python read it.
  const Json r = Json::parse(p.to_json());
  REQUIRE(r["best_fit"] == p.result.best_fit());
  REQUIRE(r["configurations"].size() == p.result.entries.size());
  for (std::size_t i = 0; i < p.result.entries.size(); ++i) {
    REQUIRE(r["configurations"][i]["iteration_time_s"].get<double>() ==
            p.result.entries[i].iteration_s);
    REQUIRE(r["configurations"][i]["peak_memory_bytes"] == p.result.entries[i].peak_bytes);
  }
  const std::string table = p.to_table(2);
  REQUIRE(has(table, "<- fastest that fits"));
  REQUIRE(has(table, "skipped:"));
}

TEST_CASE("plan: a memory cap between the peaks leaves only the rows under it fitting", "[run]") {
  const run::RunSpec spec = small_spec("dgx-a100");
  const run::PlanRun free = run::plan(spec, small_choices());
  std::size_t lo = SIZE_MAX, hi = 0;
  for (const sim::PlanEntry& e : free.result.entries) {
    lo = std::min(lo, e.peak_bytes);
    hi = std::max(hi, e.peak_bytes);
  }
  REQUIRE(lo < hi);
  const std::size_t cap = (lo + hi) / 2;
  run::PlanChoices c = small_choices();
  c.memory_cap = std::to_string(cap);
  const run::PlanRun capped = run::plan(spec, c);
  REQUIRE(capped.options.memory_cap_bytes == static_cast<double>(cap));
  int fitting = 0, first_fit = -1;
  for (std::size_t i = 0; i < capped.result.entries.size(); ++i) {
    const sim::PlanEntry& e = capped.result.entries[i];
    REQUIRE(e.limit_bytes == static_cast<double>(cap));
    REQUIRE(e.fits == (e.peak_bytes <= cap));
    if (e.fits && first_fit < 0) first_fit = static_cast<int>(i);
    fitting += e.fits;
  }
  REQUIRE(fitting > 0);
  REQUIRE(fitting < static_cast<int>(capped.result.entries.size()));
  REQUIRE(capped.result.best_fit() == first_fit);
  REQUIRE(Json::parse(capped.to_json())["memory_cap_bytes"] == cap);
}

TEST_CASE("plan: bad choices are refused, naming the field", "[run]") {
  const run::RunSpec spec = small_spec("dgx-a100");
  run::PlanChoices c = small_choices();
  c.shards = {"W", "Q"};
  REQUIRE(has(message([&] { run::plan(spec, c); }), "shards 'W,Q': list W, H and/or HW"));
  c = small_choices();
  c.memory_cap = "0";
  REQUIRE(has(message([&] { run::plan(spec, c); }), "memory_cap '0': give a positive size"));
  run::RunSpec bf16 = spec;
  bf16.precision = "bf16";
  c = small_choices();
  c.precisions = {"fp32", "bf16"};
  REQUIRE(has(message([&] { run::plan(bf16, c); }),
              "precision 'bf16' and precisions 'fp32,bf16': give one"));
  // Without a list, the spec's one precision is planned.
  c.precisions.clear();
  c.shards = {"W"};
  c.checkpointing = {"none"};
  for (const sim::PlanEntry& e : run::plan(bf16, c).result.entries)
    REQUIRE(e.config.precision == "bf16");
}

TEST_CASE("plan: the record has exactly the fields and types of docs/records.md's Plan table",
          "[run]") {
  const std::map<std::string, test::DocField> doc =
      test::doc_fields(test::records_doc_text(), "Plan");
  REQUIRE(doc.count("configurations[].iteration_time_s"));
  REQUIRE(doc.at("compression_verdict").optional);

  SECTION("dense only: no compression verdict") {
    const Json r = Json::parse(run::plan(small_spec("dgx-a100"), small_choices()).to_json());
    REQUIRE(!r["configurations"].empty());
    REQUIRE(!r["skipped"].empty());
    REQUIRE_FALSE(r.contains("compression_verdict"));
    const std::vector<std::string> wrong = test::record_mismatches(r, doc);
    std::string all;
    for (const std::string& w : wrong) all += w + "\n";
    INFO(all);
    REQUIRE(wrong.empty());
  }
  SECTION("dense and top-k on shared memory: with the verdict") {
    run::PlanChoices c = small_choices();
    c.checkpointing = {"none"};
    c.compressions = {"none", "topk"};
    c.exhaustive = true;  // the verdict compares configurations simulated both ways
    const Json r = Json::parse(run::plan(small_spec("cpu-host:4"), c).to_json());
    REQUIRE(!r["configurations"].empty());
    REQUIRE(!r["skipped"].empty());
    REQUIRE(r.contains("compression_verdict"));
    const std::vector<std::string> wrong = test::record_mismatches(r, doc);
    std::string all;
    for (const std::string& w : wrong) all += w + "\n";
    INFO(all);
    REQUIRE(wrong.empty());
  }
}
