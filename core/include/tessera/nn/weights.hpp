// Weights in and out: safetensors files, and the names timm gives ConvNeXt and RegNet tensors, so
// a run starts from timm's pretrained weights and its checkpoints go back to PyTorch unchanged
// (docs/training.md, "Train on your own images from pretrained weights").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/tensor.hpp"
#include "tessera/nn/checkpoint.hpp"
#include "tessera/nn/models.hpp"

namespace tessera::nn {

using NamedTensors = std::vector<std::pair<std::string, core::Tensor>>;

/// Reads a safetensors file (https://github.com/huggingface/safetensors: an 8-byte little-endian
/// header size, a JSON header, the tensors' bytes) into host tensors: F64, F32, BF16, F16, I64 and
/// I32 as those dtypes, in the header's order of offsets; the header's "__metadata__" into
/// *metadata when given. Verifies the header's JSON, every dtype, shape and offset pair (in the
/// file, no overlap, no gap, nothing after the last) and the file's size; any fault throws
/// InvalidArgument naming the path, the tensor and what is wrong (a truncated download, another
/// format such as a PyTorch .pth: see tools/pth_to_safetensors.py).
NamedTensors read_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata = nullptr);

/// Writes `tensors` (host or device, any strides) as a safetensors file with `metadata`,
/// atomically (temporary file, fsync, rename). Throws InvalidArgument naming the path on I/O
/// failure or a duplicate name.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, const core::Tensor*>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// The timm model with exactly `spec`'s architecture (for a segmentation model: its backbone's,
/// whose classifier the model replaces by its own head): convnext_{atto,femto,pico,nano,tiny,small,
/// base,large,xlarge}, regnetx_002, regnetx_004_tv, regnetx_008, regnety_002, regnety_004,
/// regnety_008_tv (the _tv ones: torchvision's width rounding, which tessera's presets use); ""
/// when timm has none (names still map). Its num_classes may differ: create_model(num_classes=).
std::string timm_model_name(const ModelSpec& spec);

/// timm's name for one of the model's tensors (a parameter, or a BatchNorm running statistic):
/// "stages.1.blocks.0.dwconv.weight" → "stages.1.blocks.0.conv_dw.weight" (ConvNeXt),
/// "stages.0.blocks.0.f.a.weight" → "s1.b1.conv1.conv.weight" (RegNet). "" for a tensor timm's
/// model does not have (a segmentation or multi-camera fusion head).
std::string timm_name(const ModelSpec& spec, const std::string& tessera_name);

/// What loading a weights file did, in the terms of PyTorch's load_state_dict(strict=False).
struct WeightReport {
  std::string naming;                   ///< "timm" or "tessera": whose names the file uses
  std::int64_t loaded = 0;              ///< tensors copied into the model
  std::vector<std::string> missing;     ///< model tensors (tessera names) the file lacks: they keep
                                        ///< their initialisation (a new head)
  std::vector<std::string> unexpected;  ///< file tensors the model has no place for
  std::vector<std::string> replaced;  ///< classifier tensors of another class count: re-initialised
  std::int64_t file_classes = 0;      ///< with `replaced`: the classes of the file's classifier
  std::int64_t model_classes = 0;     ///< and of the model's
  /// "loaded 344 tensors (timm names); missing: ...; unexpected: ...; replaced (1000 → 19 classes):
  /// ..."
  std::string summary() const;
};

/// Copies the tensors of the safetensors file `path` into the model's tensors `targets` (tessera
/// names: its parameters and BatchNorm running statistics; meta tensors, another pipeline stage's,
/// are checked but not copied; device tensors are uploaded). The file may use timm's names (the
/// pretrained ConvNeXt and RegNet) or tessera's (an export with `--naming tessera`); timm's
/// num_batches_tracked entries are accepted and not used. Linear and 1×1 convolution weights
/// convert into each other ((O, I) ↔ (O, I, 1, 1)); values convert to the target's dtype.
/// The classifier (head.fc, fusion.fc, head.classifier) of another shape is re-initialised and
/// listed in `replaced`; any other shape difference throws InvalidArgument naming the tensor, both
/// shapes and the likely cause (another model size), leaving every target untouched. So does a
/// file that matches none of the model's tensors.
WeightReport load_weights(const std::string& path, const ModelSpec& spec,
                          const std::vector<std::pair<std::string, core::Tensor*>>& targets);

/// The timm-named tensors of a tessera checkpoint (its parameters and running statistics, a
/// num_batches_tracked per BatchNorm, mlp weights shaped as timm's model of that size holds
/// them), for write_safetensors: timm.create_model(timm_model_name(spec)) + load_state_dict()
/// takes them unchanged. `naming` "tessera" keeps tessera's names instead. Under timm's names a
/// tensor timm's model has no place for (a segmentation or multi-camera fusion head) is left out
/// and its name appended to *left_out when given: the backbone then loads with
/// load_state_dict(strict=False). Throws InvalidArgument for a checkpoint that is not tessera's.
NamedTensors export_weights(const CheckpointData& checkpoint, const std::string& naming = "timm",
                            std::vector<std::string>* left_out = nullptr);

/// Reads the checkpoint `checkpoint` (with its pipeline stage files) and writes its weights to
/// the safetensors file `out` (export_weights; metadata: the model's JSON, the timm model name,
/// the step). Returns the timm model name ("" when none).
std::string export_checkpoint(const std::string& checkpoint, const std::string& out,
                              const std::string& naming = "timm",
                              std::vector<std::string>* left_out = nullptr);

}  // namespace tessera::nn
