// A diverged run stops: at the first non-finite loss or gradient every rank throws NonFiniteError
// at the same step with the same message, naming the first non-finite gradient from the loss
// back, and that step's update is not applied. Also checks what lets the ranks agree without
// communicating: every parameter's reduced gradient and the norm are bit-identical on every rank.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "support/catch.hpp"
#include "train_harness.hpp"

using namespace tessera;

namespace {

nn::ModelSpec tiny(const std::string& family, nn::Task task) {
  nn::ModelSpec m;
  m.name = "nonfinite-" + family;
  m.family = family;
  m.depths = {1, 1, 1, 1};
  m.task = task;
  m.num_classes = 4;
  if (family == "convnext") {
    m.widths = {8, 16, 16, 24};
    m.layer_scale_init = 0.5;
  } else {
    m.widths = {8, 16, 24, 32};
    m.stem_width = 8;
    m.group_width = 8;
    m.se_ratio = 0.25;  // SE: FC layers whose input is replicated over the spatial dims
  }
  return m;
}

/// The command of the issue in small: AdamW at lr 1e8 without clipping or warmup diverges.
nn::TrainOptions diverging() {
  nn::TrainOptions o;
  o.model = tiny("convnext", nn::Task::Segment);
  o.input = {3, 32, 64};
  o.batch = 2;
  o.steps = 4;
  o.seed = 7;
  o.optimizer.kind = "adamw";
  o.optimizer.lr = 1e8;
  o.clip_norm = 0;
  o.warmup_steps = 0;
  return o;
}

std::vector<unsigned char> bytes_of(const core::Tensor& t) {
  const core::Tensor c = t.is_contiguous() ? t : t.clone();
  const auto* p = static_cast<const unsigned char*>(static_cast<const void*>(c.data<float>()));
  return {p, p + c.nbytes()};
}

bool all_finite(const core::Tensor& t) {
  for (double v : test::to_doubles(t))
    if (!std::isfinite(v)) return false;
  return true;
}

std::vector<char> read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tessera_test_nonfinite_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

/// What one rank saw of a run that should diverge.
struct RankOutcome {
  bool threw = false;
  std::string message, parameter;
  std::int64_t error_step = -1, next_step_after = -1;
  std::vector<double> norms;                               ///< of the steps that completed
  std::vector<std::vector<unsigned char>> before, after;   ///< parameter bytes around the failed step
  bool culprit_not_finite = false;  ///< the named parameter's gradient holds a NaN or inf
  bool later_finite = true;         ///< every parameter nearer the loss has a finite gradient
  std::string saved_before, saved_after;  ///< checkpoints before the failed step and after the throw
};

std::vector<RankOutcome> run_diverging(const nn::TrainOptions& o, const core::DeviceMesh& mesh, const std::string& tag) {
  const int P = mesh.size();
  auto ds = test::dataset_for(o);
  std::vector<RankOutcome> out(static_cast<std::size_t>(P));
  const std::string ck_before = temp_path(tag + "_before.ckpt"), ck_after = temp_path(tag + "_after.ckpt");
  comm::local::run(P, [&](comm::Backend& world) {
    const int rank = world.rank();
    RankOutcome& r = out[static_cast<std::size_t>(rank)];
    comm::MeshComm mc(mesh, world);
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(rank));
    compute::cpu::CpuBackend cpu(1);
    nn::Trainer t(o, &mc, cpu, alloc, ds);
    while (t.next_step() < o.steps) {
      std::vector<std::vector<unsigned char>> before;
      for (nn::Parameter* p : t.parameters()) before.push_back(bytes_of(p->value));
      t.save(ck_before);  // collective; overwritten every step, so it holds the last good state
      try {
        r.norms.push_back(t.step().grad_norm);
      } catch (const NonFiniteError& e) {
        r.threw = true;
        r.message = e.what();
        r.parameter = e.parameter();
        r.error_step = e.step();
        r.next_step_after = t.next_step();
        r.before = std::move(before);
        for (nn::Parameter* p : t.parameters()) r.after.push_back(bytes_of(p->value));
        // The gradients of the failed step are still in place: check the culprit against them.
        const auto& ps = t.parameters();
        std::size_t at = ps.size();
        for (std::size_t i = 0; i < ps.size(); ++i)
          if (ps[i]->name == r.parameter) at = i;
        if (at < ps.size()) {
          r.culprit_not_finite = !all_finite(ps[at]->grad);
          for (std::size_t i = at + 1; i < ps.size(); ++i) r.later_finite = r.later_finite && all_finite(ps[i]->grad);
        }
        t.save(ck_after);
        break;
      }
    }
  });
  out[0].saved_before = ck_before;
  out[0].saved_after = ck_after;
  return out;
}

/// The synthetic data, except that the first time `rank` loads batch `step` its images come back
/// as NaN: a corrupted read on one rank, which a retry of the step reads correctly. A rank's loader
/// (one thread) loads its steps in order, so the rank's load number `step` is batch `step`.
class BadReadOnce final : public data::Dataset {
 public:
  BadReadOnce(std::shared_ptr<const data::Dataset> inner, std::int64_t step, int rank)
      : inner_(std::move(inner)), step_(step), rank_(rank) {}
  data::Task task() const noexcept override { return inner_->task(); }
  int num_classes() const noexcept override { return inner_->num_classes(); }
  core::Shape image_shape() const override { return inner_->image_shape(); }
  std::int64_t size() const noexcept override { return inner_->size(); }
  void load_into(std::span<const std::int64_t> samples, const core::Layout& layout, int rank,
                 data::Batch& b) const override {
    inner_->load_into(samples, layout, rank, b);
    if (rank == rank_ && loads_++ == step_) b.images.fill(std::nan(""));
  }

 private:
  std::shared_ptr<const data::Dataset> inner_;
  std::int64_t step_;
  int rank_;
  mutable std::atomic<std::int64_t> loads_{0};  // of rank_
};

}  // namespace

TEST_CASE("a diverged run stops on every rank at the same step naming the first non-finite gradient", "[nn][train]") {
  const nn::TrainOptions o = diverging();
  struct MeshCase {
    core::DeviceMesh mesh;
    const char* tag;
  };
  const std::vector<MeshCase> meshes = {{core::DeviceMesh({1}, {"sp"}), "r1"},
                                        {core::DeviceMesh({2}, {"sp"}), "sp2"},
                                        {core::DeviceMesh({2, 2}, {"dp", "sp"}), "dp2sp2"}};
  std::int64_t first_step = -1;
  std::string first_param;
  for (const MeshCase& mc : meshes) {
    INFO("mesh " << mc.mesh.to_string());
    const std::vector<RankOutcome> rs = run_diverging(o, mc.mesh, mc.tag);
    const RankOutcome& r0 = rs[0];
    REQUIRE(r0.threw);
    INFO("rank 0's message: " << r0.message);
    // The step: the first update at lr 1e8 wrecks the weights, so the second step diverges; the
    // steps before it were finite and their norms agree on every rank.
    REQUIRE(r0.error_step >= 1);
    REQUIRE(r0.error_step < o.steps);
    REQUIRE(r0.norms.size() == static_cast<std::size_t>(r0.error_step));
    for (double n : r0.norms) REQUIRE(std::isfinite(n));
    REQUIRE(r0.message.find("step " + std::to_string(r0.error_step + 1) + "/" + std::to_string(o.steps)) !=
            std::string::npos);
    // A parameter is named, and it is the first non-finite gradient from the loss back.
    REQUIRE(!r0.parameter.empty());
    REQUIRE(r0.message.find("'" + r0.parameter + "'") != std::string::npos);
    REQUIRE(r0.culprit_not_finite);
    REQUIRE(r0.later_finite);
    REQUIRE(r0.message.find("--lr") != std::string::npos);
    REQUIRE(r0.message.find("--clip") != std::string::npos);
    for (std::size_t q = 0; q < rs.size(); ++q) {
      INFO("rank " << q);
      const RankOutcome& r = rs[q];
      REQUIRE(r.threw);
      REQUIRE(r.error_step == r0.error_step);
      REQUIRE(r.message == r0.message);
      REQUIRE(r.parameter == r0.parameter);
      REQUIRE(r.norms == r0.norms);
      // The failed step changed nothing: parameters bit for bit, and the step did not advance.
      REQUIRE(r.next_step_after == r.error_step);
      REQUIRE(r.after.size() == r.before.size());
      for (std::size_t i = 0; i < r.before.size(); ++i) REQUIRE(r.after[i] == r.before[i]);
    }
    // Optimizer state too: a checkpoint written after the throw equals the one written before the
    // failed step, byte for byte (this model has no BatchNorm statistics).
    const auto before = read_file_bytes(r0.saved_before), after = read_file_bytes(r0.saved_after);
    std::filesystem::remove(r0.saved_before);
    std::filesystem::remove(r0.saved_after);
    REQUIRE(!before.empty());
    REQUIRE(before == after);
    // Sharding does not change where it blew up.
    if (first_step < 0) {
      first_step = r0.error_step;
      first_param = r0.parameter;
    }
    REQUIRE(r0.error_step == first_step);
    REQUIRE(r0.parameter == first_param);
  }
}

TEST_CASE("a learning rate that does not diverge trains every step without an error", "[nn][train]") {
  nn::TrainOptions o = diverging();
  o.optimizer.lr = 2e-3;
  o.clip_norm = 1.0;
  const std::vector<RankOutcome> rs = run_diverging(o, core::DeviceMesh({2}, {"sp"}), "fine");
  std::filesystem::remove(rs[0].saved_before);
  for (const RankOutcome& r : rs) {
    REQUIRE(!r.threw);
    REQUIRE(r.norms.size() == static_cast<std::size_t>(o.steps));
    REQUIRE(r.norms == rs[0].norms);
  }
}

// Why no extra all-reduce is needed: the decision reads the all-reduced loss and the norm of the
// reduced gradients. That agrees on every rank only if every parameter's gradient is bit-identical
// on every rank after the bucket all-reduces, including parameters whose gradient is reduced over
// some mesh dims only (a classification head and the SE layers after the global pool see an input
// replicated over the spatial dims and compute the same gradient on each of those ranks).
TEST_CASE("every parameter's reduced gradient and the norm are bit-identical on every rank", "[nn][train]") {
  struct Case {
    const char* family;
    nn::Task task;
    core::DeviceMesh mesh;
  };
  const std::vector<Case> cases = {
      {"convnext", nn::Task::Classify, core::DeviceMesh({2, 2}, {"dp", "sp"})},
      {"convnext", nn::Task::Segment, core::DeviceMesh({2}, {"sp"})},
      {"regnet", nn::Task::Classify, core::DeviceMesh({2, 2}, {"dp", "sp"})},
      {"regnet", nn::Task::Classify, core::DeviceMesh({2, 2}, {"sp_h", "sp_w"})},
  };
  for (const Case& c : cases) {
    nn::TrainOptions o = diverging();
    o.model = tiny(c.family, c.task);
    o.batch = 4;
    o.input = {3, 64, 64};
    o.optimizer.kind = c.family == std::string("convnext") ? "adamw" : "sgd";
    o.optimizer.lr = c.family == std::string("convnext") ? 2e-3 : 0.005;
    o.clip_norm = 1.0;
    o.steps = 2;
    INFO(c.family << (c.task == nn::Task::Classify ? " classify" : " segment") << " on " << c.mesh.to_string());
    const int P = c.mesh.size();
    auto ds = test::dataset_for(o);
    // [rank][step] -> norm bits; [rank][step][param] -> gradient bytes
    std::vector<std::vector<double>> norms(static_cast<std::size_t>(P));
    std::vector<std::vector<std::vector<std::vector<unsigned char>>>> grads(static_cast<std::size_t>(P));
    std::vector<std::string> names, partial_only;
    comm::local::run(P, [&](comm::Backend& world) {
      const int rank = world.rank();
      const auto ur = static_cast<std::size_t>(rank);
      comm::MeshComm mc(c.mesh, world);
      auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(rank));
      compute::cpu::CpuBackend cpu(1);
      nn::Trainer t(o, &mc, cpu, alloc, ds);
      while (t.next_step() < o.steps) {
        norms[ur].push_back(t.step().grad_norm);
        std::vector<std::vector<unsigned char>> g;
        for (nn::Parameter* p : t.parameters()) g.push_back(bytes_of(p->grad));
        grads[ur].push_back(std::move(g));
      }
      if (rank == 0)
        for (nn::Parameter* p : t.parameters()) {
          names.push_back(p->name);
          if (static_cast<int>(p->grad_reduce_mesh_dims.size()) < c.mesh.ndim()) partial_only.push_back(p->name);
        }
    });
    // The cases must include parameters not reduced over every mesh dim, or they prove nothing.
    if (c.task == nn::Task::Classify) REQUIRE(!partial_only.empty());
    for (int q = 1; q < P; ++q) {
      const auto uq = static_cast<std::size_t>(q);
      INFO("rank " << q << " vs rank 0");
      REQUIRE(std::memcmp(norms[uq].data(), norms[0].data(), norms[0].size() * sizeof(double)) == 0);
      for (std::size_t s = 0; s < grads[0].size(); ++s)
        for (std::size_t i = 0; i < names.size(); ++i) {
          INFO("step " << s << " parameter " << names[i]);
          REQUIRE(grads[uq][s][i] == grads[0][s][i]);
        }
    }
  }
}

// Nothing of a failed step leaks into the run: parameters, optimizer state (AdamW's moments and
// its step counter, which bias correction reads) and the step index. One rank reads a corrupted
// (NaN) batch once; every rank stops at that step; retrying it, the run ends bit for bit where a
// run that never failed ends. Clipping is on: a non-finite norm must not scale the gradients.
TEST_CASE("a step stopped by one rank's bad batch leaves nothing behind and its retry matches a clean run",
          "[nn][train]") {
  nn::TrainOptions o = diverging();
  o.optimizer.lr = 2e-3;
  o.clip_norm = 1.0;
  o.warmup_steps = 1;
  o.batch = 2;
  for (const core::DeviceMesh& mesh : {core::DeviceMesh({1}, {"sp"}), core::DeviceMesh({2}, {"sp"}),
                                       core::DeviceMesh({2, 2}, {"dp", "sp"})}) {
    INFO("mesh " << mesh.to_string());
    const int P = mesh.size();
    const auto clean = test::dataset_for(o);
    const int bad_rank = P - 1;
    struct Seen {
      std::vector<std::string> errors;
      std::vector<std::int64_t> error_steps;
      std::vector<double> losses;
      std::vector<std::vector<unsigned char>> final_params;
    };
    auto run = [&](std::shared_ptr<const data::Dataset> ds) {
      std::vector<Seen> seen(static_cast<std::size_t>(P));
      comm::local::run(P, [&](comm::Backend& world) {
        Seen& me = seen[static_cast<std::size_t>(world.rank())];
        comm::MeshComm mc(mesh, world);
        auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(world.rank()));
        compute::cpu::CpuBackend cpu(1);
        nn::Trainer t(o, &mc, cpu, alloc, ds);
        for (int attempt = 0; t.next_step() < o.steps && attempt < 2 * o.steps; ++attempt) {
          try {
            me.losses.push_back(t.step().loss);
          } catch (const NonFiniteError& e) {
            me.errors.push_back(e.what());
            me.error_steps.push_back(e.step());
          }
        }
        for (nn::Parameter* p : t.parameters()) me.final_params.push_back(bytes_of(p->value));
      });
      return seen;
    };
    const std::vector<Seen> ref = run(clean);
    const std::vector<Seen> got = run(std::make_shared<BadReadOnce>(clean, 1, bad_rank));
    for (int q = 0; q < P; ++q) {
      INFO("rank " << q);
      const Seen& g = got[static_cast<std::size_t>(q)];
      const Seen& r = ref[static_cast<std::size_t>(q)];
      REQUIRE(r.errors.empty());
      // Every rank, not only the one with the bad batch, stopped once, at step 1, with one message.
      REQUIRE(g.errors.size() == 1);
      REQUIRE(g.error_steps == std::vector<std::int64_t>{1});
      REQUIRE(g.errors[0] == got[0].errors[0]);
      REQUIRE(g.errors[0].find("step 2/4") != std::string::npos);
      REQUIRE(g.errors[0].find("clip harder (--clip, now 1)") != std::string::npos);
      REQUIRE(g.losses == r.losses);
      REQUIRE(g.final_params.size() == r.final_params.size());
      for (std::size_t i = 0; i < r.final_params.size(); ++i) REQUIRE(g.final_params[i] == r.final_params[i]);
    }
  }
}
