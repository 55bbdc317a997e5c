// bench_train's command line and what a --device cuda run hands each side (train_args.hpp).
#include "train_args.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "tessera/core/mesh.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/nn/pipeline.hpp"
#include "tessera/nn/precision.hpp"

namespace tessera::bench {
namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, ',');) v.push_back(p);
  return v;
}

std::string list_text(const std::vector<int>& v) {
  std::string s;
  for (int x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

}  // namespace

TrainBenchOptions parse_train_options(int argc, const char* const* argv) {
  TrainBenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--json") {
      o.json = true;
    } else if (a == "--help") {
      o.help = true;
    } else if (a == "--simulate") {
      o.simulate = true;
    } else if (a == "--calibrations" && has_value) {
      o.calibrations = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--calibration" && has_value) {
      o.calibration = argv[++i];
    } else if (a == "--no-torch") {
      o.torch = false;
    } else if (a == "--torch-linear") {
      o.torch_linear = true;
    } else if (a == "--steps" && has_value) {
      o.steps = std::max(1, std::atoi(argv[++i]));
      o.steps_set = true;
    } else if (a == "--device" && has_value) {
      o.device = argv[++i];
    } else if (a == "--tf32") {
      o.gpu.tf32 = true;
    } else if (a == "--warmup" && has_value) {
      o.gpu.warmup = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--pointwise" && has_value) {
      o.gpu.pointwise = argv[++i];
      if (o.gpu.pointwise != "linear" && o.gpu.pointwise != "conv")
        throw UsageError("--pointwise '" + o.gpu.pointwise + "': use linear or conv");
    } else if (a == "--peer-script" && has_value) {
      o.gpu.peer_command.script = argv[++i];
    } else if (a == "--python" && has_value) {
      o.gpu.peer_command.python = argv[++i];
    } else if (a == "--model" && has_value) {
      o.model = argv[++i];
    } else if (a == "--batch" && has_value) {
      o.batch = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--input" && has_value) {
      std::string s = argv[++i];
      std::replace(s.begin(), s.end(), 'x', ',');
      o.input.clear();
      for (const std::string& p : split(s)) o.input.push_back(std::atoll(p.c_str()));
      if (o.input.size() != 3 || *std::min_element(o.input.begin(), o.input.end()) <= 0)
        throw UsageError("--input '" + std::string(argv[i]) + "': expected CxHxW, e.g. 3x256x1024");
      o.input_set = true;
    } else if (a == "--halo-recompute" && has_value) {
      const std::string v = argv[++i];
      if (v == "both")
        o.halo_recomputes = {"keep", "exchange"};
      else if (nn::parse_halo_recompute(v))
        o.halo_recomputes = {v};
      else
        throw UsageError("--halo-recompute '" + v + "': use keep, exchange or both");
    } else if (a == "--backend" && has_value) {
      o.backend = argv[++i];
    } else if (a == "--ranks" && has_value) {
      o.ranks.clear();
      for (const std::string& p : split(argv[++i]))
        o.ranks.push_back(std::max(1, std::atoi(p.c_str())));
    } else if (a == "--precision" && has_value) {
      const std::string pr = argv[++i];
      const std::optional<nn::Precision> p = nn::parse_precision(pr);
      if (!p) throw UsageError("--precision '" + pr + "': use fp32, bf16 or fp16");
      o.precisions = {"fp32"};
      if (*p != nn::Precision::FP32) o.precisions.push_back(std::string(nn::precision_name(*p)));
      o.gpu.precision = *p;  // on the GPU: that precision alone, on both sides
    } else if (a == "--overlap" && has_value) {
      const std::string v = argv[++i];
      if (v == "on")
        o.overlaps = {true};
      else if (v == "off")
        o.overlaps = {false};
      else if (v == "both")
        o.overlaps = {true, false};
      else
        throw UsageError("--overlap '" + v + "': use on, off or both");
    } else if (a == "--mesh" && has_value) {
      o.mesh = argv[++i];
      try {
        core::DeviceMesh::parse(o.mesh);
      } catch (const std::exception& e) {
        throw UsageError("--mesh '" + o.mesh + "': " + e.what());
      }
    } else if (a == "--micro-batches" && has_value) {
      o.micro_batches.clear();
      for (const std::string& p : split(argv[++i]))
        o.micro_batches.push_back(std::max(1, std::atoi(p.c_str())));
    } else if (a == "--schedule" && has_value) {
      const std::string v = argv[++i];
      if (v == "both")
        o.schedules = {"1f1b", "gpipe"};
      else if (nn::parse_pipeline_schedule(v))
        o.schedules = {v};
      else
        throw UsageError("--schedule '" + v + "': use 1f1b, gpipe or both");
    } else if (a == "--checkpointing" && has_value) {
      o.checkpointing = split(argv[++i]);
    } else {
      throw UsageError("'" + a + "': an unknown option, or an option without its value");
    }
  }
  return o;
}

GpuTrainOptions gpu_train_options(const TrainBenchOptions& o) {
  GpuTrainOptions g = o.gpu;  // tf32, warmup, pointwise, precision, peer command
  g.json = o.json;
  g.device = o.device;
  g.model = o.model;
  g.batch = o.batch;
  g.classes = o.classes;
  g.peer = o.torch;
  if (o.input_set) g.input = o.input;
  if (o.steps_set) g.steps = o.steps;
  return g;
}

std::shared_ptr<const data::Dataset> synthetic_data(const core::Shape& input, int classes) {
  data::SyntheticOptions d;
  d.channels = int(input[0]);
  d.height = int(input[1]);
  d.width = int(input[2]);
  d.num_classes = classes;
  return data::make_synthetic(d);
}

nn::TrainOptions gpu_trainer_options(const GpuTrainOptions& o) {
  nn::TrainOptions t;
  t.model = nn::model_preset(o.model);
  t.model.num_classes = o.classes;
  t.model.in_channels = int(o.input[0]);
  t.model.drop_path = 0;  // off for timing, as in the peer
  t.input = o.input;
  t.batch = o.batch;
  t.checkpointing = "none";
  t.steps = o.warmup + o.steps;
  t.precision = o.precision;  // t.loss_scale stays auto: dynamic for fp16, as the peer's GradScaler
  return t;
}

std::vector<std::string> train_peer_args(const GpuTrainOptions& o) {
  const nn::ModelSpec m = nn::model_preset(o.model);
  return {"--mode",
          "train",
          "--depths",
          list_text(m.depths),
          "--dims",
          list_text(m.widths),
          "--input",
          std::to_string(o.input[0]) + "x" + std::to_string(o.input[1]) + "x" +
              std::to_string(o.input[2]),
          "--batch",
          std::to_string(o.batch),
          "--classes",
          std::to_string(o.classes),
          "--steps",
          std::to_string(o.steps),
          "--warmup",
          std::to_string(o.warmup),
          "--tf32",
          o.tf32 ? "1" : "0",
          "--precision",
          std::string(nn::precision_name(o.precision)),
          "--pointwise",
          o.pointwise,
          "--device",
          "cuda:" + std::to_string(cuda_device_index(o.device))};
}

}  // namespace tessera::bench
