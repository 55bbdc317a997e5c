// Device names, the compute backend of a device and in-process ranks: the run layer's door to the
// concrete backends for front ends that run ops themselves (verify, teaching, tessera.functional).
#include "tessera/run/devices.hpp"

#include "tessera/builtin_backends.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/core/error.hpp"

namespace tessera::run {

std::optional<Device> try_parse_device(std::string_view text) {
  if (text == "cpu") return Device{"cpu", -1};
  if (text == "cuda") return Device{"cuda", 0};
  constexpr std::string_view prefix = "cuda:";
  if (text.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = text.substr(prefix.size());
  // Four digits at most: no GPU index is larger, and stoi cannot overflow.
  if (digits.empty() || digits.size() > 4 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  return Device{"cuda", std::stoi(std::string(digits))};
}

Device parse_device(std::string_view text, std::string_view what) {
  const std::optional<Device> d = try_parse_device(text);
  TESSERA_CHECK(d.has_value(), what, " '", text,
                "': expected cpu, cuda or cuda:N (N a GPU index: cuda:0, cuda:1, ...)");
  return *d;
}

bool names_gpu(std::string_view text) { return text == "cuda" || text.substr(0, 5) == "cuda:"; }

std::unique_ptr<compute::Backend> make_compute(const Device& device, int threads, bool tf32) {
  compute::Registry computes;
  register_builtin_backends(computes);
  return computes.create(device.backend,
                         compute::BackendOptions{threads, std::max(device.index, 0), tf32});
}

void local_ranks(int ranks, const std::function<void(comm::Backend& world)>& fn) {
  comm::local::run(ranks, fn);
}

}  // namespace tessera::run
