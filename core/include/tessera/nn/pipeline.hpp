// Pipeline stages and micro-batches: the schedules a stage runs its micro-batches in, and the cut
// of a model's units into contiguous stages.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tessera::nn {

/// How the stages of a pipeline (a mesh dim named "pp") order their micro-batches' forwards and
/// backwards. Both run every micro-batch's backward in increasing order (so gradients accumulate
/// in the same order whatever the schedule and mesh); they differ in when: GPipe runs every
/// forward first (M micro-batches in flight per stage), 1F1B starts backwards as soon as the last
/// stage can (at most pp − stage micro-batches in flight on stage `stage`).
enum class PipelineSchedule : std::uint8_t { OneFOneB, GPipe };
/// "1f1b", "gpipe".
std::string_view pipeline_schedule_name(PipelineSchedule s) noexcept;
/// Parses "1f1b" or "gpipe"; nullopt otherwise.
std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view s) noexcept;

/// One action of a stage's schedule: the forward or the backward of micro-batch `micro`.
struct PipelineAction {
  bool forward = true;
  int micro = 0;
  bool operator==(const PipelineAction&) const = default;
};

/// The actions stage `stage` (0-based, of `stages`) runs in one step of `micro_batches`
/// micro-batches: 2·micro_batches actions, each micro-batch's forward before its backward.
/// With one stage both schedules are F0 B0 F1 B1 … (one micro-batch alive at a time).
std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stages, int stage,
                                             int micro_batches);

/// The most micro-batches whose forward has run and backward has not, at any point of
/// pipeline_actions(schedule, stages, stage, micro_batches): min(stages − stage, M) for 1F1B,
/// M for GPipe (1 with one stage).
int pipeline_in_flight(PipelineSchedule schedule, int stages, int stage, int micro_batches);

/// The ideal bubble fraction of a pipeline of equal stages: (stages − 1) / (M + stages − 1).
double pipeline_ideal_bubble(int stages, int micro_batches);

/// Cuts `unit_costs` (one per unit, in order, ≥ 0) into `stages` contiguous non-empty stages
/// minimising the most expensive stage (ties: the earliest cut). Returns the index of the first
/// unit of each stage after the first (stages − 1 increasing indices). Throws InvalidArgument
/// when there are fewer units than stages.
std::vector<int> balanced_stage_starts(const std::vector<double>& unit_costs, int stages);

/// Checks explicit stage starts against `units` units and `stages` stages (stages − 1 strictly
/// increasing indices in [1, units)); throws InvalidArgument saying what is wrong and the range.
void check_stage_starts(const std::vector<int>& starts, int units, int stages);

}  // namespace tessera::nn
