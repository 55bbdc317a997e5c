// Pipeline schedules (1F1B, GPipe) and the balanced cut of a model's units into stages.
#include "tessera/nn/pipeline.hpp"

#include <algorithm>
#include <limits>

#include "tessera/core/error.hpp"

namespace tessera::nn {

std::string_view pipeline_schedule_name(PipelineSchedule s) noexcept {
  return s == PipelineSchedule::GPipe ? "gpipe" : "1f1b";
}

std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view s) noexcept {
  if (s == "1f1b") return PipelineSchedule::OneFOneB;
  if (s == "gpipe") return PipelineSchedule::GPipe;
  return std::nullopt;
}

std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stages, int stage,
                                             int micro_batches) {
  TESSERA_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1,
                "pipeline_actions: stage ", stage, " of ", stages, " with ", micro_batches,
                " micro-batches is not a pipeline");
  std::vector<PipelineAction> out;
  out.reserve(2 * std::size_t(micro_batches));
  // Forwards run ahead of backwards by `warmup` micro-batches: the stages after this one must
  // each take one before the last stage can start the first backward (1F1B), or all of them
  // (GPipe). With one stage, 1F1B gives F0 B0 F1 B1 …; so does GPipe, which then has nothing to
  // overlap and would only keep every micro-batch alive.
  int warmup =
      schedule == PipelineSchedule::GPipe && stages > 1 ? micro_batches : stages - stage - 1;
  warmup = std::min(warmup, micro_batches);
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back({true, f});
  for (; f < micro_batches; ++f, ++b) {
    out.push_back({true, f});
    out.push_back({false, b});
  }
  for (; b < micro_batches; ++b) out.push_back({false, b});
  return out;
}

int pipeline_in_flight(PipelineSchedule schedule, int stages, int stage, int micro_batches) {
  int alive = 0, most = 0;
  for (const PipelineAction& a : pipeline_actions(schedule, stages, stage, micro_batches)) {
    alive += a.forward ? 1 : -1;
    most = std::max(most, alive);
  }
  return most;
}

double pipeline_ideal_bubble(int stages, int micro_batches) {
  TESSERA_CHECK(stages >= 1 && micro_batches >= 1, "pipeline_ideal_bubble: ", stages, " stages, ",
                micro_batches, " micro-batches");
  return double(stages - 1) / double(micro_batches + stages - 1);
}

std::vector<int> balanced_stage_starts(const std::vector<double>& unit_costs, int stages) {
  const int n = static_cast<int>(unit_costs.size());
  TESSERA_CHECK(stages >= 1, "pipeline: ", stages, " stages; use at least 1");
  TESSERA_CHECK(n >= stages, "pipeline: the model has ", n,
                " units (stem, blocks, head) but pp=", stages, " asks for ", stages,
                " stages of at least one unit each; use pp of at most ", n);
  for (double c : unit_costs)
    TESSERA_CHECK(c >= 0 && c == c, "pipeline: a unit cost of ", c,
                  " (costs must be finite and >= 0)");
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + unit_costs[i];
  // best[k][i]: the least possible most-expensive stage when the first i units form k stages;
  // from[k][i] the start of the k-th stage there. O(stages · n²), n is a few dozen units.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> from(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {
        const double v = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (v < best[k][i]) best[k][i] = v, from[k][i] = j;  // strict: the earliest cut wins ties
      }
  std::vector<int> starts(stages - 1);
  int i = n;
  for (int k = stages; k > 1; --k) i = starts[k - 2] = from[k][i];
  return starts;
}

void check_stage_starts(const std::vector<int>& starts, int units, int stages) {
  TESSERA_CHECK(int(starts.size()) == stages - 1, "pipeline: ", starts.size(),
                " stage starts given for pp=", stages, "; give ", stages - 1,
                " unit indices (where stages 1..", stages - 1,
                " begin), or none for the balanced cut");
  int prev = 0;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    TESSERA_CHECK(starts[k] > prev && starts[k] < units, "pipeline: stage ", k + 1,
                  " starts at unit ", starts[k], "; stage starts must increase strictly within 1..",
                  units - 1, " (the model has ", units, " units, each stage at least one)");
    prev = starts[k];
  }
}

}  // namespace tessera::nn
