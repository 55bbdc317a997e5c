// Device catalog: datasheet figures, JSON add/replace/round trip, malformed files refused.
#include "sim_test_util.hpp"
#include "tessera/sim/devices.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;

TEST_CASE("the built-in catalog carries the datasheet figures", "[sim]") {
  const DeviceCatalog c;
  REQUIRE(c.names() == std::vector<std::string>{"a100-40gb", "a100-80gb", "b200", "cpu-host",
                                                "gb200", "h100-sxm", "h20", "h200", "l40s",
                                                "mi300x", "mi325x", "mi355x", "rtx3090", "rtx4090",
                                                "v100"});
  const DeviceSpec& a40 = c.get("a100-40gb");
  REQUIRE(a40.peak_fp32_flops == 19.5e12);
  REQUIRE(a40.peak_tf32_flops == 156e12);
  REQUIRE(a40.peak_bf16_flops == 312e12);
  REQUIRE(a40.mem_bw_bytes_per_s == 1555e9);
  REQUIRE(a40.capacity_bytes == 40.0 * (1 << 30));
  REQUIRE(c.get("a100-80gb").mem_bw_bytes_per_s == 2039e9);
  REQUIRE(c.get("a100-80gb").capacity_bytes == 80.0 * (1 << 30));
  REQUIRE(c.get("h100-sxm").peak_fp32_flops == 67e12);
  REQUIRE(c.get("h200").mem_bw_bytes_per_s == 4.8e12);
  REQUIRE(c.get("h200").capacity_bytes > 140e9);
  REQUIRE(c.get("v100").peak_tf32_flops == 0);
  REQUIRE(c.get("cpu-host").kind == "cpu");
  REQUIRE(c.get("cpu-host").shm_bw_bytes_per_s == 13e9);
  for (const auto& n : c.names()) {
    const DeviceSpec& d = c.get(n);
    REQUIRE(!d.source.empty());
    REQUIRE(d.peak_bf16_flops >= d.peak_tf32_flops);
  }
  REQUIRE(lacks(error_of([&] { c.get("tpu"); }), {"unknown device \"tpu\"", "h100-sxm"}) == "");
}

TEST_CASE("the devices people buy now carry their dense datasheet figures and sources", "[sim]") {
  const DeviceCatalog c;
  for (const char* name : {"b200", "gb200", "h20", "mi300x", "mi325x", "mi355x", "l40s"}) {
    INFO(name);
    const DeviceSpec& d = c.get(name);
    REQUIRE(d.kind == "gpu");
    REQUIRE(d.peak_fp32_flops > 0);
    REQUIRE(d.peak_bf16_flops > d.peak_fp32_flops);
    REQUIRE(d.mem_bw_bytes_per_s > 0);
    REQUIRE(d.capacity_bytes > 0);
    REQUIRE(d.source.size() > 40);
    REQUIRE(d.eff_gemm == DeviceSpec{}.eff_gemm);  // defaults: no datasheet gives efficiencies
    REQUIRE(d.launch_overhead_s == DeviceSpec{}.launch_overhead_s);
  }
  REQUIRE(c.get("b200").peak_bf16_flops == 2250e12);  // 4.5 PFLOP/s with sparsity, halved
  REQUIRE(c.get("b200").capacity_bytes == 180e9);
  REQUIRE(c.get("gb200").peak_tf32_flops == 1250e12);
  REQUIRE(c.get("gb200").capacity_bytes == 186e9);
  REQUIRE(c.get("h20").peak_bf16_flops == 148e12);
  REQUIRE(c.get("h20").mem_bw_bytes_per_s == 4e12);
  REQUIRE(c.get("mi300x").peak_bf16_flops == 1307.4e12);
  REQUIRE(c.get("mi300x").peak_fp32_flops == 163.4e12);
  REQUIRE(c.get("mi325x").capacity_bytes == 256e9);
  REQUIRE(c.get("mi355x").peak_tf32_flops == 0);  // CDNA 4 has no TF32: --tf32 times FP32
  REQUIRE(c.get("mi355x").mem_bw_bytes_per_s == 8e12);
  REQUIRE(c.get("l40s").mem_bw_bytes_per_s == 864e9);
  REQUIRE(c.get("l40s").capacity_bytes == 48e9);
}

TEST_CASE("the catalog round-trips through JSON", "[sim]") {
  const DeviceCatalog c;
  DeviceCatalog back;
  back.add_from_json(c.to_json(), "round trip");
  REQUIRE(back.to_json() == c.to_json());
  for (const auto& n : c.names()) {
    const DeviceSpec &a = c.get(n), &b = back.get(n);
    REQUIRE(a.kind == b.kind);
    REQUIRE(a.peak_fp32_flops == b.peak_fp32_flops);
    REQUIRE(a.peak_tf32_flops == b.peak_tf32_flops);
    REQUIRE(a.peak_bf16_flops == b.peak_bf16_flops);
    REQUIRE(a.mem_bw_bytes_per_s == b.mem_bw_bytes_per_s);
    REQUIRE(a.capacity_bytes == b.capacity_bytes);
    REQUIRE(a.eff_gemm == b.eff_gemm);
    REQUIRE(a.launch_overhead_s == b.launch_overhead_s);
    REQUIRE(a.shm_latency_s == b.shm_latency_s);
    REQUIRE(a.source == b.source);
  }
  REQUIRE(c.to_json({"v100"}).find("a100") == std::string::npos);
}

TEST_CASE("device files add entries and replace the fields they give", "[sim]") {
  DeviceCatalog c;
  c.add_from_json(R"({"devices": [
    {"name": "lab-gpu", "peak_fp32_tflops": 163.4, "mem_bw_GBps": 5300, "capacity_GB": 192,
     "source": "lab measurement"},
    {"name": "cpu-host", "eff_gemm": 0.5, "shm_bw_GBps": 11}]})");
  REQUIRE(c.get("lab-gpu").mem_bw_bytes_per_s == 5.3e12);
  REQUIRE(c.get("lab-gpu").capacity_bytes == 192e9);
  REQUIRE(c.get("lab-gpu").kind == "gpu");
  REQUIRE(c.get("cpu-host").eff_gemm == 0.5);
  REQUIRE(c.get("cpu-host").shm_bw_bytes_per_s == 11e9);
  REQUIRE(c.get("cpu-host").peak_fp32_flops == 432e9);  // kept
}

TEST_CASE("malformed device files are refused, naming the entry and field", "[sim]") {
  struct Case {
    std::string text;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"{", {"dev.json", "not valid JSON"}},
      {"{\"devices\": 1e999}", {"dev.json", "not valid JSON", "number overflow"}},  // as fuzz_model_json found
      {R"({"gpus": []})", {"unknown field \"gpus\""}},
      {R"({})", {"missing field \"devices\""}},
      {R"({"devices": {}})", {"\"devices\" must be an array"}},
      {R"({"devices": [{"peak_fp32_tflops": 1}]})", {"devices[0]", "missing field \"name\""}},
      {R"({"devices": [{"name": "x", "peak_fp32_tflops": 1, "capacity_GB": 8}]})",
       {"devices[0] (\"x\")", "missing field \"mem_bw_GBps\""}},
      {R"({"devices": [{"name": "h200", "mem_bw_GBps": "4.8 TB/s"}]})",
       {"devices[0] (\"h200\")", "\"mem_bw_GBps\" must be a number"}},
      {R"({"devices": [{"name": "h200", "capacity_GB": -1}]})", {"\"capacity_GB\" is -1"}},
      {R"({"devices": [{"name": "h200", "eff_gemm": 1.5}]})", {"devices[0]", "efficiency 1.5"}},
      {R"({"devices": [{"name": "h200", "kind": "fpga"}]})", {"devices[0]", "kind \"fpga\""}},
      {R"({"devices": [{"name": "h200", "flops": 3}]})", {"devices[0]", "unknown field \"flops\""}},
      {R"({"devices": [{"name": "ok", "peak_fp32_tflops": 1, "mem_bw_GBps": 1, "capacity_GB": 1},
                       {"name": "bad", "peak_fp32_tflops": 0, "mem_bw_GBps": 1, "capacity_GB": 1}]})",
       {"devices[1]", "must be positive"}},
  };
  for (const Case& c : cases) {
    DeviceCatalog cat;
    REQUIRE(lacks(error_of([&] { cat.add_from_json(c.text, "dev.json"); }), c.says) == "");
    REQUIRE(cat.to_json() == DeviceCatalog{}.to_json());  // nothing changed
  }
}
