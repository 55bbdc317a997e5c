// bench_train's command line (bench/train_args.hpp): what `--device cuda` hands tessera's GPU
// trainer and the PyTorch peer's argv, so that both sides run the same precision, model, input and
// steps (a --precision that stopped at the command line once made a "bf16" run time fp32 on both).
#include <algorithm>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "tessera/nn/precision.hpp"
#include "train_args.hpp"

using namespace tessera;
using bench::GpuTrainOptions;
using bench::TrainBenchOptions;

namespace {

TrainBenchOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "bench_train");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return bench::parse_train_options(int(argv.size()), argv.data());
}

/// The value after `flag` in `args`, "<absent>" without one; "<twice>" when the flag repeats.
std::string value_of(const std::vector<std::string>& args, const std::string& flag) {
  if (std::count(args.begin(), args.end(), flag) > 1) return "<twice>";
  const auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? "<absent>" : *(it + 1);
}

}  // namespace

TEST_CASE("bench_train --device cuda --precision runs tessera and the peer in that precision",
          "[bench]") {
  const auto [given, want] = GENERATE(table<std::string, nn::Precision>({
      {"bf16", nn::Precision::BF16},
      {"fp16", nn::Precision::FP16},
      {"f16", nn::Precision::FP16},
      {"fp32", nn::Precision::FP32},
  }));
  CAPTURE(given);
  const TrainBenchOptions o = parse({"--device", "cuda", "--precision", given});
  const GpuTrainOptions g = bench::gpu_train_options(o);
  REQUIRE(g.precision == want);
  // Tessera's trainer: nn::TrainOptions::precision, the mixed precision the CPU rows use, with the
  // loss scaling the peer's GradScaler has (dynamic for fp16, off otherwise).
  const nn::TrainOptions t = bench::gpu_trainer_options(g);
  REQUIRE(t.precision == want);
  REQUIRE(nn::LossScaler(t.loss_scale, t.precision).dynamic() == (want == nn::Precision::FP16));
  // The peer: --precision with the canonical name torch_gpu_peer.py accepts.
  REQUIRE(value_of(bench::train_peer_args(g), "--precision") ==
          std::string(nn::precision_name(want)));
  // The CPU rows keep running fp32 beside the mixed precision.
  std::vector<std::string> cpu = {"fp32"};
  if (want != nn::Precision::FP32) cpu.push_back(std::string(nn::precision_name(want)));
  REQUIRE(o.precisions == cpu);
}

TEST_CASE("bench_train --device cuda without --precision is fp32 on both sides, said to the peer",
          "[bench]") {
  const GpuTrainOptions g = bench::gpu_train_options(parse({"--device", "cuda"}));
  REQUIRE(g.precision == nn::Precision::FP32);
  REQUIRE(bench::gpu_trainer_options(g).precision == nn::Precision::FP32);
  REQUIRE(value_of(bench::train_peer_args(g), "--precision") == "fp32");
}

TEST_CASE("bench_train --device cuda hands both sides the same model, input, steps and TF32",
          "[bench]") {
  const GpuTrainOptions g = bench::gpu_train_options(parse(
      {"--device", "cuda:1", "--model", "convnext-b", "--input", "3x64x128", "--batch", "4",
       "--steps", "3", "--warmup", "1", "--tf32", "--pointwise", "conv", "--no-torch", "--json"}));
  REQUIRE(g.device == "cuda:1");
  REQUIRE(g.json);
  REQUIRE_FALSE(g.peer);
  const nn::TrainOptions t = bench::gpu_trainer_options(g);
  const nn::ModelSpec b = nn::model_preset("convnext-b");
  REQUIRE(t.model.widths == b.widths);
  REQUIRE(t.model.depths == b.depths);
  REQUIRE(t.model.drop_path == 0);
  REQUIRE(t.model.num_classes == g.classes);
  REQUIRE(t.input == core::Shape{3, 64, 128});
  REQUIRE(t.batch == 4);
  REQUIRE(t.steps == 1 + 3);  // warm-up, then timed
  REQUIRE(t.checkpointing == "none");

  const std::vector<std::string> args = bench::train_peer_args(g);
  REQUIRE(value_of(args, "--mode") == "train");
  REQUIRE(value_of(args, "--depths") == "3,3,27,3");
  REQUIRE(value_of(args, "--dims") == "128,256,512,1024");
  REQUIRE(value_of(args, "--input") == "3x64x128");
  REQUIRE(value_of(args, "--batch") == "4");
  REQUIRE(value_of(args, "--classes") == std::to_string(g.classes));
  REQUIRE(value_of(args, "--steps") == "3");
  REQUIRE(value_of(args, "--warmup") == "1");
  REQUIRE(value_of(args, "--tf32") == "1");
  REQUIRE(value_of(args, "--pointwise") == "conv");
  REQUIRE(value_of(args, "--device") == "cuda:1");
}

TEST_CASE(
    "bench_train --device cuda keeps the GPU defaults where --input and --steps are not given",
    "[bench]") {
  const GpuTrainOptions g = bench::gpu_train_options(parse({"--device", "cuda"}));
  REQUIRE(g.input == GpuTrainOptions{}.input);  // 3x512x2048, not the CPU rows' 3x256x1024
  REQUIRE(g.steps == GpuTrainOptions{}.steps);
  REQUIRE(value_of(bench::train_peer_args(g), "--tf32") == "0");
  REQUIRE(value_of(bench::train_peer_args(g), "--device") == "cuda:0");
}

TEST_CASE("bench_train refuses a bad command line with the option named", "[bench]") {
  const auto [args, names] = GENERATE(table<std::vector<std::string>, std::string>({
      {{"--precision", "fp8"}, "fp8"},
      {{"--pointwise", "dense"}, "dense"},
      {{"--overlap", "sometimes"}, "sometimes"},
      {{"--halo-recompute", "never"}, "never"},
      {{"--schedule", "interleaved"}, "interleaved"},
      {{"--mesh", "pp=two"}, "--mesh 'pp=two'"},
      {{"--input", "3x64"}, "3x64"},
      {{"--bogus"}, "--bogus"},
      {{"--device", "cuda", "--steps"}, "--steps"},
  }));
  CAPTURE(args);
  std::string message;
  try {
    parse(args);
  } catch (const bench::UsageError& e) {
    message = e.what();
  }
  REQUIRE_THAT(message, Catch::Matchers::Contains(names));
  REQUIRE(parse({"--help"}).help);
}

TEST_CASE("bench_train --mesh, --micro-batches and --schedule reach every run", "[bench]") {
  const TrainBenchOptions d = parse({});
  REQUIRE(d.mesh.empty());  // the default runs: sp=P, one micro-batch
  REQUIRE(d.micro_batches == std::vector<int>{1});
  REQUIRE(d.schedules == std::vector<std::string>{"1f1b"});
  const TrainBenchOptions o =
      parse({"--mesh", "pp=2", "--micro-batches", "1,2,8", "--schedule", "both"});
  REQUIRE(o.mesh == "pp=2");
  REQUIRE(o.micro_batches == std::vector<int>{1, 2, 8});
  REQUIRE(o.schedules == std::vector<std::string>{"1f1b", "gpipe"});
  REQUIRE(parse({"--schedule", "gpipe"}).schedules == std::vector<std::string>{"gpipe"});
}
