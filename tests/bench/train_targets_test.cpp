// Issue 37's ratios as bench_train gives them (bench/train_targets.hpp): which rows each divides
// (libtorch's faster form), the value against a hand division, and why a ratio is missing.
#include <nlohmann/json.hpp>

#include "support/catch.hpp"
#include "train_targets.hpp"

using namespace tessera::bench;

namespace {

TargetRows full_rows() {
  TargetRows r;
  r.tessera_fp32 = TimedRow{"tessera fp32 (P=1, checkpointing none)", 2900};
  r.tessera_bf16 = TimedRow{"tessera bf16 (P=1, checkpointing none)", 1800};
  r.torch_fp32 = {{"libtorch fp32 NCHW", 4200}, {"libtorch fp32 channels-last", 3900}};
  r.torch_bf16 = {{"libtorch bf16 autocast NCHW", 2500},
                  {"libtorch bf16 autocast channels-last", 2700}};
  return r;
}

}  // namespace

TEST_CASE("issue37_ratios divides the named rows, libtorch at its faster form", "[bench]") {
  const std::vector<TargetRatio> t = issue37_ratios(full_rows());
  REQUIRE(t.size() == 3);
  CHECK(t[0].key == "bf16_over_fp32");
  REQUIRE(t[0].value);
  CHECK(*t[0].value == Approx(1800.0 / 2900.0).epsilon(1e-12));
  CHECK(t[0].numerator == "tessera bf16 (P=1, checkpointing none)");
  CHECK(t[0].denominator == "tessera fp32 (P=1, checkpointing none)");
  CHECK(t[0].note.find("no AMX") != std::string::npos);

  CHECK(t[1].key == "bf16_speedup_vs_torch_autocast");
  REQUIRE(t[1].value);
  CHECK(t[1].numerator == "libtorch bf16 autocast NCHW");  // 2500 < 2700
  CHECK(*t[1].value == Approx(2500.0 / 1800.0).epsilon(1e-12));

  CHECK(t[2].key == "fp32_speedup_vs_torch_best");
  REQUIRE(t[2].value);
  CHECK(t[2].numerator == "libtorch fp32 channels-last");  // 3900 < 4200
  CHECK(t[2].denominator == "tessera fp32 (P=1, checkpointing none)");
  CHECK(*t[2].value == Approx(3900.0 / 2900.0).epsilon(1e-12));
}

TEST_CASE("issue37_ratios says why a ratio is missing", "[bench]") {
  TargetRows r = full_rows();
  r.tessera_bf16.reset();
  r.torch_bf16.clear();
  std::vector<TargetRatio> t = issue37_ratios(r);
  CHECK_FALSE(t[0].value);
  CHECK(t[0].why_not.find("--precision bf16") != std::string::npos);
  CHECK_FALSE(t[1].value);
  CHECK(t[1].why_not.find("--precision bf16") != std::string::npos);
  CHECK(t[2].value);

  r = full_rows();
  r.torch_refused = "libtorch runs on the reference BLAS";
  t = issue37_ratios(r);
  CHECK(t[0].value);  // tessera against itself: not refused
  CHECK_FALSE(t[1].value);
  CHECK_FALSE(t[2].value);
  CHECK(t[2].why_not == "libtorch runs on the reference BLAS");

  r = full_rows();
  r.torch_fp32.clear();
  r.torch_bf16.clear();
  t = issue37_ratios(r);
  CHECK_FALSE(t[2].value);
  CHECK(t[2].why_not.find("not measured") != std::string::npos);
}

TEST_CASE("target_met reads the bound and its direction", "[bench]") {
  CHECK(target_met("<= 0.55", 0.55));
  CHECK_FALSE(target_met("<= 0.55", 0.5501));
  CHECK(target_met(">= 1.3", 1.3));
  CHECK_FALSE(target_met(">= 1.3", 1.2999));
  TargetRows r = full_rows();
  r.amx = true;
  CHECK(issue37_ratios(r)[0].note.find("applies") != std::string::npos);
}

TEST_CASE("target_json gives value, rows, target and met, null without a value", "[bench]") {
  TargetRows r = full_rows();
  const std::vector<TargetRatio> t = issue37_ratios(r);
  const auto j = nlohmann::json::parse(target_json(t[2]));
  CHECK(j["value"].get<double>() == Approx(3900.0 / 2900.0).epsilon(1e-5));
  CHECK(j["of"] == "libtorch fp32 channels-last");
  CHECK(j["over"] == "tessera fp32 (P=1, checkpointing none)");
  CHECK(j["target"] == ">= 1.3");
  CHECK(j["met"] == true);
  CHECK(j["why_not"].is_null());
  CHECK(nlohmann::json::parse(target_json(t[0]))["met"] == false);  // 0.62 > 0.55

  r.tessera_fp32.reset();
  const auto missing = nlohmann::json::parse(target_json(issue37_ratios(r)[0]));
  CHECK(missing["value"].is_null());
  CHECK(missing["met"].is_null());
  CHECK(missing["why_not"].get<std::string>().find("fp32") != std::string::npos);
}
