// calibrate as a function: settings refused before anything is measured, and a quick measurement
// of this machine's cpu backend on one rank, written to the file and read back.
#include <filesystem>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/calibrate.hpp"
#include "tessera/sim/calibration.hpp"

using namespace tessera;

namespace {

std::string refusal(const run::CalibrateRequest& q) {
  try {
    run::calibrate(q, {});
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("calibrate: settings out of range are refused before measuring", "[run]") {
  run::CalibrateRequest q;
  q.out = (std::filesystem::temp_directory_path() / "tessera_calibrate_refused.json").string();
  q.threads = 0;
  REQUIRE(refusal(q) == "--threads 0 must be from 1 to 256");
  q.threads = 1;
  q.ranks = 65;
  REQUIRE(refusal(q) == "--ranks 65 must be from 1 to 64");
  q.ranks = 1;
  q.device = "cuda:x";
  REQUIRE(refusal(q) ==
          "calibrate --device 'cuda:x': expected cpu, cuda or cuda:N (N a device index)");
  q.device = "cpu";
  q.tf32 = true;
  REQUIRE(refusal(q) == "calibrate --tf32 applies to --device cuda (the cpu backend has no TF32)");
  q.tf32 = false;
  q.precisions = "fp32,bf17";
  REQUIRE(refusal(q) ==
          "calibrate --precisions 'fp32,bf17': 'bf17' is not fp32, bf16 or fp16 (e.g. --precisions "
          "fp32,bf16)");
  q.precisions = "bf16";
  REQUIRE(refusal(q).find("must include fp32") != std::string::npos);
  REQUIRE_FALSE(std::filesystem::exists(q.out));
}

TEST_CASE("calibrate: a quick cpu measurement is written and reads back", "[run]") {
  run::CalibrateRequest q;
  q.out = (std::filesystem::temp_directory_path() / "tessera_calibrate_quick.json").string();
  q.quick = true;
  std::filesystem::remove(q.out);
  std::vector<std::string> progress;
  const run::CalibrateResult r =
      run::calibrate(q, [&](const std::string& line) { progress.push_back(line); });
  REQUIRE(r.writer);
  REQUIRE_FALSE(r.gpu);
  REQUIRE_FALSE(progress.empty());
  REQUIRE_FALSE(r.calibration.kernels.empty());
  for (const auto& [name, k] : r.calibration.kernels) {
    INFO(name);
    REQUIRE_FALSE(k.samples.empty());
  }
  const sim::Calibration back = sim::load_calibration(q.out);
  REQUIRE(back.kernels.size() == r.calibration.kernels.size());
  REQUIRE(back.device.name == r.calibration.device.name);
  std::filesystem::remove(q.out);
}
