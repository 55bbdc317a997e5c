// Model JSON files: what to_json writes reads back, and inputs the fuzzer (tests/fuzz) found
// refused with an InvalidArgument that names the file.
#include <string>

#include "support/test_utils.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/models.hpp"

using namespace tessera;
using Catch::Matchers::Contains;

namespace {

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(not InvalidArgument) ") + e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("model json: a preset written with to_json reads back", "[nn][model_json]") {
  const nn::ModelSpec atto = nn::model_preset("convnext-atto");
  const nn::ModelSpec back = nn::model_from_json(atto.to_json(), "atto.json");
  REQUIRE(back.to_json() == atto.to_json());
}

TEST_CASE("model json: a number beyond double is refused as invalid JSON", "[nn][model_json]") {
  // fuzz_model_json's first finding: nlohmann throws out_of_range (not parse_error) for a number
  // that overflows a double, and it escaped model_from_json as a non-tessera exception.
  REQUIRE_THAT(error_of([] { nn::model_from_json("3333E33666666", "m.json"); }), Contains("m.json: not valid JSON"));
  REQUIRE_THAT(error_of([] { nn::model_from_json(R"({"family": "convnext", "drop_path": 1e999})", "m.json"); }),
               Contains("m.json: not valid JSON"));
}
