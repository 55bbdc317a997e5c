// Trainer checkpoints: resuming continues a run bit for bit; corrupted, truncated or foreign
// checkpoints are refused with a clear error and leave the trainer untouched.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "support/catch.hpp"
#include "train_equivalence.hpp"
#include "train_harness.hpp"

using namespace tessera;
using test::TrainRun;

namespace {

nn::TrainOptions small_run(const std::string& family) {
  nn::TrainOptions o;
  o.model.name = "ckpt-" + family;
  o.model.family = family;
  o.model.depths = {1, 1, 1, 1};
  o.model.widths = family == "convnext" ? std::vector<int>{8, 16, 16, 24} : std::vector<int>{8, 16, 24, 32};
  o.model.num_classes = 4;
  if (family == "convnext") {
    o.model.drop_path = 0.3;
    o.model.layer_scale_init = 0.5;
  } else {
    o.model.stem_width = 8;
    o.model.se_ratio = 0.25;
  }
  o.input = {3, 32, 96};
  o.batch = 2;
  o.steps = 6;
  o.seed = 5;
  o.optimizer.kind = family == "convnext" ? "adamw" : "sgd";
  o.optimizer.lr = family == "convnext" ? 2e-3 : 0.005;
  o.warmup_steps = 2;
  o.clip_norm = 1.0;
  return o;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera_test_" + name)).string();
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

/// Tries to load `path` into freshly built trainers on `mesh`; returns the first error message
/// (empty when the load succeeded) and whether every rank's parameters were left as built.
std::pair<std::string, bool> try_load(const nn::TrainOptions& o, const std::string& mesh, const std::string& path) {
  std::mutex mu;
  std::string error;
  bool untouched = true;
  nn::TrainOptions zero = o;
  zero.steps = 0;
  test::train(zero, core::DeviceMesh::parse(mesh), [&](nn::Trainer& t) {
    std::vector<std::vector<double>> before;
    for (nn::Parameter* p : t.parameters()) before.push_back(test::to_doubles(p->value));
    std::string e;
    try {
      t.load(path);
    } catch (const tessera::Error& ex) {
      e = ex.what();
    }
    std::vector<std::vector<double>> after;
    for (nn::Parameter* p : t.parameters()) after.push_back(test::to_doubles(p->value));
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = e;
    if (before != after || t.next_step() != 0) untouched = false;
  });
  return {error, untouched};
}

}  // namespace

TEST_CASE("resuming from a checkpoint continues the run bit for bit", "[nn][train][checkpoint]") {
  const std::string family = GENERATE(std::string("convnext"), std::string("regnet"));
  const std::string mesh = GENERATE(std::string("sp=2"), std::string("dp=2,sp=2"));
  INFO(family << " on " << mesh);
  const nn::TrainOptions o = small_run(family);
  const std::string path = temp_path("resume_" + family + ".ckpt");
  const TrainRun full = test::train(o, core::DeviceMesh::parse(mesh));

  nn::TrainOptions first = o;
  first.steps = 3;
  const TrainRun a = test::train(first, core::DeviceMesh::parse(mesh), {}, [&](nn::Trainer& t) { t.save(path); });
  // The second half starts from fresh trainers (new parameters, optimizer, BN statistics) and
  // the checkpoint alone.
  const TrainRun b = test::train(o, core::DeviceMesh::parse(mesh), [&](nn::Trainer& t) {
    t.load(path);
    REQUIRE(t.next_step() == 3);
  });
  std::filesystem::remove(path);
  REQUIRE(a.losses.size() == 3);
  REQUIRE(b.losses.size() == 3);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(a.losses[i] == full.losses[i]);
    REQUIRE(b.losses[i] == full.losses[3 + i]);  // exact equality: bit for bit
    REQUIRE(b.grad_norms[i] == full.grad_norms[3 + i]);
  }
  REQUIRE(b.params == full.params);
}

TEST_CASE("corrupted, truncated and foreign checkpoints are refused and change nothing",
          "[nn][train][checkpoint]") {
  const nn::TrainOptions o = small_run("convnext");
  const std::string path = temp_path("refuse.ckpt");
  nn::TrainOptions two = o;
  two.steps = 2;
  test::train(two, core::DeviceMesh::parse("sp=2"), {}, [&](nn::Trainer& t) { t.save(path); });
  const std::vector<char> good = read_bytes(path);
  REQUIRE(good.size() > 1000);
  REQUIRE(try_load(o, "sp=2", path).first.empty());

  SECTION("a flipped byte") {
    std::vector<char> bad = good;
    bad[bad.size() / 2] ^= 0x10;
    write_bytes(path, bad);
    const auto [error, untouched] = try_load(o, "sp=2", path);
    INFO(error);
    REQUIRE_THAT(error, Catch::Matchers::Contains(path));
    REQUIRE_THAT(error, Catch::Matchers::Contains("checksum") || Catch::Matchers::Contains("corrupt"));
    REQUIRE(untouched);
  }
  SECTION("a truncated file") {
    write_bytes(path, std::vector<char>(good.begin(), good.begin() + static_cast<long>(good.size() * 2 / 3)));
    const auto [error, untouched] = try_load(o, "sp=2", path);
    INFO(error);
    REQUIRE_THAT(error, Catch::Matchers::Contains(path));
    REQUIRE_THAT(error, Catch::Matchers::Contains("truncated"));
    REQUIRE(untouched);
  }
  SECTION("another model") {
    const auto [error, untouched] = try_load(small_run("regnet"), "sp=2", path);
    INFO(error);
    REQUIRE_THAT(error, Catch::Matchers::Contains("another model"));
    REQUIRE(untouched);
  }
  SECTION("another input size") {
    nn::TrainOptions other = o;
    other.input = {3, 32, 128};
    const auto [error, untouched] = try_load(other, "sp=2", path);
    INFO(error);
    REQUIRE_THAT(error, Catch::Matchers::Contains("input"));
    REQUIRE(untouched);
  }
  SECTION("a missing file") {
    const auto [error, untouched] = try_load(o, "sp=2", path + ".missing");
    INFO(error);
    REQUIRE_THAT(error, Catch::Matchers::Contains(path + ".missing"));
    REQUIRE(untouched);
  }
  std::filesystem::remove(path);
}

TEST_CASE("a checkpoint written on one mesh resumes on another", "[nn][train][checkpoint]") {
  // Parameters and optimizer state are replicated, so a checkpoint does not depend on the mesh:
  // 3 steps on sp=2, then 3 more on sp=3 from its checkpoint, are one float32 run of the 6-step
  // schedule, held to the float32 rule (train_equivalence.hpp) like any sharded run.
  const nn::TrainOptions o = small_run("convnext");
  const std::string path = temp_path("remesh.ckpt");
  nn::TrainOptions first = o;
  first.steps = 3;
  const TrainRun a = test::train(first, core::DeviceMesh::parse("sp=2"), {}, [&](nn::Trainer& t) { t.save(path); });
  const TrainRun b = test::train(o, core::DeviceMesh::parse("sp=3"), [&](nn::Trainer& t) { t.load(path); });
  std::filesystem::remove(path);
  REQUIRE(a.losses.size() == 3);
  REQUIRE(b.losses.size() == 3);
  TrainRun joined = b;
  joined.losses.insert(joined.losses.begin(), a.losses.begin(), a.losses.end());
  joined.grad_norms.insert(joined.grad_norms.begin(), a.grad_norms.begin(), a.grad_norms.end());
  joined.replicas_agree = a.replicas_agree && b.replicas_agree;
  REQUIRE_FP32_EQUIVALENT(joined, test::fp32_references(o));
}
