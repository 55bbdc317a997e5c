// Where a front end's ranks run and what they compute on: the one parser of device names (cpu,
// cuda, cuda:N), the compute backend for a device, and in-process ranks over the `local` comm
// backend — so that the CLI, the studio and Python name no concrete backend themselves.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/comm/backend.hpp"
#include "tessera/compute/backend.hpp"

namespace tessera::run {

/// A device a rank computes on.
struct Device {
  std::string backend = "cpu";  ///< the compute backend: "cpu" or "cuda"
  int index = -1;               ///< the GPU's index (cuda:N's N); -1 on the cpu

  bool gpu() const noexcept { return backend == "cuda"; }
  bool operator==(const Device& o) const noexcept {
    return backend == o.backend && index == o.index;
  }
};

/// "cpu" → {cpu, -1}; "cuda" → {cuda, 0}; "cuda:N" → {cuda, N} with N one to four digits.
/// Anything else ("cuda:x", "cuda:-1", "cuda:", "h200") → nullopt, for callers that say in
/// their own words what they accept.
std::optional<Device> try_parse_device(std::string_view text);

/// try_parse_device, or InvalidArgument "<what> 'TEXT': expected cpu, cuda or cuda:N (N a GPU
/// index: cuda:0, cuda:1, ...)"; `what` names the setting ("--device", "device").
Device parse_device(std::string_view text, std::string_view what = "device");

/// Whether `text` names a GPU at all ("cuda" or anything starting "cuda:"), valid or not: the
/// callers that route GPU names one way and device models (h200) another.
bool names_gpu(std::string_view text);

/// The compute backend of `device` from this build's registry, with `threads` threads (cpu) and
/// TF32 allowed or not (cuda). Throws Unsupported where the build or this machine lacks it (the
/// backend's own reason: "cuda: built, no CUDA device visible ...").
std::unique_ptr<compute::Backend> make_compute(const Device& device, int threads = 1,
                                               bool tf32 = false);

/// Runs `fn` on `ranks` in-process ranks (threads over the `local` comm backend), each with its
/// world communicator; returns when every rank returned, rethrowing the first rank's exception.
void local_ranks(int ranks, const std::function<void(comm::Backend& world)>& fn);

}  // namespace tessera::run
