// Fuzz target: safetensors files (nn::read_safetensors, which reads a path: the input goes to a
// per-process scratch file). An accepted file must write back (write_safetensors) and read again
// to the same names, dtypes, shapes and bytes.
#include <string>

#include "fuzz_support.hpp"
#include "tessera/nn/weights.hpp"

namespace {

std::string bytes(const tessera::core::Tensor& t) {
  return std::string(static_cast<const char*>(t.raw_data()), t.nbytes());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = tessera::fuzz::scratch_path("weights.safetensors");
  static const std::string again = tessera::fuzz::scratch_path("again.safetensors");
  tessera::fuzz::write_bytes(path, data, size);
  return tessera::fuzz::run_one("safetensors", [&] {
    std::map<std::string, std::string> meta;
    const tessera::nn::NamedTensors ts = tessera::nn::read_safetensors(path, &meta);
    std::vector<std::pair<std::string, const tessera::core::Tensor*>> ptrs;
    for (const auto& [n, t] : ts) ptrs.emplace_back(n, &t);
    tessera::nn::write_safetensors(again, ptrs, meta);
    std::map<std::string, std::string> meta2;
    const tessera::nn::NamedTensors back = tessera::nn::read_safetensors(again, &meta2);
    bool same = back.size() == ts.size() && meta2 == meta;
    for (std::size_t i = 0; same && i < ts.size(); ++i)
      same = back[i].first == ts[i].first && back[i].second.dtype() == ts[i].second.dtype() &&
             back[i].second.shape() == ts[i].second.shape() &&
             bytes(back[i].second) == bytes(ts[i].second);
    if (!same)
      tessera::fuzz::finding("safetensors", "an accepted file does not read back after writing it");
  });
}
