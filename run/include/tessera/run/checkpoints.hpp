// The checkpoints a run writes every K steps (save_every: SAVE.step<N> beside --save's SAVE) and
// the choice `resume auto` makes among them: the newest one that reads back whole.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::run {

/// What newest_checkpoint() found.
struct CheckpointChoice {
  std::string path;       ///< the checkpoint to resume from; "" when none is complete
  std::int64_t step = 0;  ///< its step (0 with none)
  /// Candidates left out, in the order tried: {path, why} (corrupted, truncated, a stage file
  /// missing, ...).
  std::vector<std::pair<std::string, std::string>> skipped;
};

/// The newest complete checkpoint among `save` and `save`.step<N> (exactly that pattern: never
/// save.tmp.* partial files, save.step<N>.stage<k> stage files or any other name). Candidates
/// are tried newest step first (N from the name; SAVE's from its meta "step"); complete means
/// nn::load_checkpoint_stages verifies it (checksums, every stage file present and of the same
/// step) and a SAVE.step<N> holds step N. Whether it fits the run (model, input, batch) is the
/// Trainer's check on load: a checkpoint of another model is the user's mistake, not skipped.
/// Reads every candidate it tries in full; touches nothing.
CheckpointChoice newest_checkpoint(const std::string& save);

/// `save`.step<step>: where save_every writes the checkpoint of step `step`.
std::string step_checkpoint_path(const std::string& save, std::int64_t step);

/// Removes the oldest `save`.step<N> files beyond the newest `keep` (keep >= 1), with their
/// stage files (.stage<k>); returns the paths removed, oldest checkpoint last. Leaves `save` and
/// every other name alone. Throws InvalidArgument naming the file it cannot remove.
std::vector<std::string> prune_step_checkpoints(const std::string& save, int keep);

}  // namespace tessera::run
