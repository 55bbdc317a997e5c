// compare_traces and compare_trace_files on a simulated trace: against itself every row agrees
// exactly; against a copy with one phase's events stretched, that phase alone differs; a measured
// run of another configuration is named as a mismatch; a trace without kernels is refused.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include <unistd.h>

#include "run/tiny_spec.hpp"
#include "sim/sim_test_util.hpp"  // error_of, lacks
#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/run/phase_compare.hpp"
#include "tessera/run/simulate.hpp"

using namespace tessera;
using run::RunSpec;

namespace {

/// convnext-atto on 3x32x64 over sp=2 of this machine's two cpu ranks, every rank simulated with
/// its trace (what `tessera sim run --trace` writes).
run::SimRun simulated() {
  RunSpec s = runtest::tiny_spec(RunSpec::for_simulation(), "sp=2", 1);
  s.topology = "cpu-host:2";
  return run::simulate(run::resolve_sim(s), /*every_rank=*/true, /*keep_trace=*/true);
}

/// The simulated trace as a measured one: its events, and the otherData `tessera train` writes.
core::ChromeTrace as_measured(const run::SimRun& r, std::vector<core::TraceEvent> events) {
  core::ChromeTrace t;
  t.events = std::move(events);
  t.process_names = r.result.process_names;
  t.other = {{"source", "tessera train"},
             {"model", r.setup.train.model.name},
             {"mesh", r.setup.mesh.to_string()},
             {"input", core::shape_str(r.setup.train.input)}};
  return t;
}

run::Comparison compare(const run::SimRun& r, const core::ChromeTrace& measured) {
  return run::compare_traces(measured, r.result.trace, r.setup.train.model.name,
                             r.setup.mesh.to_string(), core::shape_str(r.setup.train.input));
}

/// The phase rows (not the iteration, not the layer groups) whose measured and simulated times
/// differ by more than 0.1%.
std::set<std::string> differing_phases(const run::Comparison& c) {
  std::set<std::string> out;
  for (const run::CompareRow& row : c.rows) {
    if (row.group || row.label == "iteration") continue;
    const double scale = std::max(row.measured_us, row.simulated_us);
    if (std::abs(row.measured_us - row.simulated_us) > 1e-3 * scale) out.insert(row.label);
  }
  return out;
}

/// Every event that `pick` selects, `factor` times as long.
template <class Pick>
std::vector<core::TraceEvent> stretched(std::vector<core::TraceEvent> events, double factor,
                                        Pick pick) {
  int n = 0;
  for (core::TraceEvent& e : events)
    if (e.ph == 'X' && pick(e)) e.dur_us *= factor, ++n;
  REQUIRE(n > 0);  // the trace has such events, or the test would check nothing
  return events;
}

}  // namespace

TEST_CASE("compare: a simulated trace against itself agrees in every row", "[run]") {
  const run::SimRun r = simulated();
  const run::Comparison c = compare(r, as_measured(r, r.result.trace));
  REQUIRE(c.mismatch.empty());
  REQUIRE(c.measured_source ==
          "tessera train: convnext-atto sp=2 " + core::shape_str(r.setup.train.input));
  // The iteration, the five phases, then at least the stem, a stage, the head and the optimizer.
  REQUIRE(c.rows.size() >= 1 + run::kNumPhases + 4);
  REQUIRE(c.rows[0].label == "iteration");
  for (int p = 0; p < run::kNumPhases; ++p) REQUIRE(c.rows[1 + p].label == run::phase_label(p));
  for (const run::CompareRow& row : c.rows) {
    INFO(row.label);
    REQUIRE(row.measured_us == row.simulated_us);
    if (row.measured_us > 0) REQUIRE(row.error_pct() == 0);
  }
  REQUIRE(c.simulated.phase_us[run::kForward] > 0);
  REQUIRE(c.simulated.phase_us[run::kBackward] > 0);
  REQUIRE(c.simulated.phase_us[run::kHalo] > 0);  // sp=2: the convolutions exchange halos
}

TEST_CASE("compare: the same trace file on both sides gives no difference", "[run]") {
  const run::SimRun r = simulated();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera-compare-test-" + std::to_string(::getpid()) + ".json"))
                               .string();
  core::write_file_atomic(path, r.trace_json("tessera sim run"));
  const run::Comparison c = run::compare_trace_files(path, path);
  std::filesystem::remove(path);
  REQUIRE(c.mismatch.empty());
  REQUIRE(differing_phases(c).empty());
  for (const run::CompareRow& row : c.rows) REQUIRE(row.measured_us == row.simulated_us);
  REQUIRE(c.rows[0].measured_us > 0);
}

TEST_CASE("compare: a phase measured slower than simulated is the one row that differs", "[run]") {
  const run::SimRun r = simulated();
  SECTION("backward kernels") {
    // Backward kernels (named so, after the loss); the loss's own kernels sit on its boundary.
    const auto events = stretched(r.result.trace, 1.5, [](const core::TraceEvent& e) {
      return e.cat == "compute" && e.name.find("backward") != std::string::npos &&
             e.layer != "loss" && e.layer != "optimizer";
    });
    const run::Comparison c = compare(r, as_measured(r, events));
    REQUIRE(differing_phases(c) == std::set<std::string>{"backward"});
    REQUIRE(c.rows[1 + run::kBackward].error_pct() < -1);  // simulated below measured
  }
  SECTION("halo transfers") {
    const auto events =
        stretched(r.result.trace, 2.0, [](const core::TraceEvent& e) { return e.cat == "halo"; });
    const run::Comparison c = compare(r, as_measured(r, events));
    REQUIRE(differing_phases(c) == std::set<std::string>{"halo exchange"});
  }
}

TEST_CASE("compare: a measured run of another configuration is named as a mismatch", "[run]") {
  const run::SimRun r = simulated();
  core::ChromeTrace m = as_measured(r, r.result.trace);
  m.other[2].second = "sp=4";  // mesh
  const run::Comparison c = compare(r, m);
  INFO(c.mismatch);
  REQUIRE(c.mismatch.find("mesh sp=4 vs sp=2") != std::string::npos);
  REQUIRE(c.table().find("not like for like") != std::string::npos);

  const core::ChromeTrace empty = as_measured(r, {});
  REQUIRE(simtest::lacks(simtest::error_of([&] { compare(r, empty); }), {"no compute events"}) ==
          "");
}
