// Calibration: kernel classes, the rate fit, measured rates in the engine, the calibration file
// (round trip, every kind of malformed input refused naming the field), apply_calibration, and a
// quick real calibration of this machine that loads back.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/sim/calibrate.hpp"
#include "tessera/sim/kernel_class.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;

namespace {

std::string conv_class(compute::OpKind kind, int k, int stride, int pad, int groups, int cin, int cout) {
  const int h = 8;
  core::Tensor x = core::Tensor::empty({1, cin, h, h});
  core::Tensor w = core::Tensor::empty({cout, cin / groups, k, k});
  core::Tensor y = core::Tensor::empty({1, cout, (h + 2 * pad - k) / stride + 1, (h + 2 * pad - k) / stride + 1});
  compute::OpCall c;
  c.kind = kind;
  c.conv.kernel_h = c.conv.kernel_w = k;
  c.conv.stride_h = c.conv.stride_w = stride;
  c.conv.pad_h = c.conv.pad_w = pad;
  c.conv.groups = groups;
  if (kind == compute::OpKind::Conv2dBackwardWeight) {
    c.in = {&x, &y};
    c.out = {&w};
  } else {
    c.in = {kind == compute::OpKind::Conv2dForward ? &x : &y, &w};
    c.out = {kind == compute::OpKind::Conv2dForward ? &y : &x};
  }
  return kernel_class(c);
}

/// A calibration built by hand (no measurement), with every field set.
Calibration sample_calibration() {
  Calibration c;
  DeviceCatalog catalog;
  c.device = catalog.get("cpu-host");
  c.device.peak_fp32_flops = 94e9;
  c.device.mem_bw_bytes_per_s = 11e9;
  c.device.launch_overhead_s = 1.5e-6;
  c.device.shm_bw_bytes_per_s = 4e9;
  c.device.shm_latency_s = 7e-6;
  c.device.source = "hand-made";
  c.threads_per_rank = 1;
  c.concurrent_ranks = 2;
  c.quick = true;
  c.host = "testhost";
  c.created_utc = "2025-01-31T12:00:00Z";
  c.link = {7e-6, 4e9, 8e-6, 3e9};
  c.host_overhead_s = 1.25e-6;
  c.waits = {40e-6, 16e-6};
  c.cpu_share = 0.75;
  catalog.add(c.device);
  c.topology = Topology::preset("cpu-host:2", catalog);
  KernelCalibration pw;
  pw.rate = {50e9, 8e9, 3e-6, 20e-9};
  pw.samples = {{1e6, 1e5, 40e-6, false, 512}, {2e6, 3e5, 80e-6, true, 1024}};
  c.kernels["conv2d_forward/pointwise"] = pw;
  KernelCalibration add;
  add.rate = {0, 12e9, 0.5e-6};
  add.rate.far_bytes_per_s = 6e9;
  add.rate.near_bytes = 2097152;
  add.samples = {{1e3, 1.2e4, 1.5e-6, false}};
  c.kernels["add"] = add;
  return c;
}

/// The sample calibration's JSON text with the first `from` replaced by `to` (which must occur).
std::string edited(const std::string& from, const std::string& to) {
  std::string s = calibration_to_json(sample_calibration());
  const auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

/// The sample calibration's JSON text with the value of the first field `key` (a number) set to
/// `value`.
std::string with_value(const std::string& key, const std::string& value) {
  std::string s = calibration_to_json(sample_calibration());
  const std::string field = "\"" + key + "\": ";
  const auto pos = s.find(field);
  REQUIRE(pos != std::string::npos);
  const auto begin = pos + field.size();
  const auto end = s.find_first_not_of("+-0123456789.eE", begin);
  return s.replace(begin, end - begin, value);
}

}  // namespace

TEST_CASE("kernel classes name the convolution variant and the activation", "[sim][calibration]") {
  using compute::OpKind;
  REQUIRE(conv_class(OpKind::Conv2dForward, 7, 1, 3, 16, 16, 16) == "conv2d_forward/depthwise");
  REQUIRE(conv_class(OpKind::Conv2dBackwardWeight, 7, 1, 3, 16, 16, 16) == "conv2d_backward_weight/depthwise");
  REQUIRE(conv_class(OpKind::Conv2dForward, 1, 1, 0, 1, 16, 64) == "conv2d_forward/pointwise");
  REQUIRE(conv_class(OpKind::Conv2dBackwardData, 1, 1, 0, 1, 64, 16) == "conv2d_backward_data/pointwise");
  REQUIRE(conv_class(OpKind::Conv2dForward, 1, 2, 0, 1, 16, 32) == "conv2d_forward/dense");
  REQUIRE(conv_class(OpKind::Conv2dForward, 4, 4, 0, 1, 3, 16) == "conv2d_forward/patchify");
  REQUIRE(conv_class(OpKind::Conv2dBackwardWeight, 2, 2, 0, 1, 96, 192) == "conv2d_backward_weight/patchify");
  REQUIRE(conv_class(OpKind::Conv2dForward, 2, 2, 1, 1, 96, 192) == "conv2d_forward/dense");  // padded
  REQUIRE(conv_class(OpKind::Conv2dForward, 3, 2, 1, 1, 3, 16) == "conv2d_forward/dense");
  REQUIRE(conv_class(OpKind::Conv2dForward, 3, 1, 1, 4, 32, 32) == "conv2d_forward/grouped");
  compute::OpCall act;
  act.kind = OpKind::ActivationBackward;
  act.act = compute::Activation::Gelu;
  REQUIRE(kernel_class(act) == "activation_backward/gelu");
  compute::OpCall ln;
  ln.kind = OpKind::LayerNormForward;
  REQUIRE(kernel_class(ln) == "layernorm_forward");
  REQUIRE(kernel_class_op("conv2d_forward/dense") == "conv2d_forward");
  for (const char* good : {"add", "adamw_step", "conv2d_backward_data/grouped", "activation_forward/relu",
                           "conv2d_backward_weight/patchify",
                           "conv2d_forward"})
    REQUIRE(is_kernel_class(good));
  for (const char* bad : {"", "conv2d_forward/winograd", "add/depthwise", "activation_forward/tanh", "matmul"})
    REQUIRE_FALSE(is_kernel_class(bad));
}

TEST_CASE("the rate fit recovers overhead, arithmetic and memory terms", "[sim][calibration]") {
  // t = 2 µs + flops / 20 GFLOP/s + bytes / 5 GB/s, at sizes whose FLOPs and bytes vary apart.
  std::vector<KernelSample> s;
  for (double f : {1e5, 1e6, 4e6})
    for (double b : {1e4, 1e5, 6e5}) s.push_back({f, b, 2e-6 + f / 20e9 + b / 5e9, false});
  const KernelRate r = fit_kernel_rate(s);
  REQUIRE(std::abs(r.overhead_s / 2e-6 - 1) < 1e-6);
  REQUIRE(std::abs(r.flops_per_s / 20e9 - 1) < 1e-6);
  REQUIRE(std::abs(r.bytes_per_s / 5e9 - 1) < 1e-6);
  // A time that does not grow with size is all overhead: no rate terms.
  const KernelRate flat = fit_kernel_rate({{0, 100, 3e-6, false}, {0, 1e5, 3e-6, false}});
  REQUIRE(std::abs(flat.overhead_s / 3e-6 - 1) < 1e-9);
  REQUIRE(flat.flops_per_s == 0);
  REQUIRE(flat.bytes_per_s == 0);
  // No term is negative, whatever the noise: here time falls with bytes.
  const KernelRate odd = fit_kernel_rate({{0, 100, 5e-6, false}, {0, 1e5, 4e-6, false}, {0, 2e5, 4.5e-6, false}});
  REQUIRE(odd.overhead_s > 0);
  REQUIRE(odd.bytes_per_s >= 0);
  REQUIRE(lacks(error_of([] { fit_kernel_rate({}); }), {"no samples"}) == "");
  // A fixed cost per output row: narrow windows (few columns, many rows) pay it in full.
  std::vector<KernelSample> conv;
  for (double rows : {64.0, 512.0, 4096.0})
    for (double cols : {2.0, 16.0, 128.0})
      for (double taps : {9.0, 49.0}) {
        const double f = 2 * rows * cols * taps, b = rows * cols * 8;
        conv.push_back({f, b, 1e-6 + f / 30e9 + b / 10e9 + rows * 50e-9, false, rows});
      }
  const KernelRate rr = fit_kernel_rate(conv);
  REQUIRE(std::abs(rr.row_s / 50e-9 - 1) < 1e-6);
  REQUIRE(std::abs(rr.flops_per_s / 30e9 - 1) < 1e-6);
  REQUIRE(std::abs(rr.bytes_per_s / 10e9 - 1) < 1e-6);
  REQUIRE(std::abs(rr.overhead_s / 1e-6 - 1) < 1e-6);
  // Beyond 2 MB each byte costs 1/30 GB/s more (operands from memory, not the shared cache).
  std::vector<KernelSample> big;
  for (double b : {1e4, 1e5, 1e6, 2e6, 4e6, 8e6, 2e7, 5e7})
    big.push_back({0, b, 1e-6 + b / 25e9 + std::max(0.0, b - 2e6) / 30e9, false});
  const KernelRate fr = fit_kernel_rate(big, 2e6);
  REQUIRE(std::abs(fr.far_bytes_per_s / 30e9 - 1) < 1e-6);
  REQUIRE(std::abs(fr.bytes_per_s / 25e9 - 1) < 1e-6);
  REQUIRE(fr.near_bytes == 2e6);
  for (const KernelSample& s : big) REQUIRE(std::abs(fr.seconds(s.flops, s.bytes, s.rows) / s.seconds - 1) < 1e-6);
  // Without a near size there is no far term, and samples that need none get none.
  REQUIRE(fit_kernel_rate(big).far_bytes_per_s == 0);
  std::vector<KernelSample> linear;
  for (double b : {1e4, 1e6, 8e6, 5e7}) linear.push_back({0, b, 1e-6 + b / 25e9, false});
  REQUIRE(fit_kernel_rate(linear, 2e6).far_bytes_per_s == 0);
}

TEST_CASE("in-step samples set the level of a fitted rate", "[sim][calibration]") {
  // The suite at 2 µs + flops / 20 GFLOP/s; inside steps the same kernels take 1.25× as long.
  KernelCalibration kc;
  for (double f : {1e5, 1e6, 4e6, 1.6e7}) kc.samples.push_back({f, 0, 2e-6 + f / 20e9, false});
  for (double f : {5e5, 2e6}) kc.samples.push_back({f, 0, 1.25 * (2e-6 + f / 20e9), true});
  kc.rate = fit_kernel_rate(kc.samples);
  const KernelRate fitted = kc.rate;
  anchor_to_steps(kc);
  // One factor for every term: the shape of the fit stays, its level moves to the steps'.
  const double f = kc.rate.overhead_s / fitted.overhead_s;
  REQUIRE(f > 1.1);
  REQUIRE(std::abs(fitted.flops_per_s / kc.rate.flops_per_s / f - 1) < 1e-12);
  for (const KernelSample& s : kc.samples) {
    if (!s.in_step) continue;
    const double predicted = kc.rate.overhead_s + s.flops / kc.rate.flops_per_s;
    REQUIRE(std::abs(predicted / s.seconds - 1) < 0.05);
  }
  // Without in-step samples the fit is left as it is.
  KernelCalibration suite_only;
  suite_only.samples = {{1e6, 0, 5e-5, false}, {2e6, 0, 1e-4, false}};
  suite_only.rate = fit_kernel_rate(suite_only.samples);
  const KernelRate before = suite_only.rate;
  anchor_to_steps(suite_only);
  REQUIRE(suite_only.rate.overhead_s == before.overhead_s);
  REQUIRE(suite_only.rate.flops_per_s == before.flops_per_s);
}

TEST_CASE("the engine times a kernel by its measured rate", "[sim][calibration][engine]") {
  const DeviceCatalog cat;
  const DeviceSpec& cpu = cat.get("cpu-host");
  ProgramOp op;
  op.kind = ProgramOp::Kind::Compute;
  op.op = compute::OpKind::Conv2dForward;
  op.name = "conv2d_forward";
  op.kernel = "conv2d_forward/pointwise";
  op.flops = 4e6;
  op.bytes = 200000;
  op.rows = 1000;
  EngineOptions o;
  const Picos roofline = kernel_time_ps(op, cpu, o);
  o.kernel_rates["conv2d_forward/pointwise"] = {40e9, 10e9, 3e-6};
  // 3 µs + 4e6 / 40e9 s (100 µs) + 2e5 / 10e9 s (20 µs) = 123 µs.
  REQUIRE(kernel_time_ps(op, cpu, o) == 123'000'000);
  // 1000 rows at 20 ns each add 20 µs.
  o.kernel_rates["conv2d_forward/pointwise"].row_s = 20e-9;
  REQUIRE(kernel_time_ps(op, cpu, o) == 143'000'000);
  o.kernel_rates["conv2d_forward/pointwise"].row_s = 0;
  // The 100 kB beyond near_bytes at a far rate of 5 GB/s add 20 µs; a call within it pays none.
  o.kernel_rates["conv2d_forward/pointwise"].far_bytes_per_s = 5e9;
  o.kernel_rates["conv2d_forward/pointwise"].near_bytes = 1e5;
  REQUIRE(kernel_time_ps(op, cpu, o) == 143'000'000);
  o.kernel_rates["conv2d_forward/pointwise"].near_bytes = 2e5;
  REQUIRE(kernel_time_ps(op, cpu, o) == 123'000'000);
  o.kernel_rates["conv2d_forward/pointwise"].far_bytes_per_s = 0;
  // The op name is the fallback key; the class wins over it.
  o.kernel_rates["conv2d_forward"] = {1e9, 0, 0};
  REQUIRE(kernel_time_ps(op, cpu, o) == 123'000'000);
  op.kernel = "conv2d_forward/dense";
  REQUIRE(kernel_time_ps(op, cpu, o) == 4'000'000'000);
  // Rates measured on another device leave this one on the roofline.
  o.kernel_rates_device = "a100-80gb";
  REQUIRE(kernel_time_ps(op, cpu, o) == roofline);
}

TEST_CASE("a calibration round-trips through its JSON file", "[sim][calibration]") {
  const Calibration c = sample_calibration();
  const std::string text = calibration_to_json(c);
  const Calibration back = calibration_from_json(text, "round trip");
  REQUIRE(calibration_to_json(back) == text);
  REQUIRE(back.device.name == "cpu-host");
  REQUIRE(back.device.peak_fp32_flops == 94e9);
  REQUIRE(back.device.shm_bw_bytes_per_s == 4e9);
  REQUIRE(std::abs(back.device.shm_latency_s / 7e-6 - 1) < 1e-12);
  REQUIRE(back.device.source == "hand-made");
  REQUIRE(back.threads_per_rank == 1);
  REQUIRE(back.concurrent_ranks == 2);
  REQUIRE(back.quick);
  REQUIRE(back.host == "testhost");
  REQUIRE(back.created_utc == c.created_utc);
  REQUIRE(std::abs(back.link.p2p_bw_bytes_per_s / 4e9 - 1) < 1e-12);
  REQUIRE(std::abs(back.link.all_reduce_latency_s / 8e-6 - 1) < 1e-12);
  REQUIRE(std::abs(back.host_overhead_s / 1.25e-6 - 1) < 1e-12);
  REQUIRE(std::abs(back.waits.p2p_s / 40e-6 - 1) < 1e-12);
  REQUIRE(std::abs(back.waits.collective_s / 16e-6 - 1) < 1e-12);
  REQUIRE(back.cpu_share == 0.75);
  REQUIRE(back.topology.to_json() == c.topology.to_json());
  REQUIRE(back.kernels.size() == 2);
  const KernelCalibration& pw = back.kernels.at("conv2d_forward/pointwise");
  REQUIRE(std::abs(pw.rate.flops_per_s / 50e9 - 1) < 1e-12);
  REQUIRE(std::abs(pw.rate.bytes_per_s / 8e9 - 1) < 1e-12);
  REQUIRE(std::abs(pw.rate.overhead_s / 3e-6 - 1) < 1e-12);
  REQUIRE(std::abs(pw.rate.row_s / 20e-9 - 1) < 1e-12);
  REQUIRE(pw.samples[1].rows == 1024);
  REQUIRE(pw.samples.size() == 2);
  REQUIRE(pw.samples[1].in_step);
  REQUIRE(std::abs(pw.samples[1].seconds / 80e-6 - 1) < 1e-12);
  REQUIRE(back.kernels.at("add").rate.flops_per_s == 0);
  REQUIRE(std::abs(back.kernels.at("add").rate.far_bytes_per_s / 6e9 - 1) < 1e-12);
  REQUIRE(back.kernels.at("add").rate.near_bytes == 2097152);
  REQUIRE(pw.rate.far_bytes_per_s == 0);
  // A file written before the far term (no far_GBps, near_bytes) reads as a rate without one.
  std::string old = text;
  for (const char* field : {"\"far_GBps\": 6.0,", "\"near_bytes\": 2097152.0,"}) {
    const auto at = old.find(field);
    REQUIRE(at != std::string::npos);
    old.erase(at, std::string(field).size());
  }
  const Calibration before_far = calibration_from_json(old, "old.json");
  REQUIRE(before_far.kernels.at("add").rate.far_bytes_per_s == 0);
  REQUIRE(before_far.kernels.at("add").rate.bytes_per_s == 12e9);
}

TEST_CASE("malformed calibration files are refused naming the field", "[sim][calibration]") {
  struct Bad {
    std::string text;
    std::vector<std::string> says;
  };
  const std::vector<Bad> cases = {
      {edited("\"format\": \"tessera-calibration\"", "\"format\": \"tessera-topology\""),
       {"\"format\"", "tessera calibrate"}},
      {edited("\"version\": 3", "\"version\": 1"), {"\"version\"", "1", "tessera calibrate"}},
      {edited("\"version\": 3", "\"version\": \"3\""), {"\"version\"", "integer"}},
      {with_value("row_ns", "-3"), {"kernels[\"add\"]", "row_ns"}},
      {with_value("far_GBps", "-6"), {"kernels[\"add\"]", "far_GBps"}},
      {edited("\"near_bytes\": 2097152.0,", ""),
       {"kernels[\"add\"]", "far_GBps", "near_bytes", "together"}},
      {with_value("rows", "\"many\""), {"kernels[\"add\"]: samples[0]", "rows"}},
      {edited("\"threads_per_rank\": 1", "\"threads_per_rank\": 0"), {"threads_per_rank"}},
      {edited("\"quick\": true", "\"quick\": 1"), {"\"quick\"", "true or false"}},
      {edited("\"host\": \"testhost\",", ""), {"missing field \"host\""}},
      {edited("\"format\"", "\"colour\": 1, \"format\""), {"unknown field \"colour\""}},
      {with_value("p2p_bw_GBps", "-4"), {"field \"link\"", "p2p_bw_GBps"}},
      {edited("\"p2p_latency_us\"", "\"p2p_latency\""),
       {"field \"link\"", "unknown field \"p2p_latency\""}},
      {edited("\"host_overhead_us\"", "\"host_overhead_ms\""),
       {"field \"runtime\"", "host_overhead_ms"}},
      {with_value("cpu_share", "1.5"), {"field \"runtime\"", "cpu_share"}},
      {with_value("p2p_wait_us", "-40"), {"field \"runtime\"", "p2p_wait_us"}},
      {edited("\"collective_wait_us\"", "\"wait_us\""), {"field \"runtime\"", "wait_us"}},
      {edited("\"conv2d_forward/pointwise\"", "\"conv2d_forward/winograd\""),
       {"unknown kernel class", "winograd"}},
      {with_value("rate_GBps", "-12"), {"kernels[\"add\"]", "rate_GBps"}},
      {with_value("rate_gflops", "\"fast\""),
       {"kernels[\"add\"]", "rate_gflops", "must be a number"}},
      {edited("\"overhead_us\"", "\"overhead_usec\""), {"kernels[\"add\"]", "overhead_usec"}},
      {edited("\"in_step\": false", "\"in_step\": \"no\""),
       {"kernels[\"add\"]: samples[0]", "in_step"}},
      {with_value("us", "-1.5"), {"kernels[\"add\"]: samples[0]", "\"us\""}},
      {with_value("peak_fp32_tflops", "-1"), {"devices[0]", "peak_fp32_tflops"}},
      {edited("\"kind\": \"cpu\"", "\"kind\": \"tpu\""), {"devices[0]", "tpu"}},
      {edited("\"latency_us\"", "\"latency_ns\""), {"field \"topology\"", "latency_ns"}},
  };
  for (const Bad& b : cases) {
    INFO(b.text);
    std::vector<std::string> says = b.says;
    says.push_back("calib.json");
    REQUIRE(lacks(error_of([&] { calibration_from_json(b.text, "calib.json"); }), says) == "");
  }
  REQUIRE(lacks(error_of([] { calibration_from_json("{\"format\": ", "calib.json"); }), {"calib.json", "not valid JSON"}) ==
          "");
  // A number beyond double: nlohmann throws out_of_range, not parse_error (fuzz_model_json found it).
  REQUIRE(lacks(error_of([] { calibration_from_json("{\"format\": 1e999}", "calib.json"); }),
                {"calib.json", "not valid JSON", "number overflow"}) == "");
  REQUIRE(lacks(error_of([] { calibration_from_json("[1, 2]", "calib.json"); }), {"calib.json", "object"}) == "");
  REQUIRE(lacks(error_of([] { load_calibration("/nonexistent/calibration.json"); }), {"/nonexistent/calibration.json"}) ==
          "");
}

TEST_CASE("apply_calibration gives the cpu-host presets the measured links and the engine the rates",
          "[sim][calibration]") {
  const Calibration c = sample_calibration();
  DeviceCatalog catalog;
  EngineOptions o;
  apply_calibration(c, catalog, o);
  REQUIRE(catalog.get("cpu-host").peak_fp32_flops == 94e9);
  const Topology t = Topology::preset("cpu-host:2", catalog);
  const auto devs = t.devices();
  REQUIRE(t.route_bw(devs[0], devs[1]) == 4e9);
  REQUIRE(t.route_latency(devs[0], devs[1]) == 7'000'000);
  REQUIRE(o.kernel_rates_device == "cpu-host");
  REQUIRE(o.kernel_rates.size() == 2);
  // Each kernel's overhead carries the runtime's host work per call.
  REQUIRE(std::abs(o.kernel_rates.at("add").overhead_s - (0.5e-6 + 1.25e-6)) < 1e-15);
  REQUIRE(o.kernel_rates.at("conv2d_forward/pointwise").flops_per_s == 50e9);
  REQUIRE(o.waits.p2p_s == 40e-6);
  REQUIRE(o.waits.collective_s == 16e-6);
}

namespace {

nn::TrainOptions small_sharded_run(const std::string& family) {
  nn::TrainOptions o = simtest::small_run(family);  // narrower still: depths 1-1-1-1, widths 8-32
  o.model.depths = {1, 1, 1, 1};
  o.model.widths = {8, 16, 24, 32};
  o.model.num_classes = 3;
  if (family == "regnet") o.model.stem_width = 8;
  return o;
}

/// The halo exchanges and collectives rank 0's compute ops wait for in one step.
std::pair<int, int> waits_of(const RankReplay& r) {
  int p2p = 0, coll = 0;
  for (const ProgramOp& op : r.program)
    if (op.kind == ProgramOp::Kind::Compute)
      for (int d : op.deps) {
        p2p += r.program[d].kind == ProgramOp::Kind::P2P;
        coll += r.program[d].kind == ProgramOp::Kind::Collective;
      }
  return {p2p, coll};
}

}  // namespace

TEST_CASE("wait costs delay each compute op by the communication it waits for", "[sim][calibration][engine]") {
  const std::vector<RankReplay> replay = replay_all(small_sharded_run("convnext"), core::DeviceMesh({2}, {"sp"}));
  const auto [p2p, coll] = waits_of(replay[0]);
  REQUIRE(p2p >= 8);  // the 7×7 convolutions' halo exchanges, forward and backward
  REQUIRE(coll >= 1);  // the gradient all-reduce, the loss
  Calibration c = sample_calibration();
  c.waits = {};
  DeviceCatalog catalog;
  EngineOptions o;
  apply_calibration(c, catalog, o);
  const Topology topo = Topology::preset("cpu-host:2", catalog);
  const SimResult without = simulate_iteration(replay, topo, catalog, o);
  o.waits = {25e-6, 7e-6};
  const SimResult with = simulate_iteration(replay, topo, catalog, o);
  REQUIRE(with.devices[0].compute_busy_ps - without.devices[0].compute_busy_ps ==
          Picos(p2p) * 25'000'000 + Picos(coll) * 7'000'000);
  REQUIRE(with.iteration_ps > without.iteration_ps);
  // Only the calibrated device pays them.
  o.kernel_rates_device = "a100-80gb";
  const SimResult other = simulate_iteration(replay, topo, catalog, o);
  o.waits = {};
  REQUIRE(other.iteration_ps == simulate_iteration(replay, topo, catalog, o).iteration_ps);
}

TEST_CASE("wait costs are fitted to the sharded runs' time outside kernels", "[sim][calibration]") {
  const Calibration c = sample_calibration();
  const core::DeviceMesh mesh({2}, {"sp"});
  RuntimeCalibration rt;
  for (const char* family : {"convnext", "regnet"}) {  // halo-heavy, collective-heavy
    RuntimeCalibration::ShardedRun run;
    run.options = small_sharded_run(family);
    run.ranks = 2;
    run.kernel_calls = 300;
    // 10 ms per wait of either kind, far more than the simulation's figures: both costs come
    // out positive.
    const auto [p2p, coll] = waits_of(replay_all(run.options, mesh)[0]);
    run.outside_s = (p2p + coll) * 10e-3;
    rt.sharded.push_back(run);
  }
  const WaitCosts base = fit_wait_costs(c, rt);
  REQUIRE(base.p2p_s > 0);
  REQUIRE(base.collective_s >= 0);
  // 30 µs more per halo wait and 10 µs more per collective wait in both runs: two runs, two
  // unknowns, so the fit follows exactly.
  for (RuntimeCalibration::ShardedRun& run : rt.sharded) {
    const auto [p2p, coll] = waits_of(replay_all(run.options, mesh)[0]);
    run.outside_s += p2p * 30e-6 + coll * 10e-6;
  }
  const WaitCosts more = fit_wait_costs(c, rt);
  REQUIRE(std::abs(more.p2p_s - base.p2p_s - 30e-6) < 1e-9);
  REQUIRE(std::abs(more.collective_s - base.collective_s - 10e-6) < 1e-9);
  // Never negative, and zero without sharded runs.
  for (RuntimeCalibration::ShardedRun& run : rt.sharded) run.outside_s = 0;
  const WaitCosts none = fit_wait_costs(c, rt);
  REQUIRE(none.p2p_s == 0);
  REQUIRE(none.collective_s == 0);
  REQUIRE(fit_wait_costs(c, RuntimeCalibration{}).p2p_s == 0);
}

TEST_CASE("a quick calibration of this machine is sane and loads back from its file", "[sim][calibration]") {
  const ComputeFactory make_compute = [](int threads) { return std::make_unique<compute::cpu::CpuBackend>(threads); };
  const WorldRunner run_world = [](int size, const std::function<void(comm::Backend&)>& fn) {
    comm::local::run(size, fn);
  };
  CalibrateOptions o;
  o.quick = true;
  o.precisions = {nn::Precision::FP32, nn::Precision::BF16};
  std::vector<std::string> lines;
  const Calibration c = calibrate(make_compute, run_world, o, [&](const std::string& l) { lines.push_back(l); });
  REQUIRE(lines.size() == 4);  // kernels, link, runtime, device
  REQUIRE(c.device.name == "cpu-host");
  REQUIRE(c.device.peak_fp32_flops > 1e9);
  REQUIRE(c.device.mem_bw_bytes_per_s > 1e8);
  REQUIRE(c.link.p2p_bw_bytes_per_s > 1e7);
  REQUIRE(c.host_overhead_s > 0);
  REQUIRE(c.host_overhead_s < 1e-3);
  REQUIRE(c.cpu_share > 0);
  REQUIRE(c.cpu_share <= 1);
  for (const char* k : {"conv2d_forward/depthwise", "conv2d_forward/pointwise", "conv2d_forward/dense",
                        "conv2d_forward/patchify", "conv2d_backward_data/patchify",
                        "conv2d_forward/grouped", "conv2d_backward_weight/grouped", "layernorm_forward",
                        "activation_forward/gelu", "activation_backward/relu", "add", "batchnorm_forward",
                        "softmax_cross_entropy", "adamw_step", "sgd_step", "linear_forward"}) {
    INFO(k);
    REQUIRE(c.kernels.count(k) == 1);
    const KernelCalibration& kc = c.kernels.at(k);
    REQUIRE(!kc.samples.empty());
    REQUIRE(kc.rate.overhead_s + kc.rate.flops_per_s + kc.rate.bytes_per_s > 0);
  }
  // Samples from inside training steps and from the suite alone, in f32 and in bf16 (whose calls
  // move fewer bytes: activations in 16 bits).
  REQUIRE(c.precisions == o.precisions);
  for (const char* k :
       {"conv2d_forward/pointwise", "conv2d_forward/pointwise@bf16", "layernorm_forward@bf16"}) {
    INFO(k);
    bool in_step = false, alone = false;
    for (const KernelSample& s : c.kernels.at(k).samples) (s.in_step ? in_step : alone) = true;
    REQUIRE((in_step && alone));
  }
  const KernelSample& s32 = c.kernels.at("conv2d_forward/pointwise").samples.front();
  const KernelSample& s16 = c.kernels.at("conv2d_forward/pointwise@bf16").samples.front();
  REQUIRE(s16.flops == s32.flops);  // the suite's first pointwise geometry in both
  REQUIRE(s16.bytes < s32.bytes);
  REQUIRE(c.kernels.count("adamw_step@bf16") == 0);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tessera-calibration-" + std::to_string(::getpid()) + ".json")).string();
  save_calibration(c, path);
  const Calibration back = load_calibration(path);
  std::filesystem::remove(path);
  // The file holds µs and GB/s: the figures come back to within rounding.
  auto near = [](double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b)); };
  REQUIRE(near(back.device.peak_fp32_flops, c.device.peak_fp32_flops));
  REQUIRE(near(back.device.launch_overhead_s, c.device.launch_overhead_s));
  REQUIRE(near(back.device.shm_latency_s, c.device.shm_latency_s));
  REQUIRE(near(back.link.all_reduce_bw_bytes_per_s, c.link.all_reduce_bw_bytes_per_s));
  REQUIRE(near(back.host_overhead_s, c.host_overhead_s));
  REQUIRE(back.cpu_share == c.cpu_share);
  REQUIRE(back.topology.to_json() == c.topology.to_json());
  REQUIRE(back.kernels.size() == c.kernels.size());
  for (const auto& [k, kc] : c.kernels) {
    INFO(k);
    const KernelCalibration& b = back.kernels.at(k);
    REQUIRE(near(b.rate.overhead_s, kc.rate.overhead_s));
    REQUIRE(near(b.rate.flops_per_s, kc.rate.flops_per_s));
    REQUIRE(near(b.rate.bytes_per_s, kc.rate.bytes_per_s));
    REQUIRE(b.samples.size() == kc.samples.size());
    for (std::size_t i = 0; i < b.samples.size(); ++i) {
      REQUIRE(near(b.samples[i].seconds, kc.samples[i].seconds));
      REQUIRE(b.samples[i].flops == kc.samples[i].flops);
      REQUIRE(b.samples[i].in_step == kc.samples[i].in_step);
    }
  }
}
