// Checkpoint files: named tensors plus string metadata, written atomically with a checksum that
// is verified on every read.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/tensor.hpp"

namespace tessera::nn {

/// What a checkpoint holds.
struct CheckpointData {
  std::map<std::string, std::string> meta;          ///< e.g. "model", "step", "format"
  std::vector<std::pair<std::string, core::Tensor>> tensors;  ///< name → contiguous copy
};

/// Writes `tensors` (any strides; f32/f64/i32/i64) and `meta` to `path` atomically (temporary
/// file + fsync + rename): a crash leaves the previous checkpoint intact. Throws InvalidArgument
/// naming the path on I/O failure.
void save_checkpoint(const std::string& path, const std::map<std::string, std::string>& meta,
                     const std::vector<std::pair<std::string, const core::Tensor*>>& tensors);

/// Reads and verifies a checkpoint (magic, version, sizes, checksum). A truncated, corrupted or
/// foreign file throws InvalidArgument saying which and naming the path.
CheckpointData load_checkpoint(const std::string& path);

/// load_checkpoint, and when `path` was written by pipeline stages, every stage's file
/// (`path`.stage1, ...) merged into one: the tensors of all stages, checked to be of the same step
/// (a save interrupted between the stages' files throws InvalidArgument naming both files).
CheckpointData load_checkpoint_stages(const std::string& path);

/// Copies the checkpoint's tensors into `targets` by name. Every target must be present with the
/// same shape and dtype, and the checkpoint must hold nothing else: otherwise throws
/// InvalidArgument naming the first mismatch ("checkpoint was written for another model") and
/// leaves every target untouched.
void restore_tensors(const CheckpointData& data,
                     const std::vector<std::pair<std::string, core::Tensor*>>& targets);

}  // namespace tessera::nn
