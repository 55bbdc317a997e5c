// The training step's record as a JSON object, for the run layer's own writers (the metrics file,
// train_json); step_record() is its text.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "tessera/nn/trainer.hpp"
#include "tessera/run/alarms.hpp"
#include "tessera/run/elastic.hpp"

namespace tessera::run {

/// step_record's object (docs/records.md, "Training step").
nlohmann::ordered_json step_record_json(int batch, const std::vector<nn::StepStats>& ranks,
                                        const std::vector<Alarm>& alarms,
                                        const std::vector<data::DataStats>& data = {},
                                        const std::optional<ElasticRound>& elastic = std::nullopt);

/// One rank's data figures (step_record's "data", and the run's totals in train_json).
nlohmann::ordered_json data_stats_json(const data::DataStats& d);

/// Adds a step's data figures (per rank) to the run's totals per rank.
void add_data_stats(std::vector<data::DataStats>& total, const std::vector<data::DataStats>& step);

}  // namespace tessera::run
