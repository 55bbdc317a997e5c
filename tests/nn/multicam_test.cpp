// The multi-camera hybrid (ModelSpec::views): GatherViews against a naive float64 reference on 1,
// 2 and 3 dp ranks (forward, backward, and their adjointness), the scene labels, and the
// training equivalence: the multi-camera model with its views split over dp, with the fusion on
// its own pipeline stage, and with two views per rank, equals the one-rank run with the same
// micro-batches under the float32 rule (train_equivalence.hpp), and in float64 to 1e-9.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "nn/module_harness.hpp"
#include "nn/pipeline_harness.hpp"
#include "support/catch.hpp"
#include "tessera/data/scene_labels.hpp"
#include "tessera/nn/layers.hpp"
#include "train_equivalence.hpp"
#include "train_models.hpp"

using namespace tessera;
using Catch::Matchers::Contains;
using test::StagedRun;

namespace {

// ---- GatherViews against the reference ----

/// y[s, v·C + c, h, w] = x[s·V + v, c, h, w], element by element (x is (N·V, C, H, W)).
std::vector<double> gather_ref(const std::vector<double>& x, const core::Shape& xs, int views) {
  const core::Shape ys{xs[0] / views, views * xs[1], xs[2], xs[3]};
  std::vector<double> y(x.size());
  test::for_box(xs, {0, 0, 0, 0}, [&](std::int64_t i, const core::Shape& g) {
    y[std::size_t(test::flat_index(
        ys, {g[0] / views, (g[0] % views) * xs[1] + g[1], g[2], g[3]}))] = x[std::size_t(i)];
  });
  return y;
}

/// dx[i, c, h, w] = dy[i / V, (i mod V)·C + c, h, w]: the adjoint of gather_ref.
std::vector<double> scatter_ref(const std::vector<double>& dy, const core::Shape& xs, int views) {
  const core::Shape ys{xs[0] / views, views * xs[1], xs[2], xs[3]};
  std::vector<double> dx(dy.size());
  test::for_box(xs, {0, 0, 0, 0}, [&](std::int64_t i, const core::Shape& g) {
    dx[std::size_t(i)] = dy[std::size_t(
        test::flat_index(ys, {g[0] / views, (g[0] % views) * xs[1] + g[1], g[2], g[3]}))];
  });
  return dx;
}

/// What every rank's GatherViews computed, assembled into global arrays; `problems` lists the
/// ranks whose own output or input gradient differs from the reference's box.
struct GatherRun {
  std::vector<double> y, dx;
  std::string problems;
};

GatherRun run_gather(const core::Layout& in, int views, const std::vector<double>& x,
                     const std::vector<double>& dy, core::DType dtype = core::DType::F64) {
  const core::Shape& xs = in.global_shape();
  const std::vector<double> want_y = gather_ref(x, xs, views), want_dx = scatter_ref(dy, xs, views);
  GatherRun r;
  r.y.assign(x.size(), 0.0);
  r.dx.assign(x.size(), 0.0);
  std::mutex mu;
  comm::local::run(in.mesh().size(), [&](comm::Backend& world) {
    const int rank = world.rank();
    comm::MeshComm mesh(in.mesh(), world);
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(rank));
    compute::cpu::CpuBackend cpu(1);
    nn::GatherViews g("fusion.gather", views);
    nn::SetupContext sc;
    sc.rank = rank;
    sc.allocator = alloc;
    sc.dtype = dtype;
    const core::Layout out = g.setup(in, sc);
    nn::Context ctx;
    ctx.mesh = &mesh;
    ctx.compute = &cpu;
    ctx.allocator = alloc;
    const core::Shape& ys = out.global_shape();
    const auto box = [&](const std::vector<double>& v, const core::Layout& l) {
      return test::box_of(v, l.global_shape(), l.local_offset(rank), l.local_shape(rank),
                          core::DType::F64);
    };
    const core::Tensor y = g.forward(ctx, box(x, in));
    const core::Tensor dx = g.backward(ctx, box(dy, out));
    std::lock_guard<std::mutex> lock(mu);
    if (test::to_doubles(y) != test::to_doubles(box(want_y, out)))
      r.problems += "rank " + std::to_string(rank) + ": output differs\n";
    if (test::to_doubles(dx) != test::to_doubles(box(want_dx, in)))
      r.problems += "rank " + std::to_string(rank) + ": input gradient differs\n";
    test::put_box(r.y, ys, out.local_offset(rank), y);
    test::put_box(r.dx, xs, in.local_offset(rank), dx);
  });
  return r;
}

/// An (N·V, C, H, W) layout: dim 0 over "dp", W over "sp" when the mesh has it.
core::Layout views_layout(const char* mesh, const core::Shape& shape) {
  const core::DeviceMesh m = core::DeviceMesh::parse(mesh);
  std::vector<core::Placement> pl;
  for (int d = 0; d < m.ndim(); ++d)
    pl.push_back(m.dim_name(d) == "dp" ? core::Shard(0) : core::Shard(3));
  return core::Layout(m, shape, pl);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ---- training ----

/// test::small_convnext over `views` camera views (fusion_dim 16) on 3x32x64 images, a batch of
/// `scenes` scenes, 3 steps of AdamW, M micro-batches.
nn::TrainOptions cam_options(int views, int scenes, int micro_batches) {
  nn::ModelSpec m = test::small_convnext();
  m.name = "test-multicam";
  m.views = views;
  m.fusion_dim = 16;
  nn::TrainOptions o = test::options(m, "adamw");
  o.input = {3, 32, 64};
  o.batch = views * scenes;
  o.steps = 3;
  o.micro_batches = micro_batches;
  return o;
}

/// The index in Trainer::units() of the GatherViews unit.
int gather_unit(const nn::TrainOptions& o) {
  const std::vector<std::string> kinds = test::unit_kinds(o);
  const auto it = std::find(kinds.begin(), kinds.end(), "gather_views");
  REQUIRE(it != kinds.end());
  return static_cast<int>(it - kinds.begin());
}

void require_staged_equivalent(const StagedRun& r, const test::Fp32References& refs) {
  INFO(r.layout_problems);
  REQUIRE(r.layout_problems.empty());
  REQUIRE(r.run.names == refs.one64.names);
  REQUIRE_FP32_EQUIVALENT(r.run, refs);
}

struct CamCase {
  const char* mesh;
  int views, scenes, micro_batches;
  bool cut_at_gather;  ///< pp=2 with stage 1 beginning at GatherViews
  const char* what;
};

/// Each case's float32 run (rule) and float64 run (1e-9) against its one-rank references.
void check_case(const CamCase& c) {
  INFO(c.what << ": mesh " << c.mesh << ", " << c.views << " views, " << c.scenes
              << " scenes, M = " << c.micro_batches);
  nn::TrainOptions o = cam_options(c.views, c.scenes, c.micro_batches);
  const test::Fp32References refs = test::fp32_references(o);
  if (c.cut_at_gather) o.stage_starts = {gather_unit(o)};
  const core::DeviceMesh mesh = core::DeviceMesh::parse(c.mesh);
  require_staged_equivalent(test::train_staged(o, mesh), refs);
  o.dtype = core::DType::F64;
  test::require_close_runs(test::train_staged(o, mesh), refs.one64, 1e-9);
}

}  // namespace

TEST_CASE("GatherViews equals the float64 reference on 1, 2 and 3 dp ranks", "[nn][multicam]") {
  const int views = 3;
  const core::Shape xs{2 * views, 2, 3, 5};  // 2 scenes of 3 views, C = 2, 3x5 pixels
  const std::vector<double> x = test::random_doubles(std::size_t(core::shape_numel(xs)), 11);
  const std::vector<double> dy = test::random_doubles(x.size(), 12);
  // dp=3: two images per rank, so rank 1 holds the last view of scene 0 and the first of scene 1.
  for (const char* mesh : {"dp=1", "dp=2", "dp=3", "dp=2,sp=2", "sp=2,dp=3"}) {
    INFO("mesh " << mesh);
    const GatherRun r = run_gather(views_layout(mesh, xs), views, x, dy);
    INFO(r.problems);
    REQUIRE(r.problems.empty());
    // Adjoint (dot-product) test: <G x, dy> = <x, Gᵀ dy>.
    const double lhs = dot(r.y, dy), rhs = dot(x, r.dx);
    REQUIRE(std::abs(lhs - rhs) <= 1e-12 * std::max(1.0, std::abs(lhs)));
  }
  // Mixed precision: the activations travel in their own 16-bit dtype, moved bit for bit.
  for (const core::DType dt : {core::DType::BF16, core::DType::F16}) {
    INFO(core::dtype_name(dt) << " on dp=3");
    const GatherRun r = run_gather(views_layout("dp=3", xs), views, x, dy, dt);
    INFO(r.problems);
    REQUIRE(r.problems.empty());
  }
}

TEST_CASE("GatherViews refuses batches it cannot gather, with the fix", "[nn][multicam]") {
  nn::SetupContext sc;
  sc.allocator = std::make_shared<core::Allocator>("setup");
  const auto setup = [&](const char* mesh, const core::Shape& shape, int views) {
    return test::error_of([&] {
      nn::GatherViews g("fusion.gather", views);
      g.setup(views_layout(mesh, shape), sc);
    });
  };
  REQUIRE_THAT(setup("dp=4", {6, 2, 4, 4}, 3),
               Contains("6 images over dp=4 give the ranks unequal shares"));
  REQUIRE_THAT(setup("dp=1", {5, 2, 4, 4}, 3),
               Contains("is not a whole number of scenes of 3 views"));
  const core::Layout by_sp(core::DeviceMesh::parse("sp=2"), {6, 2, 4, 4}, {core::Shard(0)});
  REQUIRE_THAT(test::error_of([&] {
                 nn::GatherViews g("fusion.gather", 3);
                 g.setup(by_sp, sc);
               }),
               Contains("only \"dp\" may split a batch of views"));
}

TEST_CASE("scene labels give every view its scene's label and keep its pixels", "[nn][multicam]") {
  data::SyntheticOptions d;
  d.height = 32;
  d.width = 32;
  d.size = 64;
  auto inner = std::shared_ptr<const data::Dataset>(data::make_synthetic(d));
  auto scenes = data::scene_labels(inner, 3);
  const core::Layout l = core::Layout::replicated(core::DeviceMesh({1}, {"sp"}), {12, 3, 32, 32});
  const std::vector<std::int64_t> order{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const data::Batch got = scenes->load_samples(order, l, 0, nullptr);
  const data::Batch raw = inner->load_samples(order, l, 0, nullptr);
  REQUIRE(test::to_doubles(got.images) == test::to_doubles(raw.images));
  const auto ints = [](const core::Tensor& t) {
    return std::vector<std::int64_t>(t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel());
  };
  const std::vector<std::int64_t> labels = ints(got.labels), raw_labels = ints(raw.labels);
  for (std::size_t n = 0; n < order.size(); ++n) REQUIRE(labels[n] == raw_labels[n / 3 * 3]);
  REQUIRE(labels != raw_labels);  // the synthetic classes differ within a scene: a real relabelling
  REQUIRE(data::scene_labels(inner, 1) == inner);
}

TEST_CASE("the multi-camera model: views, then the fusion head, each a unit", "[nn][multicam]") {
  const nn::TrainOptions o = cam_options(2, 2, 1);
  auto model = nn::build_model(o.model);
  std::vector<std::string> top;
  for (std::size_t i = 0; i < model->size(); ++i) top.push_back(model->at(i).name());
  const std::vector<std::string> head(top.end() - 7, top.end());
  REQUIRE(head == std::vector<std::string>{"fusion.gather", "fusion.conv1", "fusion.norm",
                                           "fusion.act", "fusion.conv2", "fusion.pool",
                                           "fusion.fc"});
  const core::Layout in = nn::input_layout(core::DeviceMesh::parse("dp=2"), "W", 4, o.input, 32);
  nn::SetupContext sc;
  sc.allocator = std::make_shared<core::Allocator>("setup", /*meta=*/true);
  const core::Layout out = model->setup(in, sc);
  REQUIRE(out.global_shape() == core::Shape{2, o.model.num_classes});  // one output per scene
  REQUIRE(out.placement(0).is_replicate());
}

TEST_CASE("multi-camera training with views split over dp equals the one-rank run",
          "[nn][train][multicam]") {
  const CamCase cases[] = {
      {"dp=2", 2, 2, 1, false, "one scene per dp rank"},
      {"dp=2", 2, 2, 2, false, "a scene's two views on two dp ranks"},
      {"dp=2,sp=2", 2, 2, 2, false, "views over dp, pixels over sp"},
      {"dp=3", 6, 2, 1, false, "two views per rank, scenes straddling ranks"},
  };
  for (const CamCase& c : cases) check_case(c);
}

TEST_CASE("multi-camera training with the fusion on its own pipeline stage equals the one-rank run",
          "[nn][train][multicam][pipeline]") {
  check_case({"dp=2,pp=2", 2, 2, 2, true, "backbone on stage 0, fusion on stage 1"});
}
