// Model JSON files: what to_json writes reads back, and inputs the fuzzer (tests/fuzz) found
// refused with an InvalidArgument that names the file.
#include <string>

#include "support/test_utils.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/models.hpp"

using namespace tessera;
using Catch::Matchers::Contains;
using test::error_of;

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

TEST_CASE("model json: regnet bottleneck ratios and design parameters out of range are refused", "[nn][model_json]") {
  // fuzz_model_json: a bottleneck_ratio of 0 made validate() take a remainder by zero; the design
  // space's parameters had no upper bounds (a huge depth looped for ever, widths overflowed int).
  auto error = [](const std::string& fields) {
    return error_of([&] { nn::model_from_json(R"({"family": "regnet", )" + fields + "}", "m.json"); });
  };
  REQUIRE_THAT(error(R"("depths": [1, 1, 4, 7], "widths": [24, 56, 152, 368], "bottleneck_ratio": 0.0)"),
               Contains("field 'bottleneck_ratio' 0 must be in (0, 16]"));
  REQUIRE_THAT(error(R"("depths": [1], "widths": [24], "bottleneck_ratio": 0.01)"),
               Contains("width 24 times field 'bottleneck_ratio' 0.01 gives 0.24 channels"));
  REQUIRE_THAT(error(R"("depths": [1], "widths": [2000000000], "bottleneck_ratio": 2)"),
               Contains("width 2000000000 times field 'bottleneck_ratio' 2"));
  REQUIRE_THAT(error(R"("depth": 2000000000, "w0": 48, "wa": 27.89, "wm": 2.09)"), Contains("need depth in [1, 1000]"));
  REQUIRE_THAT(error(R"("depth": 16, "w0": 48, "wa": 27.89, "wm": 2.09, "bottleneck_ratio": 0)"),
               Contains("bottleneck_ratio 0 must be in (0, 16]"));
  REQUIRE_THAT(error(R"("depth": 16, "w0": 48, "wa": 27.89, "wm": 2.09, "group_width": 0)"),
               Contains("group_width 0 must be positive"));
  REQUIRE_THAT(error(R"("depth": 16, "w0": 1e12, "wa": 27.89, "wm": 2.09)"), Contains("w0 in (0, 1048576]"));
  REQUIRE(nn::model_from_json(R"({"family": "regnet", "depth": 16, "w0": 48, "wa": 27.89, "wm": 2.09})").widths.size() > 1);
  // fuzz_model_json: a rule with wm near 1 makes dozens of stages, and the total stride (2 per
  // stage) shifted past an int.
  REQUIRE_THAT(error(R"("depth": 96, "w0": 48, "wa": 54.89, "wm": 1.09, "group_width": 9, "se_ratio": 0.25)"),
               Contains("stages; at most 16"));
  REQUIRE_THAT(error(R"("depth": 490, "w0": 48, "wa": 27.89, "wm": 1.09, "group_width": 8)"), Contains("at most 16"));
}

TEST_CASE("model json: a multi-camera model reads back and bad views are refused",
          "[nn][model_json]") {
  const nn::ModelSpec cam = nn::model_preset("multicam-atto");
  REQUIRE(cam.views == 6);
  const nn::ModelSpec back = nn::model_from_json(cam.to_json(), "cam.json");
  REQUIRE(back.views == 6);
  REQUIRE(back.fusion_dim == cam.fusion_dim);
  REQUIRE(back.to_json() == cam.to_json());
  // An ordinary model writes neither field, as before they existed.
  REQUIRE_THAT(nn::model_preset("convnext-atto").to_json(), !Contains("views"));
  const std::string base =
      R"({"family": "convnext", "depths": [1, 1, 1, 1], "dims": [8, 8, 8, 8], )";
  REQUIRE_THAT(error_of([&] { nn::model_from_json(base + R"("views": 0})", "m.json"); }),
               Contains("field 'views' 0 must be at least 1"));
  REQUIRE_THAT(
      error_of([&] { nn::model_from_json(base + R"("views": 2, "fusion_dim": 0})", "m.json"); }),
      Contains("field 'fusion_dim' 0 must be in [1, 1048576]"));
  REQUIRE_THAT(
      error_of([&] { nn::model_from_json(base + R"("views": 2, "task": "segment"})", "m.json"); }),
      Contains("need task classify"));
}
