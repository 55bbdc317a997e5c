// Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) from the same objects the
// unit tests build: presets and hand-made values serialised by tessera's own writers, plus a few
// hand-written texts taken from the tests. Run by hand after a format changes:
//   build/fuzz/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fuzz_support.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/core/trace.hpp"
#include "tessera/nn/checkpoint.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/sim/calibration.hpp"
#include "tessera/sim/devices.hpp"
#include "tessera/sim/topology.hpp"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

fs::path root;

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(root / target);
  std::ofstream(root / target / name, std::ios::binary) << bytes;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using tessera::fuzz::npy_bytes;

template <class T>
std::string raw(std::initializer_list<T> v) {
  return std::string(reinterpret_cast<const char*>(std::data(v)), v.size() * sizeof(T));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR\n");
    return 2;
  }
  root = argv[1];

  // Model JSON: presets of both families.
  for (const char* m : {"convnext-atto", "regnetx-200mf", "regnety-400mf"})
    seed("model_json", m, nn::model_preset(m).to_json());
  seed("model_json", "regnet-design-space",
       R"({"family": "regnet", "depth": 16, "w0": 48, "wa": 27.89, "wm": 2.09, "group_width": 8, "se_ratio": 0.25})");

  // Topology JSON: presets plus the hand-written file of topology_json_test.
  for (std::string t : {"dgx-a100", "cpu-host:2"}) {  // (the fat trees are large seeds: 15 KB and up)
    const std::string text = sim::Topology::preset(t).to_json();
    std::replace(t.begin(), t.end(), ':', '-');
    seed("topology_json", t, text);
  }
  seed("topology_json", "pair", R"({"name": "pair", "nodes": [
  {"name": "g0", "kind": "gpu", "device": "h100-sxm", "host": 0},
  {"name": "g1", "kind": "gpu", "device": "h100-sxm", "host": 1},
  {"name": "sw", "kind": "net_switch", "host": -1}],
 "links": [{"a": "g0", "b": "sw", "bw_GBps": 50, "latency_us": 1.25, "kind": "ib"},
           {"a": "g1", "b": "sw", "bw_GBps": 12.5, "latency_us": 0.5}]})");

  // Device files: a built-in entry written out, and devices_test's file.
  const sim::DeviceCatalog catalog;
  seed("devices", "h200", catalog.to_json({"h200"}));
  seed("devices", "cpu-host", catalog.to_json({"cpu-host"}));
  seed("devices", "added", R"({"devices": [
    {"name": "mi300x", "peak_fp32_tflops": 163.4, "mem_bw_GBps": 5300, "capacity_GB": 192,
     "source": "AMD datasheet"},
    {"name": "cpu-host", "eff_gemm": 0.5, "shm_bw_GBps": 11}]})");

  // Calibration: calibration_test's hand-made calibration with every field set.
  {
    sim::Calibration c;
    sim::DeviceCatalog cat;
    c.device = cat.get("cpu-host");
    c.device.source = "hand-made";
    c.concurrent_ranks = 2;
    c.quick = true;
    c.host = "testhost";
    c.created_utc = "2025-01-31T12:00:00Z";
    c.link = {7e-6, 4e9, 8e-6, 3e9};
    c.host_overhead_s = 1.25e-6;
    c.waits = {40e-6, 16e-6};
    c.cpu_share = 0.75;
    cat.add(c.device);
    c.topology = sim::Topology::preset("cpu-host:2", cat);
    sim::KernelCalibration pw;
    pw.rate = {50e9, 8e9, 3e-6, 20e-9};
    pw.samples = {{1e6, 1e5, 40e-6, false, 512}, {2e6, 3e5, 80e-6, true, 1024}};
    c.kernels["conv2d_forward/pointwise"] = pw;
    sim::KernelCalibration add;
    add.rate = {0, 12e9, 0.5e-6};
    add.samples = {{1e3, 1.2e4, 1.5e-6, false}};
    c.kernels["add"] = add;
    seed("calibration", "hand-made", sim::calibration_to_json(c));
    c.device_copy = {"cuda:0 (NVIDIA H200, 139 GiB)", 3e12, 2e10, 2e10};
    seed("calibration", "device-copy", sim::calibration_to_json(c));
  }

  // Chrome traces: every event kind write_chrome_trace writes.
  {
    std::vector<core::TraceEvent> ev(4);
    ev[0].name = ev[0].op = "conv2d_forward";
    ev[0].cat = "compute";
    ev[0].ts_us = 1.5;
    ev[0].dur_us = 2.25;
    ev[0].layer = "stem.conv";
    ev[0].bytes = 4096;
    ev[0].flops = 1e6;
    ev[1].name = "all_reduce";
    ev[1].cat = "comm";
    ev[1].tid = core::kLaneComm;
    ev[1].ts_us = 4;
    ev[1].dur_us = 8;
    ev[1].bytes = 1024;
    ev[1].coords = {0, 1};
    ev[1].critical = true;
    ev[2].name = "halo";
    ev[2].cat = "halo";
    ev[2].pid = 1;
    ev[2].tid = core::kLaneHaloBase;
    ev[2].peer = 0;
    ev[2].flow_id = "0x1a";
    ev[2].flow_out = true;
    ev[3].ph = 'C';
    ev[3].name = "memory";
    ev[3].cat = "memory";
    ev[3].ts_us = 3;
    ev[3].counters = {{"activation", 1e6}, {"parameter", 2e5}};
    std::ostringstream os;
    core::write_chrome_trace(os, ev, {{0, "rank 0 (0,0)"}, {1, "rank 1 (0,1)"}}, {{"model", "convnext-atto"}, {"mesh", "sp=2"}});
    seed("chrome_trace", "events", os.str());
  }

  // Checkpoints: two small tensors and metadata, and an empty one. The fuzz target reads the first
  // byte as its mode (even: fix up sizes and checksums), so seeds come in both modes.
  {
    const fs::path tmp = fs::temp_directory_path() / ("tessera_fuzz_seed_" + std::to_string(::getpid()));
    float w[6] = {1, 2, 3, 4, 5, 6};
    std::int64_t step[1] = {7};
    const core::Tensor a = core::Tensor::from_blob(w, {2, 3}, core::DType::F32, nullptr);
    const core::Tensor b = core::Tensor::from_blob(step, {1}, core::DType::I64, nullptr);
    nn::save_checkpoint(tmp.string(), {{"model", "convnext-atto"}, {"step", "7"}}, {{"w", &a}, {"step", &b}});
    const std::string two = read(tmp);
    nn::save_checkpoint(tmp.string(), {}, {});
    const std::string empty = read(tmp);
    fs::remove(tmp);
    seed("checkpoint", "two-tensors-fixup", std::string(1, '\0') + two);
    seed("checkpoint", "two-tensors-as-is", std::string(1, '\1') + two);
    seed("checkpoint", "empty-as-is", std::string(1, '\1') + empty);
  }

  // .npy: the first byte picks the role (even: the image, odd: labels.npy).
  seed("npy", "image", std::string(1, '\0') + npy_bytes("<f4", "(1, 2, 2)", raw<float>({0.5f, 1, 2, 3})));
  seed("npy", "labels-classify", std::string(1, '\1') + npy_bytes("<i8", "(1,)", raw<std::int64_t>({2})));
  seed("npy", "labels-segment", std::string(1, '\1') + npy_bytes("<i8", "(1, 2, 2)", raw<std::int64_t>({0, 1, -1, 3})));

  // Store requests (docs/launching.md): op code, then fields; each framed by a u32 length. The
  // first byte picks the mode (0: greeting sent first, 2: as a rank; 1: no greeting; 4: with a
  // heartbeat deadline).
  {
    auto u32 = [](std::uint32_t v) { return raw<std::uint32_t>({v}); };
    auto i64 = [](std::int64_t v) { return raw<std::int64_t>({v}); };
    auto str = [&](const std::string& s) { return u32(static_cast<std::uint32_t>(s.size())) + s; };
    auto frame = [&](const std::string& body) { return u32(static_cast<std::uint32_t>(body.size())) + body; };
    const std::string set = frame("\x01" + str("k") + str("v"));
    const std::string get = frame("\x02" + str("k") + i64(0));
    const std::string add = frame("\x03" + str("n") + i64(5));
    const std::string check = frame("\x04" + str("k"));
    const std::string erase = frame("\x05" + str("k"));
    const std::string bye = frame(std::string(1, '\x06'));
    const std::string beat = frame("\x07" + i64(0));
    seed("store_wire", "requests", std::string(1, '\0') + set + get + add + add + check + erase + check + bye);
    seed("store_wire", "rank-requests", std::string(1, '\2') + set + get + add + bye);
    seed("store_wire", "rank-heartbeats", std::string(1, '\6') + beat + set + beat + get + bye);
    seed("store_wire", "greeting",
         std::string(1, '\1') + u32(0x52535354) +
             frame(u32(2) + str("fuzz-token") + i64(3) + std::string(1, '\1')) + check + bye);
  }
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
