// The record of one training step: the one JSON form of a step that the metrics file, `tessera
// train --json` and tessera.train's callback all show (docs/records.md, "Training step").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/nn/trainer.hpp"
#include "tessera/run/alarms.hpp"
#include "tessera/run/elastic.hpp"

namespace tessera::run {

/// One step as one line of JSON: the step's figures (rank 0's loss, gradient norm, learning rate,
/// loss scale and gradient bytes, which every rank shares), the slowest rank's step, data and load
/// times, images/s at that step time for `batch` samples, every rank's own times and peak memory
/// under "ranks", and "alarms" (alarm_json objects) when the step fired any.
/// `ranks` is every rank's figures of the step, in rank order (at least one). `data`: what each
/// rank's dataset read and decoded in the step (a run on an image folder; empty otherwise), as
/// each rank's "data" object: pixels_decoded, pixels_total, decoded_share (decoded / total),
/// decode_s, bad_skipped, labels_ignored, files, bytes_read (Dataset::stats(rank) since the
/// previous step: with prefetch, what the loader threads decoded meanwhile). Absent when `data`
/// is empty. `elastic`: the round of an elastic job the step ran in, as the record's last field
/// "elastic" (round, restarts, members); absent outside elastic jobs.
std::string step_record(int batch, const std::vector<nn::StepStats>& ranks,
                        const std::vector<Alarm>& alarms = {},
                        const std::vector<data::DataStats>& data = {},
                        const std::optional<ElasticRound>& elastic = std::nullopt);

}  // namespace tessera::run
