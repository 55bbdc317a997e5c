// The run description: every field parsed and checked once, from text (the CLI, keyword arguments)
// and from JSON (--config files, the studio, Python); each error names the field and the value;
// to_json round-trips; resolution applies every field and refuses what cannot run.
#include <algorithm>
#include <string>
#include <vector>

#include "run/expect.hpp"
#include "support/catch.hpp"
#include "tessera/run/resolve.hpp"
#include "tessera/run/spec.hpp"

using namespace tessera;
using run::RunSpec;
using runtest::has;
using runtest::message;

TEST_CASE("run spec: each bad value given as text is refused naming the field and the value", "[run]") {
  struct Bad {
    const char* field;
    const char* value;
    const char* rule;
  };
  const Bad bad[] = {
      {"input", "3x5", "expected three positive sizes CxHxW"},
      {"input", "3x0x64", "CxHxW"},
      {"batch", "0", "must be a positive integer"},
      {"batch", "two", "expected an integer"},
      {"mesh", "sp=0", "sp"},
      {"shard", "Q", "expected one of: W, H, HW"},
      {"checkpointing", "all", "none, block, stage"},
      {"optimizer", "adam", "sgd, adamw"},
      {"halo_recompute", "always", "keep, exchange"},
      {"all_reduce", "ring", "auto, flat, hier"},
      {"lr", "-1", ">= 0"},
      {"weight_decay", "x", "expected a number"},
      {"momentum", "1", "[0, 1)"},
      {"warmup", "-2", "at least 0"},
      {"clip", "-0.5", ">= 0"},
      {"steps", "0", "at least 1"},
      {"seed", "-3", "non-negative integer"},
      {"task", "detect", "classify, segment"},
      {"classes", "1", "at least 2"},
      {"drop_path", "1.5", "below 1"},
      {"dtype", "bf16", "use one of: f32, f64"},
      {"threads", "-1", "at least 0"},
      {"precision", "fp8", "expected fp32, bf16 or fp16"},
      {"grad_reduce_dtype", "f64", "expected fp32, bf16 or fp16"},
      {"loss_scale", "-2", "positive number"},
      {"timeout_s", "0", "positive number of seconds"},
      {"overlap", "maybe", "expected true or false"},
      {"bucket_mib", "0", "at least 1"},
      {"tf32", "2", "expected true or false"},
      {"data", "", "synthetic"},
      {"backend", "", "backend name"},
      {"topology", "", "preset"},
      {"model", "", "preset"},
      {"micro_batches", "0", "at least 1"},
      {"micro_batches", "2.5", "expected an integer"},
      {"schedule", "zigzag", "expected one of: 1f1b, gpipe"},
      {"stage_starts", "4,2", "increasing unit indices"},
      {"stage_starts", "0", "indices >= 1"},
      {"stage_starts", "4,,9", "separated by commas"},
      {"stage_starts", "4,", "separated by commas"},
      {"stage_starts", "x", "e.g. 4,9"},
      {"save_every", "-1", "at least 0"},
      {"keep_checkpoints", "0", "at least 1"},
      {"mesh", "dp=auto,sp=auto", "only one dimension may be auto"},
  };
  for (const Bad& b : bad) {
    INFO(b.field << " = '" << b.value << "'");
    RunSpec s;
    const std::string m = message([&] { s.set(b.field, b.value); });
    INFO(m);
    REQUIRE(has(m, std::string(b.field) + " '" + b.value + "': "));
    REQUIRE(has(m, b.rule));
    REQUIRE(s == RunSpec{});  // a refused value changes nothing
  }
  const std::string unknown = message([] { RunSpec().set("meshh", "sp=2"); });
  REQUIRE(has(unknown, "unknown field \"meshh\""));
  REQUIRE(has(unknown, "known fields: model, input, batch, mesh"));
}

TEST_CASE("run spec: text values are parsed into their fields", "[run]") {
  RunSpec s = RunSpec::for_simulation();
  s.set("input", "3x64x128");
  s.set("batch", "4");
  s.set("shard", "h");  // case-insensitive, stored as H
  s.set("lr", "0.5");
  s.set("seed", "18446744073709551615");
  s.set("overlap", "off");
  s.set("tf32", "true");
  REQUIRE(s.input == "3x64x128");
  REQUIRE(s.batch == 4);
  REQUIRE(s.shard == "H");
  REQUIRE(s.lr == 0.5);
  REQUIRE(s.seed == 18446744073709551615ull);
  REQUIRE_FALSE(s.overlap);
  REQUIRE(s.tf32);
  REQUIRE(s.get("batch") == "4");
  REQUIRE(s.get("overlap") == "false");
  for (const std::string& f : RunSpec::field_names()) REQUIRE_FALSE(RunSpec::help(f).empty());
  REQUIRE(RunSpec::value_kind("model") == "TEXT");
  REQUIRE(RunSpec::value_kind("batch") == "INT");
  REQUIRE(RunSpec::value_kind("lr") == "FLOAT");
  REQUIRE(RunSpec::value_kind("tf32") == "BOOL");
  REQUIRE(RunSpec::value_kind("seed") == "INT");
}

TEST_CASE("run spec: JSON errors name the origin, the field and what it must be", "[run]") {
  const RunSpec base = RunSpec::for_simulation();
  auto msg = [&](const std::string& text) { return message([&] { RunSpec::from_json(text, base, "spec.json"); }); };
  REQUIRE(has(msg("{\"model\": "), "spec.json: not valid JSON at byte"));
  REQUIRE(has(msg("{\"lr\": 1e999}"), "spec.json: not valid JSON: "));  // a number beyond double
  REQUIRE(has(msg("[1]"), "spec.json: expected a JSON object"));
  REQUIRE(has(msg("{\"meshh\": \"sp=2\"}"), "spec.json: unknown field \"meshh\"; known fields: model"));
  REQUIRE(has(msg("{\"mesh\": 4}"), "spec.json: field \"mesh\" must be a string"));
  REQUIRE(has(msg("{\"batch\": \"2\"}"), "field \"batch\" must be an integer"));
  REQUIRE(has(msg("{\"batch\": 2.5}"), "field \"batch\" must be an integer"));
  REQUIRE(has(msg("{\"batch\": 0}"), "field \"batch\" is 0: must be a positive integer"));
  REQUIRE(has(msg("{\"lr\": \"fast\"}"), "field \"lr\" must be a number"));
  REQUIRE(has(msg("{\"overlap\": 1}"), "field \"overlap\" must be true or false"));
  REQUIRE(has(msg("{\"seed\": -1}"), "field \"seed\" must be a non-negative integer"));
  REQUIRE(has(msg("{\"dtype\": \"bf16\"}"), "field \"dtype\" is \"bf16\": the trainer keeps its weights in f32 or f64"));
  REQUIRE(has(msg("{\"input\": \"3x5\"}"), "field \"input\" is \"3x5\": expected three positive sizes CxHxW"));
  REQUIRE(has(msg("{\"classes\": 1}"), "field \"classes\" is 1: must be at least 2"));
  REQUIRE(has(msg("{\"shard\": [1]}"), "field \"shard\" must be a string"));
  REQUIRE(has(msg("{\"micro_batches\": \"4\"}"), "field \"micro_batches\" must be an integer"));
  REQUIRE(has(msg("{\"micro_batches\": 0}"), "field \"micro_batches\" is 0: must be at least 1"));
  REQUIRE(has(msg("{\"schedule\": \"GPipe\"}"),
              "field \"schedule\" is \"GPipe\": expected one of: 1f1b, gpipe"));
  REQUIRE(has(msg("{\"stage_starts\": \"9,4\"}"),
              "field \"stage_starts\" is \"9,4\": expected increasing"));
  REQUIRE(has(msg("{\"stage_starts\": [4, 1.5]}"), "field \"stage_starts\" must be a string"));
}

TEST_CASE("run spec: micro-batches, schedule and stage starts from text and JSON", "[run]") {
  RunSpec s;
  REQUIRE(s.micro_batches == 1);
  REQUIRE(s.schedule == "1f1b");
  REQUIRE(s.stage_starts.empty());
  s.set("micro_batches", "4");
  s.set("schedule", "gpipe");
  s.set("stage_starts", "4,9");
  REQUIRE(s.micro_batches == 4);
  REQUIRE(s.schedule == "gpipe");
  REQUIRE(s.stage_starts == "4,9");
  REQUIRE(s.get("micro_batches") == "4");
  REQUIRE(RunSpec::value_kind("micro_batches") == "INT");
  REQUIRE(RunSpec::value_kind("stage_starts") == "TEXT");
  const RunSpec j = RunSpec::from_json(
      R"({"micro_batches": 8, "schedule": "1f1b", "stage_starts": "3"})", RunSpec{}, "t");
  REQUIRE(j.micro_batches == 8);
  REQUIRE(j.schedule == "1f1b");
  REQUIRE(j.stage_starts == "3");
  // A JSON list of unit indices is the same as its text.
  REQUIRE(RunSpec::from_json(R"({"stage_starts": [4, 9]})", RunSpec{}, "t").stage_starts == "4,9");
  REQUIRE(RunSpec::from_json(R"({"stage_starts": []})", s, "t").stage_starts.empty());
  REQUIRE(run::parse_stage_starts("4,9") == std::vector<int>{4, 9});
  REQUIRE(run::parse_stage_starts("").empty());
  for (const char* f : {"micro_batches", "schedule", "stage_starts"}) {
    INFO(f);
    const auto& sim = RunSpec::simulation_fields();
    REQUIRE(std::find(sim.begin(), sim.end(), f) != sim.end());
  }
}

TEST_CASE("run spec: micro-batches and stage starts reach the trainer, or are refused early",
          "[run]") {
  RunSpec s = RunSpec::for_simulation();
  for (auto [f, v] : {std::pair{"input", "3x64x128"},
                      {"batch", "8"},
                      {"mesh", "dp=2,sp=2"},
                      {"micro_batches", "4"},
                      {"schedule", "gpipe"}})
    s.set(f, v);
  const run::SimSetup r = run::resolve_sim(s);
  REQUIRE(r.train.micro_batches == 4);
  REQUIRE(r.train.schedule == nn::PipelineSchedule::GPipe);
  REQUIRE(r.train.stage_starts.empty());
  REQUIRE(run::resolve_sim(RunSpec::for_simulation()).train.schedule ==
          nn::PipelineSchedule::OneFOneB);
  RunSpec odd = s;
  odd.batch = 6;
  REQUIRE(has(message([&] { run::resolve_sim(odd); }),
              "batch 6 is not a multiple of micro_batches 4 (--micro-batches); use batch 8 or "
              "micro_batches 3"));
  RunSpec thin = s;  // micro-batches of 2 samples over dp=4
  thin.mesh = "dp=4";
  REQUIRE(has(message([&] { run::resolve_sim(thin); }),
              "batch 8 in micro_batches 4 gives micro-batches of 2 samples, fewer than the 4 ranks "
              "of mesh dim dp (dp=4); use batch 16 or more, or micro_batches 2"));
  RunSpec starts = s;  // no dim pp: no stage to start
  starts.stage_starts = "4";
  REQUIRE(has(message([&] { run::resolve_sim(starts); }),
              "stage_starts '4': mesh dp=2,sp=2 has no pipeline stages (no dim pp); leave "
              "stage_starts empty"));
  RunSpec piped = s;  // with a dim pp the starts reach the trainer as unit indices
  piped.mesh = "pp=2,sp=2";
  piped.stage_starts = "3";
  REQUIRE(run::resolve_sim(piped).train.stage_starts == std::vector<int>{3});
  piped.mesh = "pp=3,sp=2";
  piped.topology = "dgx-a100:2";
  REQUIRE(has(message([&] { run::resolve_sim(piped); }),
              "stage_starts '3': 1 stage start(s) but mesh pp=3,sp=2 has 3 pipeline stages (dim "
              "pp); give 2 increasing unit indices"));
  RunSpec one = RunSpec::for_simulation();  // one micro-batch: the batch against dp as before
  one.mesh = "dp=4";
  one.batch = 2;
  REQUIRE_FALSE(has(message([&] { run::resolve_sim(one); }), "micro_batches"));
}

TEST_CASE("run spec: to_json round-trips every field, over any base", "[run]") {
  RunSpec s = RunSpec::for_simulation();
  for (auto [f, v] : {std::pair{"model", "regnety-400mf"},
                      {"input", "3x64x128"},
                      {"batch", "4"},
                      {"mesh", "dp=2,sp=2"},
                      {"shard", "H"},
                      {"checkpointing", "block"},
                      {"optimizer", "sgd"},
                      {"lr", "0.125"},
                      {"weight_decay", "0"},
                      {"momentum", "0.5"},
                      {"warmup", "0"},
                      {"clip", "0"},
                      {"steps", "3"},
                      {"seed", "7"},
                      {"task", "segment"},
                      {"classes", "7"},
                      {"drop_path", "0.25"},
                      {"dtype", "f64"},
                      {"threads", "2"},
                      {"timeout_s", "12.5"},
                      {"overlap", "false"},
                      {"bucket_mib", "2"},
                      {"topology", "cpu-host:4"},
                      {"device", "cpu-host"},
                      {"calibration", "cal.json"},
                      {"tf32", "true"},
                      {"trace", "t.json"},
                      {"metrics", "m.jsonl"},
                      {"save", "c.ckpt"},
                      {"resume", "r.ckpt"},
                      {"save_every", "5"},
                      {"keep_checkpoints", "2"},
                      {"micro_batches", "2"},
                      {"schedule", "gpipe"},
                      {"stage_starts", "4,9"}})
    s.set(f, v);
  REQUIRE_FALSE(s == RunSpec{});
  REQUIRE(RunSpec::from_json(s.to_json(), RunSpec{}, "t") == s);
  REQUIRE(RunSpec::from_json("{}", s, "t") == s);  // absent fields keep the base's values
  const RunSpec some = RunSpec::from_json(s.to_json({"batch", "mesh"}), RunSpec{}, "t");
  REQUIRE(some.batch == 4);
  REQUIRE(some.mesh == "dp=2,sp=2");
  REQUIRE(some.model == RunSpec{}.model);
  // A model given as its own JSON object is kept as JSON text.
  const RunSpec inline_model = RunSpec::from_json(R"({"model": {"family": "convnext", "name": "mini",
      "depths": [1, 1, 1, 1], "widths": [8, 16, 32, 64]}})", RunSpec{}, "t");
  REQUIRE(inline_model.model.front() == '{');
}

TEST_CASE("run spec: resolution applies every field and refuses what cannot run", "[run]") {
  RunSpec s = RunSpec::for_simulation();
  for (auto [f, v] : {std::pair{"model", "regnety-400mf"}, {"input", "3x64x128"}, {"batch", "4"}, {"mesh", "dp=2,sp=2"},
                      {"shard", "H"}, {"checkpointing", "block"}, {"optimizer", "sgd"}, {"task", "segment"},
                      {"classes", "7"}, {"dtype", "f64"}, {"overlap", "false"}, {"bucket_mib", "2"},
                      {"topology", "dgx-h100"}, {"tf32", "true"}})
    s.set(f, v);
  const run::SimSetup r = run::resolve_sim(s);
  REQUIRE(r.train.model.name.find("regnety") == 0);
  REQUIRE(r.train.model.task == nn::Task::Segment);
  REQUIRE(r.train.model.num_classes == 7);
  REQUIRE(r.train.input == core::Shape{3, 64, 128});
  REQUIRE(r.train.batch == 4);
  REQUIRE(r.mesh.to_string() == "dp=2,sp=2");
  REQUIRE(r.train.shard == "H");
  REQUIRE(r.train.checkpointing == "block");
  REQUIRE(r.train.optimizer.kind == "sgd");
  REQUIRE(r.train.dtype == core::DType::F64);
  REQUIRE_FALSE(r.train.overlap);
  REQUIRE(r.train.bucket_bytes == std::size_t(2) << 20);
  REQUIRE(r.topology.name == "dgx-h100");
  REQUIRE(r.engine.tf32);

  RunSpec big = s;
  big.mesh = "dp=4,sp=4";
  big.input = "3x512x128";
  REQUIRE(has(message([&] { run::resolve_sim(big); }), "has 16 ranks but topology 'dgx-h100' has 8 devices"));
  RunSpec dev = s;
  dev.device = "no-such-gpu";
  REQUIRE(has(message([&] { run::resolve_sim(dev); }), "no-such-gpu"));
  RunSpec model = s;
  model.model = "missing.json";
  REQUIRE(has(message([&] { run::resolve_sim(model); }), "model 'missing.json': no such file"));
  RunSpec backend = RunSpec{};
  backend.backend = "nosuch";
  REQUIRE(has(message([&] { run::resolve_train(backend); }), "backend 'nosuch': not available"));
  RunSpec hier = RunSpec{};  // the communication choices of a training run
  for (auto [f, v] : {std::pair{"mesh", "dp=2,sp=2"}, {"all_reduce", "hier"}, {"node_dim", "dp"},
                      {"checkpointing", "block"}, {"halo_recompute", "exchange"}})
    hier.set(f, v);
  const run::TrainSetup h = run::resolve_train(hier, /*check_backend=*/false);
  REQUIRE(h.mesh_comm.all_reduce == comm::AllReduceAlgorithm::Hierarchical);
  REQUIRE(h.mesh_comm.node_dim == "dp");
  REQUIRE(h.train.halo_recompute == nn::HaloRecompute::Exchange);
  REQUIRE(run::resolve_train(RunSpec{}, false).train.halo_recompute == nn::HaloRecompute::Keep);
  RunSpec hier_sim = RunSpec::for_simulation();  // the simulator replays with the same choices
  for (auto [f, v] : {std::pair{"mesh", "dp=2,sp=2"}, {"all_reduce", "hier"}, {"node_dim", "dp"}}) hier_sim.set(f, v);
  const run::SimSetup hs = run::resolve_sim(hier_sim);
  REQUIRE(hs.mesh_comm.all_reduce == comm::AllReduceAlgorithm::Hierarchical);
  REQUIRE(hs.mesh_comm.node_dim == "dp");
  hier_sim.all_reduce = "auto";  // on GPUs the buckets are device memory, where the runtime's Auto is flat
  hier_sim.topology = "dgx-a100:2";
  REQUIRE(run::resolve_sim(hier_sim).mesh_comm.all_reduce == comm::AllReduceAlgorithm::Flat);
  hier_sim.topology = "cpu-host:4";  // host buffers: Auto chooses per reduction, as the runtime does
  REQUIRE(run::resolve_sim(hier_sim).mesh_comm.all_reduce == comm::AllReduceAlgorithm::Auto);
  hier.node_dim = "node";
  REQUIRE(has(message([&] { run::resolve_train(hier, false); }), "node_dim 'node' is not a dimension of mesh dp=2,sp=2"));
  RunSpec filled = s;  // a field filled member by member is checked at resolution
  filled.batch = 0;
  REQUIRE(has(message([&] { run::resolve_sim(filled); }), "batch '0': must be a positive integer"));
}
