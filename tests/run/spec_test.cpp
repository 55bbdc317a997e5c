// The run description: every field parsed and checked once, from text (the CLI, keyword arguments)
// and from JSON (--config files, the studio, Python); each error names the field and the value;
// to_json round-trips; resolution applies every field and refuses what cannot run.
#include <string>

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
      {"input", "3x5", "expected three positive sizes CxHxW"}, {"input", "3x0x64", "CxHxW"},
      {"batch", "0", "must be a positive integer"},             {"batch", "two", "expected an integer"},
      {"mesh", "sp=0", "sp"},                                   {"shard", "Q", "expected one of: W, H, HW"},
      {"checkpointing", "all", "none, block, stage"},           {"optimizer", "adam", "sgd, adamw"},
      {"halo_recompute", "always", "keep, exchange"},          {"all_reduce", "ring", "auto, flat, hier"},
      {"lr", "-1", ">= 0"},                                     {"weight_decay", "x", "expected a number"},
      {"momentum", "1", "[0, 1)"},                              {"warmup", "-2", "at least 0"},
      {"clip", "-0.5", ">= 0"},                                 {"steps", "0", "at least 1"},
      {"seed", "-3", "non-negative integer"},                   {"task", "detect", "classify, segment"},
      {"classes", "1", "at least 2"},                           {"drop_path", "1.5", "below 1"},
      {"dtype", "bf16", "use one of: f32, f64"},                {"threads", "-1", "at least 0"},
      {"precision", "fp8", "expected fp32, bf16 or fp16"},      {"grad_reduce_dtype", "f64", "expected fp32, bf16 or fp16"},
      {"loss_scale", "-2", "positive number"},
      {"timeout_s", "0", "positive number of seconds"},        {"overlap", "maybe", "expected true or false"},
      {"bucket_mib", "0", "at least 1"},                        {"tf32", "2", "expected true or false"},
      {"data", "", "synthetic"},                                {"backend", "", "backend name"},
      {"topology", "", "preset"},                               {"model", "", "preset"},
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
}

TEST_CASE("run spec: to_json round-trips every field, over any base", "[run]") {
  RunSpec s = RunSpec::for_simulation();
  for (auto [f, v] : {std::pair{"model", "regnety-400mf"}, {"input", "3x64x128"}, {"batch", "4"}, {"mesh", "dp=2,sp=2"},
                      {"shard", "H"}, {"checkpointing", "block"}, {"optimizer", "sgd"}, {"lr", "0.125"},
                      {"weight_decay", "0"}, {"momentum", "0.5"}, {"warmup", "0"}, {"clip", "0"}, {"steps", "3"},
                      {"seed", "7"}, {"task", "segment"}, {"classes", "7"}, {"drop_path", "0.25"}, {"dtype", "f64"},
                      {"threads", "2"}, {"timeout_s", "12.5"}, {"overlap", "false"}, {"bucket_mib", "2"},
                      {"topology", "cpu-host:4"}, {"device", "cpu-host"}, {"calibration", "cal.json"},
                      {"tf32", "true"}, {"trace", "t.json"}, {"metrics", "m.jsonl"}, {"save", "c.ckpt"},
                      {"resume", "r.ckpt"}})
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
