// Weights files for the front ends: a checkpoint exported as safetensors (`tessera export`), and
// a model's weights loaded from a safetensors file as host tensors (tessera.load_weights).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/nn/weights.hpp"

namespace tessera::run {

/// What export_weights wrote.
struct ExportedWeights {
  std::string path;        ///< the safetensors file
  std::string naming;      ///< "timm" or "tessera"
  std::string timm_model;  ///< timm.create_model's name ("" when timm has no such model)
  std::int64_t tensors = 0;
  std::int64_t bytes = 0;  ///< the file's size
  int num_classes = 0;     ///< the classifier's classes (0 without one)
  /// Tensors left out under timm's names (a segmentation head timm's model does not have).
  std::vector<std::string> left_out;
  /// One line of Python that loads the file into timm's model (empty without a timm model):
  /// strict, or strict=False when tensors were left out.
  std::string pytorch;
};

/// Writes the weights of the tessera checkpoint `checkpoint` to the safetensors file `out` with
/// timm's names ("timm") or tessera's ("tessera") (nn::export_checkpoint), then reads the file
/// back to describe it. Throws InvalidArgument naming the file and the fix: another naming, a
/// checkpoint that is not tessera's, an unwritable path.
ExportedWeights export_weights(const std::string& checkpoint, const std::string& out,
                               const std::string& naming = "timm");

/// A model's weights from a file: what loading did, and every tensor under tessera's names.
struct ModelWeights {
  nn::WeightReport report;
  nn::NamedTensors tensors;  ///< parameters and running statistics, host, in the model's order
};

/// Builds `model` (a preset, model file or JSON; run::load_model) for `task` ("classify" or
/// "segment") with `classes` (0: the file's classifier's count when it has one, else the
/// model's own), sets it up on one rank in host memory and loads the file into it
/// (nn::load_weights). Throws InvalidArgument as load_weights does, and for a bad task.
ModelWeights load_model_weights(const std::string& path, const std::string& model,
                                const std::string& task = "classify", int classes = 0);

}  // namespace tessera::run
