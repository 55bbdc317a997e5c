// Fuzz target: model JSON (nn::model_from_json), and the round trip through ModelSpec::to_json.
#include <string>

#include "fuzz_support.hpp"
#include "tessera/nn/models.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return tessera::fuzz::run_one("model_json", [&] {
    const tessera::nn::ModelSpec spec = tessera::nn::model_from_json(text, "fuzz input");
    spec.validate();
    (void)spec.total_stride();
    const std::string again = spec.to_json();
    try {
      (void)tessera::nn::model_from_json(again, "round trip");
    } catch (const tessera::Error& e) {
      tessera::fuzz::finding("model_json", std::string("an accepted model does not read back: ") + e.what());
    }
  });
}
