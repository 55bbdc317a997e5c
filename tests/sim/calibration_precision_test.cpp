// Calibration per precision: the kernel suite's 16-bit calls, the "precisions" field of the file
// (version 3; version 2 read as fp32 only), a bf16 simulation timed by the "@bf16" rates and not
// by the f32 ones (against a naive float64 sum over the replayed ops), and the refusal of a
// precision the calibration did not time.
#include <cmath>
#include <memory>
#include <set>

#include "calibrate_cases.hpp"
#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/sim/calibration.hpp"
#include "tessera/sim/kernel_class.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;

namespace {

/// Runs every call on the cpu backend and notes its kernel class.
class ClassProbe final : public compute::Backend {
 public:
  std::string_view name() const noexcept override { return inner_.name(); }
  int num_threads() const noexcept override { return inner_.num_threads(); }
  void set_num_threads(int n) override { inner_.set_num_threads(n); }
  void execute(const compute::OpCall& call) override {
    classes.insert(kernel_class(call));
    inner_.execute(call);
  }
  std::set<std::string> classes;

 private:
  compute::cpu::CpuBackend inner_{1};
};

/// The classes the quick suite's calls have in `dtype`.
std::set<std::string> suite_classes(core::DType dtype) {
  ClassProbe probe;
  for (const detail_calibrate::TimedCall& c : detail_calibrate::kernel_suite(true, nullptr, dtype))
    c.make()(probe);
  return probe.classes;
}

/// A hand-made calibration of cpu-host timed in `precisions`, with a pointwise rate in f32 and,
/// when bf16 is timed, another in bf16.
Calibration hand_made(std::vector<nn::Precision> precisions) {
  Calibration c;
  DeviceCatalog catalog;
  c.device = catalog.get("cpu-host");
  c.device.source = "hand-made";
  c.host = "testhost";
  c.created_utc = "2026-01-01T00:00:00Z";
  c.link = {7e-6, 4e9, 8e-6, 3e9};
  c.host_overhead_s = 1e-6;
  catalog.add(c.device);
  c.topology = Topology::preset("cpu-host:2", catalog);
  c.precisions = std::move(precisions);
  c.kernels["conv2d_forward/pointwise"].rate = {60e9, 10e9, 4e-6};
  c.kernels["conv2d_forward/pointwise"].samples = {{1e6, 1e5, 40e-6, false, 64}};
  if (std::find(c.precisions.begin(), c.precisions.end(), nn::Precision::BF16) !=
      c.precisions.end()) {
    c.kernels["conv2d_forward/pointwise@bf16"].rate = {120e9, 10e9, 5e-6};
    c.kernels["conv2d_forward/pointwise@bf16"].samples = {{1e6, 6e4, 20e-6, false, 64}};
  }
  return c;
}

std::vector<RankReplay> small_replay(nn::Precision precision) {
  nn::TrainOptions o = simtest::small_run("convnext");
  o.precision = precision;
  return replay_all(o, core::DeviceMesh({1}, {"sp"}));
}

/// One rank's simulated step under `c`, in seconds.
double simulated_s(const Calibration& c, const std::vector<RankReplay>& replay) {
  DeviceCatalog catalog;
  EngineOptions eo;
  apply_calibration(c, catalog, eo);
  eo.trace = false;
  const SimResult r =
      simulate_iteration(replay, Topology::preset("cpu-host:1", catalog), catalog, eo);
  return static_cast<double>(r.iteration_ps) / static_cast<double>(kPicosPerSecond);
}

/// Naive: Σ over rank 0's ops of class `kernel` of (time at rate b − time at rate a), float64.
double naive_delta_s(const std::vector<RankReplay>& replay, const std::string& kernel,
                     const KernelRate& a, const KernelRate& b, int* count) {
  double sum = 0;
  *count = 0;
  for (const ProgramOp& op : replay[0].program) {
    if (op.kind != ProgramOp::Kind::Compute || op.kernel != kernel) continue;
    auto t = [&](const KernelRate& r) {
      return r.overhead_s + op.flops / r.flops_per_s +
             static_cast<double>(op.bytes) / r.bytes_per_s;
    };
    sum += t(b) - t(a);
    ++*count;
  }
  return sum;
}

}  // namespace

TEST_CASE("the bf16 kernel suite times 16-bit calls of every f32 class but the optimizer's",
          "[sim][calibration]") {
  const std::set<std::string> f32 = suite_classes(core::DType::F32);
  const std::set<std::string> bf16 = suite_classes(core::DType::BF16);
  REQUIRE(f32.count("conv2d_forward/pointwise") == 1);
  REQUIRE(bf16.count("conv2d_forward/pointwise@bf16") == 1);
  std::set<std::string> expected;
  for (const std::string& k : f32) {
    const std::string op = kernel_class_op(k);
    const bool stays_f32 = op == "adamw_step" || op == "sgd_step" || op == "sum_squares" ||
                           op == "scale" || op.rfind("topk_", 0) == 0;
    if (!stays_f32) expected.insert(k + "@bf16");
  }
  REQUIRE(bf16 == expected);
  for (const std::string& k : suite_classes(core::DType::F16)) REQUIRE(k.ends_with("@f16"));
}

TEST_CASE("a bf16 step is timed by the bf16 rates of its calibration, not the f32 ones",
          "[sim][calibration][engine]") {
  const std::vector<RankReplay> bf16 = small_replay(nn::Precision::BF16);
  const std::vector<RankReplay> fp32 = small_replay(nn::Precision::FP32);
  const Calibration base = hand_made({nn::Precision::FP32, nn::Precision::BF16});
  const double t_bf16 = simulated_s(base, bf16), t_fp32 = simulated_s(base, fp32);

  // The bf16 pointwise rate twice as fast in FLOPs: the bf16 step shrinks by exactly its ops'
  // difference (each op rounded up to a picosecond), the f32 step stays.
  Calibration faster = base;
  KernelRate& pw16 = faster.kernels.at("conv2d_forward/pointwise@bf16").rate;
  pw16.flops_per_s *= 2;
  int n = 0;
  const double want =
      naive_delta_s(bf16, "conv2d_forward/pointwise@bf16",
                    base.kernels.at("conv2d_forward/pointwise@bf16").rate, pw16, &n);
  REQUIRE(n > 0);
  REQUIRE(want < -1e-6);
  REQUIRE(std::abs(simulated_s(faster, bf16) - t_bf16 - want) <= n * 1e-12);
  REQUIRE(simulated_s(faster, fp32) == t_fp32);

  // The f32 pointwise rate changed: the f32 step follows it, the bf16 step does not move.
  Calibration slower_f32 = base;
  KernelRate& pw32 = slower_f32.kernels.at("conv2d_forward/pointwise").rate;
  pw32.flops_per_s /= 3;
  const double want32 = naive_delta_s(fp32, "conv2d_forward/pointwise",
                                      base.kernels.at("conv2d_forward/pointwise").rate, pw32, &n);
  REQUIRE(n > 0);
  REQUIRE(std::abs(simulated_s(slower_f32, fp32) - t_fp32 - want32) <= n * 1e-12);
  REQUIRE(simulated_s(slower_f32, bf16) == t_bf16);
}

TEST_CASE("a simulation in a precision the calibration did not time is refused",
          "[sim][calibration][engine]") {
  const Calibration f32_only = hand_made({nn::Precision::FP32});
  const std::string e = error_of([&] { simulated_s(f32_only, small_replay(nn::Precision::BF16)); });
  REQUIRE(lacks(e, {"@bf16", "cpu-host", "f32 only", "bf16",
                    "tessera calibrate --precisions fp32,bf16"}) == "");
  const Calibration with_bf16 = hand_made({nn::Precision::FP32, nn::Precision::BF16});
  const std::string e16 =
      error_of([&] { simulated_s(with_bf16, small_replay(nn::Precision::FP16)); });
  REQUIRE(lacks(e16, {"@f16", "f32, bf16 only", "--precisions fp32,fp16"}) == "");
  // fp32 steps need nothing more; a 16-bit step on another device than the calibrated one keeps
  // the roofline.
  REQUIRE(simulated_s(f32_only, small_replay(nn::Precision::FP32)) > 0);
  DeviceCatalog catalog;
  EngineOptions eo;
  apply_calibration(f32_only, catalog, eo);
  eo.kernel_rates_device = "a100-80gb";
  REQUIRE(simulate_iteration(small_replay(nn::Precision::BF16),
                             Topology::preset("cpu-host:1", catalog), catalog, eo)
              .iteration_ps > 0);
}

TEST_CASE("the calibration file carries its precisions and reads version 2 as fp32 only",
          "[sim][calibration]") {
  const Calibration c = hand_made({nn::Precision::FP32, nn::Precision::BF16});
  const std::string text = calibration_to_json(c);
  REQUIRE(text.find("\"version\": 3") != std::string::npos);
  const Calibration back = calibration_from_json(text, "round trip");
  REQUIRE(back.precisions == c.precisions);
  REQUIRE(calibration_to_json(back) == text);
  REQUIRE(back.kernels.at("conv2d_forward/pointwise@bf16").rate.flops_per_s == 120e9);

  auto replaced = [&](std::string s, const std::string& from, const std::string& to) {
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  // Version 2 (no "precisions"): timed in fp32 only, so its engine options refuse bf16 steps.
  const std::string f32_text = calibration_to_json(hand_made({nn::Precision::FP32}));
  const std::string v2 = replaced(replaced(f32_text, "\"version\": 3", "\"version\": 2"),
                                  "\"precisions\": [\n    \"fp32\"\n  ],", "");
  const Calibration old = calibration_from_json(v2, "v2.json");
  REQUIRE(old.precisions == std::vector<nn::Precision>{nn::Precision::FP32});
  DeviceCatalog catalog;
  EngineOptions eo;
  apply_calibration(old, catalog, eo);
  REQUIRE(eo.kernel_rates_dtypes == std::vector<core::DType>{core::DType::F32});

  const std::string list = "\"precisions\": [\n    \"fp32\",\n    \"bf16\"\n  ]";
  REQUIRE(text.find(list) != std::string::npos);
  struct Bad {
    std::string text;
    std::vector<std::string> says;
  };
  const std::vector<Bad> cases = {
      {replaced(text, "\"version\": 3", "\"version\": 4"),
       {"\"version\"", "4", "tessera calibrate"}},
      {replaced(text, "\"version\": 3", "\"version\": 1"),
       {"\"version\"", "1", "tessera calibrate"}},
      {replaced(text, "\"version\": 3", "\"version\": 2"), {"\"precisions\"", "version 3"}},
      {replaced(text, list, "\"precisions\": [\"bf16\"]"), {"\"precisions\"", "fp32"}},
      {replaced(text, list, "\"precisions\": [\"fp32\", \"bf17\"]"), {"\"precisions\"", "bf17"}},
      {replaced(text, list, "\"precisions\": [\"fp32\", \"bf16\", \"bf16\"]"),
       {"\"precisions\"", "twice"}},
      {replaced(text, list, "\"precisions\": []"), {"\"precisions\"", "non-empty"}},
      {replaced(text, list, "\"precisions\": [\"fp32\"]"),
       {"conv2d_forward/pointwise@bf16", "bf16", "\"precisions\""}},
      {replaced(text, ",\n  " + list, ""), {"\"precisions\""}},
  };
  for (const Bad& b : cases) {
    INFO(b.text);
    REQUIRE(lacks(error_of([&] { calibration_from_json(b.text, "bad.json"); }), b.says) == "");
  }
}
