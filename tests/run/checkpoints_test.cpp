// save_every's checkpoints and resume auto: newest_checkpoint() chooses the newest one that reads
// back whole (never a corrupted, truncated, partial or incomplete one, never another name),
// pruning keeps the newest K and touches nothing else, and run::train with save_every, resume
// auto and the data's position in the meta continues a run bit for bit.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "run/tiny_spec.hpp"
#include "run/expect.hpp"
#include "support/catch.hpp"
#include "support/test_utils.hpp"
#include "tessera/data/dataset.hpp"
#include "tessera/nn/checkpoint.hpp"
#include "tessera/run/checkpoints.hpp"
#include "tessera/run/train.hpp"

using namespace tessera;
using runtest::has;
using runtest::message;
using test::read_bytes;
using test::TempDir;
namespace fs = std::filesystem;

namespace {

/// A small checkpoint of `step` at `path` (a stand-in for the trainer's: load_checkpoint_stages
/// only needs the format, the meta and the checksum). With `stages` > 1, the meta says so and
/// path.stage<k> files are written too.
void write_checkpoint(const std::string& path, std::int64_t step, int stages = 1) {
  const core::Tensor t = test::random_tensor({64}, core::DType::F32, std::uint64_t(step) + 1);
  std::map<std::string, std::string> meta{{"format", "tessera-checkpoint-1"},
                                          {"step", std::to_string(step)}};
  if (stages > 1) meta["pipeline_stages"] = std::to_string(stages);
  for (int k = stages - 1; k >= 0; --k) {
    std::map<std::string, std::string> m = meta;
    if (stages > 1) m["pipeline_stage"] = std::to_string(k);
    nn::save_checkpoint(k == 0 ? path : path + ".stage" + std::to_string(k), m, {{"w", &t}});
  }
}

/// Flips bytes in the middle of the file (its tensor data): the checksum no longer matches.
void corrupt(const std::string& path) {
  std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() > 64);
  for (std::size_t i = bytes.size() / 2; i < bytes.size() / 2 + 4; ++i) bytes[i] = char(~bytes[i]);
  test::write_file(path, bytes);
}

void truncate_half(const std::string& path) { fs::resize_file(path, fs::file_size(path) / 2); }

std::vector<std::string> skipped_paths(const run::CheckpointChoice& c) {
  std::vector<std::string> out;
  for (const auto& s : c.skipped) out.push_back(s.first);
  return out;
}

/// Every file name in `dir`, sorted.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("resume auto chooses the newest checkpoint that reads back whole", "[run]") {
  TempDir dir("tessera_checkpoints_newest");
  const std::string save = dir.file("ckpt");
  REQUIRE(run::step_checkpoint_path(save, 20) == save + ".step20");
  write_checkpoint(save + ".step10", 10);
  write_checkpoint(save + ".step20", 20);
  write_checkpoint(save + ".step25", 25);
  corrupt(save + ".step25");
  write_checkpoint(save + ".step28", 28);
  truncate_half(save + ".step28");
  write_checkpoint(save + ".step27", 27, /*stages=*/2);
  fs::remove(save + ".step27.stage1");  // a stage file missing
  // Newer, whole, but not of the pattern: a partial write's temporary file, other names.
  write_checkpoint(save + ".tmp.12345", 99);
  write_checkpoint(save + ".step99.bak", 99);
  write_checkpoint(save + ".step30x", 30);
  write_checkpoint(dir.file("other.step50"), 50);
  write_checkpoint(save + ".step26", 26, /*stages=*/2);
  fs::rename(save + ".step26.stage1", save + ".step26.stage1.tmp.7");

  SECTION("without SAVE: the newest whole SAVE.step<N>, each broken newer one skipped with why") {
    const run::CheckpointChoice c = run::newest_checkpoint(save);
    CHECK(c.path == save + ".step20");
    CHECK(c.step == 20);
    const std::vector<std::string> expected{save + ".step28", save + ".step27", save + ".step26",
                                            save + ".step25"};
    REQUIRE(skipped_paths(c) == expected);
    for (const auto& [path, why] : c.skipped) {
      INFO(path << ": " << why);
      CHECK(has(why, path));  // the reason names the file
    }
    CHECK(has(c.skipped[1].second, ".stage1"));  // the missing stage file is named
  }
  SECTION("SAVE newer than every SAVE.step<N> is chosen by its meta's step") {
    write_checkpoint(save, 40);
    const run::CheckpointChoice c = run::newest_checkpoint(save);
    CHECK(c.path == save);
    CHECK(c.step == 40);
    CHECK(c.skipped.empty());
  }
  SECTION("SAVE older than a whole SAVE.step<N> is not chosen, a corrupted SAVE is skipped") {
    write_checkpoint(save, 15);
    CHECK(run::newest_checkpoint(save).path == save + ".step20");
    corrupt(save);
    fs::remove(save + ".step20");
    fs::remove(save + ".step10");
    const run::CheckpointChoice c = run::newest_checkpoint(save);
    CHECK(c.path.empty());
    CHECK(c.step == 0);
    CHECK(skipped_paths(c).front() == save);
    CHECK(c.skipped.size() == 5);
  }
  SECTION("a SAVE.step<N> holding another step is skipped") {
    write_checkpoint(save + ".step60", 12);
    const run::CheckpointChoice c = run::newest_checkpoint(save);
    CHECK(c.path == save + ".step20");
    REQUIRE_FALSE(c.skipped.empty());
    CHECK(c.skipped.front().first == save + ".step60");
    CHECK(has(c.skipped.front().second, "holds step 12"));
  }
  SECTION("a folder that does not exist has none") {
    const run::CheckpointChoice c = run::newest_checkpoint(dir.file("nowhere/ckpt"));
    CHECK(c.path.empty());
    CHECK(c.skipped.empty());
  }
}

TEST_CASE("pruning keeps the newest step checkpoints and touches nothing else", "[run]") {
  TempDir dir("tessera_checkpoints_prune");
  const std::string save = dir.file("ckpt");
  for (int s : {5, 10, 15, 20}) write_checkpoint(save + ".step" + std::to_string(s), s);
  write_checkpoint(save + ".step5", 5, /*stages=*/3);  // with stage files .stage1, .stage2
  for (const std::string& other :
       {save, save + ".tmp.77", save + ".step3x", save + ".step1.bak", dir.file("other.step1")})
    write_checkpoint(other, 1);
  const std::vector<std::string> before = names_in(dir.path);

  const std::vector<std::string> removed = run::prune_step_checkpoints(save, 2);
  const std::vector<std::string> expected{save + ".step10", save + ".step5", save + ".step5.stage2",
                                          save + ".step5.stage1"};
  std::vector<std::string> got = removed;
  std::vector<std::string> want = expected;
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  CHECK(got == want);
  CHECK(removed.front() == save + ".step10");  // oldest checkpoint last
  std::vector<std::string> left;
  for (const std::string& n : before)
    if (std::find(want.begin(), want.end(), dir.file(n)) == want.end()) left.push_back(n);
  CHECK(names_in(dir.path) == left);
  CHECK(run::prune_step_checkpoints(save, 2).empty());  // nothing more to do
  CHECK(run::prune_step_checkpoints(save, 5).empty());
  CHECK(has(message([&] { run::prune_step_checkpoints(save, 0); }), "keep_checkpoints 0"));
}

namespace {

/// Every tensor of a checkpoint as float64, by name.
std::map<std::string, std::vector<double>> tensors_of(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, t] : nn::load_checkpoint(path).tensors) out[name] = test::to_doubles(t);
  return out;
}

run::TrainCallbacks collect_notices(std::vector<std::pair<core::ReportLevel, std::string>>& out) {
  run::TrainCallbacks c;
  c.on_notice = [&out](core::ReportLevel level, const std::string& text) {
    out.emplace_back(level, text);
  };
  return c;
}

}  // namespace

TEST_CASE("save_every writes SAVE.step<N>, and resume auto continues bit for bit", "[run]") {
  TempDir dir("tessera_checkpoints_train");
  // The reference: five steps in one go.
  run::RunSpec straight = runtest::tiny_train_run(5);
  straight.set("save", dir.file("straight"));
  run::train(straight);

  run::RunSpec first = runtest::tiny_train_run(3);
  const std::string save = dir.file("ckpt");
  first.set("save", save);
  first.set("save_every", "1");
  first.set("keep_checkpoints", "1");
  run::train(first);
  // Steps 1 and 2 were saved as SAVE.step<N>, step 1's pruned; step 3 is the final save.
  CHECK(names_in(dir.path) == std::vector<std::string>{"ckpt", "ckpt.step2", "straight"});
  const auto meta = nn::load_checkpoint(save + ".step2").meta;
  CHECK(meta.at("step") == "2");
  CHECK(meta.at("seed") == "0");
  CHECK(meta.at("shuffle") == "true");
  CHECK(meta.at("data_size") == std::to_string(data::SyntheticOptions{}.size));
  CHECK(meta.at("data_position") == "4");  // 2 steps of batch 2
  CHECK(meta.at("data_epoch") == "0");
  CHECK(meta.at("data_next_index") == "4");

  // SAVE itself is broken: resume auto warns and takes SAVE.step2, then runs to step 5.
  corrupt(save);
  run::RunSpec again = runtest::tiny_train_run(5);
  again.set("save", save);
  again.set("resume", "auto");
  std::vector<std::pair<core::ReportLevel, std::string>> notices;
  const run::TrainResult r = run::train(run::resolve_train(again), collect_notices(notices));
  CHECK(r.steps.size() == 3);  // steps 3, 4, 5
  REQUIRE(notices.size() >= 2);
  CHECK(notices[0].first == core::ReportLevel::Warning);
  CHECK(has(notices[0].second, "'" + save + "'"));
  CHECK(notices[1].first == core::ReportLevel::Info);
  CHECK(has(notices[1].second, save + ".step2' (step 2)"));
  CHECK(tensors_of(save) == tensors_of(dir.file("straight")));

  SECTION("none left: the run starts at step 0 and says so") {
    TempDir empty("tessera_checkpoints_empty");
    run::RunSpec fresh = runtest::tiny_train_run(1);
    fresh.set("save", empty.file("ckpt"));
    fresh.set("resume", "auto");
    notices.clear();
    CHECK(run::train(run::resolve_train(fresh), collect_notices(notices)).steps.size() == 1);
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].first == core::ReportLevel::Info);
    CHECK(has(notices[0].second, "starting at step 0"));
  }
  SECTION("a checkpoint of another seed or order is refused, naming the flag") {
    run::RunSpec other = runtest::tiny_train_run(5);
    other.set("resume", save + ".step2");
    other.set("seed", "3");
    CHECK(has(message([&] { run::train(other); }), "resume with --seed 0"));
    other.set("seed", "0");
    other.set("shuffle", "false");
    CHECK(has(message([&] { run::train(other); }), "without --no-shuffle"));
  }
  SECTION("a checkpoint without the data's keys (an older one) still loads") {
    nn::CheckpointData old = nn::load_checkpoint(save + ".step2");
    for (const char* k :
         {"seed", "shuffle", "data_size", "data_position", "data_epoch", "data_next_index"})
      old.meta.erase(k);
    std::vector<std::pair<std::string, const core::Tensor*>> ts;
    for (const auto& [n, t] : old.tensors) ts.emplace_back(n, &t);
    nn::save_checkpoint(dir.file("old"), old.meta, ts);
    run::RunSpec resumed = runtest::tiny_train_run(5);
    resumed.set("resume", dir.file("old"));
    resumed.set("save", dir.file("from_old"));
    CHECK(run::train(resumed).steps.size() == 3);
    CHECK(tensors_of(dir.file("from_old")) == tensors_of(dir.file("straight")));
  }
}

TEST_CASE("save_every and resume auto need save, and are refused naming both fields", "[run]") {
  run::RunSpec s = runtest::tiny_train_run(2);
  s.set("save_every", "2");
  const std::string every = message([&] { run::resolve_train(s); });
  CHECK(has(every, "save_every 2"));
  CHECK(has(every, "give save (--save PATH)"));
  s.set("save_every", "0");
  s.set("resume", "auto");
  const std::string resume = message([&] { run::resolve_train(s); });
  CHECK(has(resume, "resume 'auto'"));
  CHECK(has(resume, "save is empty"));
  CHECK(has(message([&] { s.set("save_every", "-1"); }), "save_every '-1': must be at least 0"));
  CHECK(has(message([&] { s.set("keep_checkpoints", "0"); }),
            "keep_checkpoints '0': must be at least 1"));
}
