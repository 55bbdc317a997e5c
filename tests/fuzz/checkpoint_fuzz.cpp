// Fuzz target: checkpoint files (nn::load_checkpoint, which reads a path: the input goes to a
// per-process scratch file). The first input byte picks the mode: odd bytes write the rest as
// is (the envelope checks: magic, version, sizes, checksums); even bytes first rewrite the size
// field and both checksums to match, so mutations reach the records behind them.
#include <cstring>
#include <string>

#include "fuzz_support.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/nn/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0 && file.size() >= 40) {
    // Layout: [16,24) total size, [24,32) FNV-1a of [0,24), last 8 bytes FNV-1a of the rest.
    const std::uint64_t total = file.size();
    std::memcpy(file.data() + 16, &total, 8);
    const std::uint64_t header_sum = tessera::core::fnv1a64({file.data(), 24});
    std::memcpy(file.data() + 24, &header_sum, 8);
    const std::uint64_t sum = tessera::core::fnv1a64({file.data(), file.size() - 8});
    std::memcpy(file.data() + file.size() - 8, &sum, 8);
  }
  static const std::string path = tessera::fuzz::scratch_path("checkpoint.ckpt");
  tessera::fuzz::write_bytes(path, reinterpret_cast<const std::uint8_t*>(file.data()), file.size());
  return tessera::fuzz::run_one("checkpoint", [&] {
    const tessera::nn::CheckpointData ckpt = tessera::nn::load_checkpoint(path);
    // Touch every byte of every tensor: a view past the file image is an AddressSanitizer report.
    std::uint64_t sum = 0;
    for (const auto& [name, t] : ckpt.tensors)
      sum ^= tessera::core::fnv1a64({static_cast<const char*>(t.raw_data()), t.nbytes()});
    (void)sum;
  });
}
