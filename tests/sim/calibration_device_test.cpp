// Calibration of a GPU (tessera calibrate --device cuda) without one: the GPU's model name from
// its memory description, the catalog entry it maps to, the file's device_copy field, and a GPU
// calibration named after its catalog model replacing that entry for the hgx-h200 preset.
#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/sim/calibrate.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;

namespace {

Calibration gpu_calibration() {
  Calibration c;
  DeviceCatalog catalog;
  c.device = catalog.get("h200");
  c.device.mem_bw_bytes_per_s = 3.9e12;  // measured: below the datasheet's 4.8 TB/s
  c.device.launch_overhead_s = 4e-6;
  c.device.source = "hand-made GPU calibration";
  c.host = "gpuhost";
  c.created_utc = "2026-12-01T17:00:00Z";
  c.link = {7e-6, 4e9, 8e-6, 3e9};
  c.topology = Topology::preset("cpu-host:2", catalog);
  c.device_copy = {"cuda:0 (NVIDIA H200, 139 GiB)", 3.9e12, 20e9, 18e9};
  KernelCalibration dw;
  dw.rate = {2e12, 3e12, 6e-6, 0};
  dw.samples = {{1e9, 2e8, 40e-6, false, 0}};
  c.kernels["conv2d_forward/depthwise"] = dw;
  return c;
}

}  // namespace

TEST_CASE("a GPU's model name comes from its memory description", "[sim][calibration]") {
  REQUIRE(device_model_name("cuda:0 (NVIDIA H200, 139 GiB)") == "h200");
  REQUIRE(device_model_name("cuda:1 (NVIDIA H100 80GB HBM3, 79 GiB)") == "h100");
  REQUIRE(device_model_name("cuda:0 (NVIDIA GeForce RTX 4090, 23 GiB)") == "rtx");
  REQUIRE(device_model_name("cuda:0 (NVIDIA A100-SXM4-80GB, 79 GiB)") == "a100-sxm4-80gb");
  REQUIRE(device_model_name("weird") == "weird");
  const DeviceCatalog catalog;
  REQUIRE(catalog_device_for("h200", catalog) == "h200");
  REQUIRE(catalog_device_for("h100", catalog) == "h100-sxm");
  REQUIRE(catalog_device_for("a100", catalog).empty());  // a100-40gb and a100-80gb: ambiguous
  REQUIRE(catalog_device_for("b200", catalog) == "b200");
  REQUIRE(catalog_device_for("gh200", catalog).empty());
}

TEST_CASE("a GPU calibration round-trips its device copies and replaces the catalog's h200",
          "[sim][calibration]") {
  const Calibration c = gpu_calibration();
  const std::string text = calibration_to_json(c);
  REQUIRE(text.find("\"device_copy\"") != std::string::npos);
  const Calibration back = calibration_from_json(text, "gpu round trip");
  REQUIRE(calibration_to_json(back) == text);
  REQUIRE(back.device_copy.memory == "cuda:0 (NVIDIA H200, 139 GiB)");
  REQUIRE(std::abs(back.device_copy.d2d_bw_bytes_per_s / 3.9e12 - 1) < 1e-12);
  REQUIRE(std::abs(back.device_copy.h2d_bw_bytes_per_s / 20e9 - 1) < 1e-12);
  REQUIRE(std::abs(back.device_copy.d2h_bw_bytes_per_s / 18e9 - 1) < 1e-12);

  DeviceCatalog catalog;
  EngineOptions eo;
  apply_calibration(back, catalog, eo);
  REQUIRE(eo.kernel_rates_device == "h200");
  REQUIRE(eo.kernel_rates.count("conv2d_forward/depthwise") == 1);
  const Topology hgx = Topology::preset("hgx-h200", catalog);
  REQUIRE(hgx.devices().size() == 8);
  REQUIRE(catalog.get("h200").mem_bw_bytes_per_s == 3.9e12);  // the measured figure, not the datasheet's

  // A host calibration has no device_copy field; a malformed one is refused naming the field.
  std::string bad = text;
  bad.replace(bad.find("\"h2d_GBps\""), 10, "\"h2d_gbps\"");
  REQUIRE(error_of([&] { calibration_from_json(bad, "bad file"); }).find("h2d_gbps") != std::string::npos);
}
