// tessera's ConvNeXt and RegNetY against timm's: weights loaded by timm's names, then one forward
// and backward sharded over 1-3 ranks matches timm's (tests/timm/make_reference.py, float64:
// logits, every parameter gradient and the BatchNorm running statistics); the loader's report
// (replaced head, missing, unexpected, another model size, tessera's names); Trainer::init_from;
// and the export that tests/timm/check_export.py loads back into timm.
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "nn/module_harness.hpp"
#include "nn/train_harness.hpp"
#include "support/emulated_device.hpp"
#include "tessera/nn/weights.hpp"

namespace tessera::test {
namespace {

using core::DType;
using core::Layout;

/// The reference folder (TESSERA_TIMM_DIR, made by the ctest fixture timm.make_reference). Empty
/// (and the test skipped) only where /usr/bin/python3 cannot make it; otherwise its absence fails.
std::string timm_dir() {
  const char* d = std::getenv("TESSERA_TIMM_DIR");
  if (d && std::filesystem::exists(std::string(d) + "/convnext_atto_ref.safetensors")) return d;
  if (std::system("/usr/bin/python3 -c 'import torch, timm, safetensors' >/dev/null 2>&1") != 0)
    return "";
  FAIL("TESSERA_TIMM_DIR (" << (d ? d : "unset")
                            << ") holds no timm reference: run the test through ctest "
                               "(fixture timm.make_reference) or set it to a folder made by "
                               "tests/timm/make_reference.py");
  return "";
}

#define TIMM_DIR_OR_SKIP(var)         \
  const std::string var = timm_dir(); \
  if (var.empty())                    \
  TESSERA_SKIP("/usr/bin/python3 lacks torch, timm or safetensors (run tools/setup.sh)")

nn::ModelSpec spec_of(const std::string& preset) {
  nn::ModelSpec s = nn::model_preset(preset);
  s.num_classes = 1000;  // timm's ImageNet head
  s.drop_path = 0;       // the reference runs with drop_path_rate 0
  return s;
}

std::map<std::string, core::Tensor> read_map(const std::string& path) {
  std::map<std::string, core::Tensor> m;
  for (auto& [n, t] : nn::read_safetensors(path)) m.emplace(n, t);
  return m;
}

std::vector<std::pair<std::string, core::Tensor*>> targets_of(nn::Module& m) {
  std::vector<nn::Parameter*> ps;
  m.parameters(ps);
  std::vector<std::pair<std::string, core::Tensor*>> ts;
  for (nn::Parameter* p : ps) ts.emplace_back(p->name, &p->value);
  m.buffers(ts);
  return ts;
}

struct TimmRun {
  std::vector<double> logits;
  std::map<std::string, std::vector<double>> grads, stats;  ///< by timm's names
  nn::WeightReport report;
};

/// Builds `spec` on every rank of `in.mesh()`, loads `weights`, runs forward on the rank's box of
/// the reference input and backward with its box of G; gradients all-reduced, read on rank 0.
TimmRun run_timm(const nn::ModelSpec& spec, const Layout& in,
                 std::map<std::string, core::Tensor>& ref, const std::string& weights,
                 DType dtype) {
  TimmRun r;
  std::mutex mu;
  const std::vector<double> x = to_doubles(ref.at("input")), g = to_doubles(ref.at("G"));
  r.logits.assign(g.size(), 0.0);
  comm::local::run(in.mesh().size(), [&](comm::Backend& world) {
    const int rank = world.rank();
    comm::MeshComm mesh(in.mesh(), world);
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(rank));
    compute::cpu::CpuBackend cpu(1);
    auto m = nn::build_model(spec);
    nn::SetupContext sc;
    sc.rank = rank;
    sc.allocator = alloc;
    sc.seed = 7;
    sc.dtype = dtype;
    const Layout out = m->setup(in, sc);
    const auto targets = targets_of(*m);
    const nn::WeightReport rep = nn::load_weights(weights, spec, targets);
    nn::Context ctx;
    ctx.mesh = &mesh;
    ctx.compute = &cpu;
    ctx.allocator = alloc;
    const core::Tensor y = m->forward(
        ctx, box_of(x, in.global_shape(), in.local_offset(rank), in.local_shape(rank), dtype));
    m->backward(
        ctx, box_of(g, out.global_shape(), out.local_offset(rank), out.local_shape(rank), dtype));
    std::vector<nn::Parameter*> ps;
    m->parameters(ps);
    for (nn::Parameter* p : ps)
      if (!p->grad_reduce_mesh_dims.empty()) mesh.all_reduce(p->grad, p->grad_reduce_mesh_dims);
    std::lock_guard<std::mutex> lock(mu);
    put_box(r.logits, out.global_shape(), out.local_offset(rank), y);
    if (rank != 0) return;
    r.report = rep;
    for (nn::Parameter* p : ps) r.grads[nn::timm_name(spec, p->name)] = to_doubles(p->grad);
    std::vector<std::pair<std::string, core::Tensor*>> bufs;
    m->buffers(bufs);
    for (auto& [n, t] : bufs) r.stats[nn::timm_name(spec, n)] = to_doubles(*t);
  });
  return r;
}

/// A float32 copy of a float64 host tensor (what loading converts to).
core::Tensor convert_to_f32(const core::Tensor& t) {
  return from_doubles(to_doubles(t), t.shape(), DType::F32);
}

double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0, n = 0;
  for (std::size_t i = 0; i < b.size(); ++i) e += (a[i] - b[i]) * (a[i] - b[i]), n += b[i] * b[i];
  return std::sqrt(e / std::max(n, 1e-300));
}

/// Logits, every gradient and every running statistic of `run` within `tol` (norm-wise relative
/// per tensor) of timm's; returns the largest error seen.
double require_matches_timm(const TimmRun& run, std::map<std::string, core::Tensor>& ref,
                            double tol) {
  REQUIRE(run.report.missing.empty());
  REQUIRE(run.report.unexpected.empty());
  REQUIRE(run.report.replaced.empty());
  double worst = rel_error(run.logits, to_doubles(ref.at("logits")));
  INFO("logits: relative error " << worst);
  REQUIRE(worst <= tol);
  std::size_t grads = 0, stats = 0;
  for (auto& [name, t] : ref) {
    const bool grad = name.rfind("grad.", 0) == 0, stat = name.rfind("after.", 0) == 0;
    if (!grad && !stat) continue;
    const std::string timm = name.substr(grad ? 5 : 6);
    const auto& mine = grad ? run.grads : run.stats;
    INFO("tensor " << name);
    REQUIRE(mine.count(timm) == 1);
    const double e = rel_error(mine.at(timm), to_doubles(t));
    INFO("relative error " << e);
    REQUIRE(e <= tol);
    worst = std::max(worst, e);
    (grad ? grads : stats) += 1;
  }
  REQUIRE(grads == run.grads.size());  // every tessera gradient was compared
  REQUIRE(stats == run.stats.size());
  return worst;
}

Layout sharded(const Layout& whole, int ranks, int dim) {
  return Layout(core::DeviceMesh({ranks}, {"sp"}), whole.global_shape(), {core::Shard(dim)},
                {1, 1, 32, 32});
}

void check_model(const std::string& timm, const std::string& preset, bool with_fp32) {
  TIMM_DIR_OR_SKIP(dir);
  auto ref = read_map(dir + "/" + timm + "_ref.safetensors");
  const std::string weights = dir + "/" + timm + ".safetensors";
  const nn::ModelSpec spec = spec_of(preset);
  REQUIRE(nn::timm_model_name(spec) == timm);
  const Layout whole = unsharded(ref.at("input").shape());
  struct Case {
    int ranks, dim;
  };
  for (const Case c : {Case{1, 3}, Case{2, 3}, Case{3, 3}, Case{2, 2}}) {
    INFO(timm << " float64, sp=" << c.ranks << " along " << (c.dim == 3 ? "W" : "H"));
    // (measured: 4e-15 for ConvNeXt, 2e-13 for RegNetY, whose BatchNorms amplify roundoff)
    require_matches_timm(run_timm(spec, c.ranks == 1 ? whole : sharded(whole, c.ranks, c.dim), ref,
                                  weights, DType::F64),
                         ref, 1e-10);
  }
  if (!with_fp32) return;
  // float32 (weights converted on load): the one-rank run's error sets the sharded run's bound.
  const TimmRun one = run_timm(spec, whole, ref, weights, DType::F32);
  const TimmRun three = run_timm(spec, sharded(whole, 3, 3), ref, weights, DType::F32);
  INFO(timm << " float32");
  // float32 roundoff through ~20 layers (measured: 1e-6 ConvNeXt, 7e-5 RegNetY), far from a wrong
  // value
  require_matches_timm(one, ref, 1e-3);
  const auto bound = [](const std::vector<double>& r32, const std::vector<double>& r64) {
    double e = 0, scale = 0;
    for (std::size_t i = 0; i < r64.size(); ++i)
      e = std::max(e, std::abs(r32[i] - r64[i])), scale = std::max(scale, std::abs(r64[i]));
    return std::vector<double>(r64.size(), kFp32Factor * std::max(e, 2 * std::ldexp(scale, -24)));
  };
  const auto logits = to_doubles(ref.at("logits"));
  REQUIRE_WITHIN(three.logits, logits, bound(one.logits, logits));
  for (auto& [name, g] : one.grads) {
    INFO("gradient " << name);
    const auto r64 = to_doubles(ref.at("grad." + name));
    REQUIRE_WITHIN(three.grads.at(name), r64, bound(g, r64));
  }
}

/// `spec` set up on one rank (host, seed 7) for an input of `input` (N, C, H, W).
std::unique_ptr<nn::Sequential> set_up(const nn::ModelSpec& spec, const core::Shape& input,
                                       DType dtype = DType::F64) {
  auto m = nn::build_model(spec);
  nn::SetupContext sc;
  sc.allocator = std::make_shared<core::Allocator>("rank 0");
  sc.seed = 7;
  sc.dtype = dtype;
  m->setup(unsharded(input), sc);
  return m;
}

const core::Shape kAttoInput{2, 3, 64, 96};

/// Each rank: the cpu backend computing in its own emulated device memory.
RankCompute emulated_compute(int rank) {
  auto memory = std::make_shared<EmulatedDeviceMemory>();
  return on_device(std::make_unique<EmulatedDeviceCompute>(
                       std::make_unique<compute::cpu::CpuBackend>(1), memory),
                   rank);
}

/// The model's tensors as a tessera checkpoint (what Trainer::save writes, less the optimizer).
nn::CheckpointData as_checkpoint(const nn::ModelSpec& spec, nn::Module& m) {
  nn::CheckpointData data;
  data.meta["model"] = spec.to_json();
  for (auto& [n, t] : targets_of(m)) data.tensors.emplace_back(n, t->clone());
  return data;
}

}  // namespace

TEST_CASE("convnext_atto from timm matches timm sharded over 1 to 3 ranks", "[.timm]") {
  check_model("convnext_atto", "convnext-atto", true);
}

TEST_CASE("convnext_tiny from timm matches timm sharded over 1 to 3 ranks", "[.timm]") {
  check_model("convnext_tiny", "convnext-tiny", false);
}

TEST_CASE("regnety_002 from timm matches timm sharded over 1 to 3 ranks", "[.timm]") {
  check_model("regnety_002", "regnety-200mf", true);
}

namespace tessera::test {

TEST_CASE("a timm classifier of another class count is re-initialised and the rest loaded",
          "[.timm]") {
  TIMM_DIR_OR_SKIP(dir);
  nn::ModelSpec spec = spec_of("convnext-atto");
  spec.num_classes = 19;
  auto m = set_up(spec, kAttoInput), fresh = set_up(spec, kAttoInput);
  const auto targets = targets_of(*m);
  const nn::WeightReport r = nn::load_weights(dir + "/convnext_atto.safetensors", spec, targets);
  CHECK(r.naming == "timm");
  CHECK(r.replaced == std::vector<std::string>{"head.fc.weight", "head.fc.bias"});
  CHECK(r.file_classes == 1000);
  CHECK(r.model_classes == 19);
  CHECK(r.missing.empty());
  CHECK(r.unexpected.empty());
  CHECK(r.loaded == static_cast<std::int64_t>(targets.size()) - 2);
  CHECK(r.summary().find("replaced (1000 → 19 classes): head.fc.weight, head.fc.bias") !=
        std::string::npos);
  auto file = read_map(dir + "/convnext_atto.safetensors");
  const auto fresh_targets = targets_of(*fresh);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& [name, t] = targets[i];
    INFO(name);
    if (name.rfind("head.fc.", 0) == 0)
      CHECK(bytes_of(*t) == bytes_of(*fresh_targets[i].second));  // its own init
    else
      CHECK(bytes_of(*t) == bytes_of(file.at(nn::timm_name(spec, name)).reshape(t->shape())));
  }
}

TEST_CASE("weights of another model size are refused naming the tensor and both shapes",
          "[.timm]") {
  TIMM_DIR_OR_SKIP(dir);
  const nn::ModelSpec spec = spec_of("convnext-femto");
  auto m = set_up(spec, kAttoInput);
  const auto targets = targets_of(*m);
  const std::string before = bytes_of(*targets[0].second);
  const std::string e =
      error_of([&] { nn::load_weights(dir + "/convnext_atto.safetensors", spec, targets); });
  CHECK(e.find("'stem.0.weight' is " + core::shape_str({40, 3, 4, 4})) != std::string::npos);
  CHECK(e.find("'stem.conv.weight' is " + core::shape_str({48, 3, 4, 4})) != std::string::npos);
  CHECK(e.find("another model size") != std::string::npos);
  CHECK(bytes_of(*targets[0].second) == before);
  // A file of another family matches nothing but the classifier's name: refused too.
  const nn::ModelSpec regnet = spec_of("regnety-200mf");
  auto r = set_up(regnet, {2, 3, 64, 160});
  const std::string f = error_of(
      [&] { nn::load_weights(dir + "/convnext_atto.safetensors", regnet, targets_of(*r)); });
  INFO(f);
  CHECK(f.find("matches none of model 'regnety-200mf''s") != std::string::npos);
}

TEST_CASE("tensors a weights file lacks or has in excess are listed", "[.timm]") {
  TIMM_DIR_OR_SKIP(dir);
  TempDir tmp("timm_weights");
  auto file = nn::read_safetensors(dir + "/convnext_atto.safetensors");
  std::vector<std::pair<std::string, const core::Tensor*>> kept;
  for (auto& [n, t] : file)
    if (n != "stages.0.blocks.0.conv_dw.weight") kept.emplace_back(n, &t);
  const core::Tensor extra = core::Tensor::zeros({3});
  kept.emplace_back("extra.weight", &extra);
  nn::write_safetensors(tmp.file("partial.safetensors"), kept);
  const nn::ModelSpec spec = spec_of("convnext-atto");
  auto m = set_up(spec, kAttoInput);
  const nn::WeightReport r =
      nn::load_weights(tmp.file("partial.safetensors"), spec, targets_of(*m));
  CHECK(r.missing == std::vector<std::string>{"stages.0.blocks.0.dwconv.weight"});
  CHECK(r.unexpected == std::vector<std::string>{"extra.weight"});
  CHECK(r.replaced.empty());
  CHECK(r.summary().find(
            "missing (kept their initialisation): stages.0.blocks.0.dwconv.weight; unexpected "
            "(not used): extra.weight") != std::string::npos);
}

TEST_CASE("a weights file with tessera's names loads bit for bit", "[.timm]") {
  TIMM_DIR_OR_SKIP(dir);
  TempDir tmp("timm_weights");
  const nn::ModelSpec spec = spec_of("regnety-200mf");
  auto m = set_up(spec, {2, 3, 64, 160});
  nn::load_weights(dir + "/regnety_002.safetensors", spec, targets_of(*m));
  const nn::NamedTensors own = nn::export_weights(as_checkpoint(spec, *m), "tessera");
  std::vector<std::pair<std::string, const core::Tensor*>> ptrs;
  for (auto& [n, t] : own) ptrs.emplace_back(n, &t);
  nn::write_safetensors(tmp.file("own.safetensors"), ptrs);
  auto again = set_up(spec, {2, 3, 64, 160}, DType::F64);
  const auto targets = targets_of(*again);
  const nn::WeightReport r = nn::load_weights(tmp.file("own.safetensors"), spec, targets);
  CHECK(r.naming == "tessera");
  CHECK(r.loaded == static_cast<std::int64_t>(targets.size()));
  CHECK((r.missing.empty() && r.unexpected.empty() && r.replaced.empty()));
  const auto first = targets_of(*m);
  for (std::size_t i = 0; i < targets.size(); ++i)
    CHECK(bytes_of(*targets[i].second) == bytes_of(*first[i].second));
}

TEST_CASE("Trainer init_from loads timm weights on every rank, pipeline stage and device",
          "[.timm]") {
  TIMM_DIR_OR_SKIP(dir);
  nn::TrainOptions o;
  o.model = nn::model_preset("convnext-atto");  // 10 classes: the head is replaced
  o.input = {3, 64, 96};
  o.batch = 2;
  o.steps = 0;
  auto file = read_map(dir + "/convnext_atto.safetensors");
  struct Case {
    const char* mesh;
    bool device;  ///< each rank in its own emulated device memory, training in bf16 (f32 masters)
  };
  for (const Case c : {Case{"sp=2", false}, Case{"pp=2", false}, Case{"sp=2", true}}) {
    INFO("mesh " << c.mesh << (c.device ? " on emulated devices, bf16" : ""));
    nn::TrainOptions oc = o;
    if (c.device) oc.precision = nn::Precision::BF16;
    std::mutex mu;
    std::vector<std::string> summaries;
    const auto load = [&](nn::Trainer& t) {
      const nn::WeightReport r = t.init_from(dir + "/convnext_atto.safetensors");
      std::lock_guard<std::mutex> lock(mu);
      summaries.push_back(r.summary());
    };
    const TrainRun run = train(oc, core::DeviceMesh::parse(c.mesh), load, {}, Fault::None,
                               c.device ? emulated_compute : cpu_compute);
    REQUIRE(summaries.size() == 2);
    CHECK(summaries[0] == summaries[1]);  // every rank checks the whole model
    CHECK(summaries[0].find("replaced (1000 → 10 classes): head.fc.weight, head.fc.bias") !=
          std::string::npos);
    CHECK(summaries[0].find("missing") == std::string::npos);
    REQUIRE(!run.names.empty());
    for (std::size_t i = 0; i < run.names.size(); ++i) {
      if (run.names[i].rfind("head.fc.", 0) == 0) continue;
      INFO(run.names[i]);
      CHECK(run.params[i] ==
            to_doubles(convert_to_f32(file.at(nn::timm_name(o.model, run.names[i])))));
    }
  }
}

TEST_CASE("export_weights writes timm's names and shapes, checked by check_export.py", "[.timm]") {
  TIMM_DIR_OR_SKIP(dir);
  TempDir tmp("timm_export");
  for (auto [timm, preset, input] :
       {std::tuple{"convnext_atto", "convnext-atto", kAttoInput},
        std::tuple{"convnext_tiny", "convnext-tiny", core::Shape{2, 3, 64, 160}},
        std::tuple{"regnety_002", "regnety-200mf", core::Shape{2, 3, 64, 160}}}) {
    INFO(timm);
    const nn::ModelSpec spec = spec_of(preset);
    auto m = set_up(spec, input);
    nn::load_weights(dir + "/" + timm + ".safetensors", spec, targets_of(*m));
    const nn::CheckpointData data = as_checkpoint(spec, *m);
    std::vector<std::pair<std::string, const core::Tensor*>> ptrs;
    for (auto& [n, t] : data.tensors) ptrs.emplace_back(n, &t);
    nn::save_checkpoint(tmp.file("model.ckpt"), data.meta, ptrs);
    const std::string out = dir + "/" + timm + "_export.safetensors";
    REQUIRE(nn::export_checkpoint(tmp.file("model.ckpt"), out) == timm);
    // The same names, shapes and bits as timm's own file (check_export.py then loads it into timm).
    std::map<std::string, std::string> meta;
    auto exported = nn::read_safetensors(out, &meta);
    CHECK(meta.at("timm_model") == timm);
    auto original = read_map(dir + "/" + timm + ".safetensors");
    REQUIRE(exported.size() == original.size());
    for (auto& [n, t] : exported) {
      INFO(n);
      REQUIRE(original.count(n) == 1);
      CHECK(t.shape() == original.at(n).shape());
      CHECK(bytes_of(t) == bytes_of(original.at(n)));
    }
  }
}

}  // namespace tessera::test

namespace tessera::test {

TEST_CASE("timm names of ConvNeXt and RegNet tensors", "[weights]") {
  const nn::ModelSpec cx = nn::model_preset("convnext-tiny"),
                      ry = nn::model_preset("regnety-200mf");
  CHECK(nn::timm_name(cx, "stem.conv.weight") == "stem.0.weight");
  CHECK(nn::timm_name(cx, "stem.norm.bias") == "stem.1.bias");
  CHECK(nn::timm_name(cx, "stages.2.downsample.norm.weight") == "stages.2.downsample.0.weight");
  CHECK(nn::timm_name(cx, "stages.2.downsample.conv.weight") == "stages.2.downsample.1.weight");
  CHECK(nn::timm_name(cx, "stages.1.blocks.0.dwconv.weight") == "stages.1.blocks.0.conv_dw.weight");
  CHECK(nn::timm_name(cx, "stages.1.blocks.0.pwconv2.bias") == "stages.1.blocks.0.mlp.fc2.bias");
  CHECK(nn::timm_name(cx, "stages.3.blocks.2.gamma.gamma") == "stages.3.blocks.2.gamma");
  CHECK(nn::timm_name(cx, "head.norm.weight") == "head.norm.weight");
  CHECK(nn::timm_name(cx, "head.classifier.weight").empty());  // a segmentation head
  CHECK(nn::timm_name(cx, "fusion.conv1.weight").empty());     // a multi-camera fusion head
  CHECK(nn::timm_name(ry, "stages.0.blocks.0.f.a.weight") == "s1.b1.conv1.conv.weight");
  CHECK(nn::timm_name(ry, "stages.3.blocks.6.f.b_bn.running_var") == "s4.b7.conv2.bn.running_var");
  CHECK(nn::timm_name(ry, "stages.1.blocks.0.f.se.fc1.bias") == "s2.b1.se.fc1.bias");
  CHECK(nn::timm_name(ry, "stages.1.blocks.0.proj.bn.weight") == "s2.b1.downsample.bn.weight");
  CHECK(nn::timm_name(ry, "stem.bn.running_mean") == "stem.bn.running_mean");
  CHECK(nn::timm_name(ry, "stages.x.blocks.0.f.a.weight").empty());
  // Every tensor of every preset timm has gets a name of its own.
  for (const auto& [preset, timm] : {std::pair{"convnext-atto", "convnext_atto"},
                                     {"convnext-nano", "convnext_nano"},
                                     {"convnext-xl", "convnext_xlarge"},
                                     {"regnetx-200mf", "regnetx_002"},
                                     {"regnetx-400mf", "regnetx_004_tv"},
                                     {"regnety-400mf", "regnety_004"},
                                     {"regnety-800mf", "regnety_008_tv"}}) {
    INFO(preset);
    const nn::ModelSpec spec = nn::model_preset(preset);
    CHECK(nn::timm_model_name(spec) == timm);
    auto m = nn::build_model(spec);
    nn::SetupContext sc;
    sc.allocator = std::make_shared<core::Allocator>("meta", true);
    m->setup(unsharded({1, 3, 64, 64}), sc);
    std::set<std::string> names;
    for (auto& [n, t] : targets_of(*m)) {
      INFO(n);
      CHECK(names.insert(nn::timm_name(spec, n)).second);
      CHECK(!nn::timm_name(spec, n).empty());
    }
  }
  nn::ModelSpec odd = nn::model_preset("convnext-atto");
  odd.widths[0] = 48;
  CHECK(nn::timm_model_name(odd).empty());
  CHECK(nn::timm_model_name(nn::model_preset("multicam-atto")).empty());
}

}  // namespace tessera::test

TEST_CASE("a segmentation model exports its backbone under timm's names and names its head",
          "[weights]") {
  nn::ModelSpec spec = nn::model_preset("convnext-atto");
  spec.task = nn::Task::Segment;
  spec.num_classes = 4;
  auto m = set_up(spec, kAttoInput, DType::F32);
  const nn::CheckpointData data = as_checkpoint(spec, *m);
  std::vector<std::string> left_out;
  const nn::NamedTensors timm = nn::export_weights(data, "timm", &left_out);
  CHECK(left_out == std::vector<std::string>{"head.classifier.weight", "head.classifier.bias"});
  // Every other tensor went out under its timm name; the head's norm is timm's head.norm.
  CHECK(timm.size() + left_out.size() == data.tensors.size());
  bool norm = false;
  for (const auto& [name, t] : timm) {
    CHECK(name.rfind("head.classifier", 0) != 0);
    norm = norm || name == "head.norm.weight";
  }
  CHECK(norm);
  // The backbone is timm's convnext_atto, whose mlp weights are 1x1 convolutions.
  CHECK(nn::timm_model_name(spec) == "convnext_atto");
  for (const auto& [name, t] : timm)
    if (name == "stages.0.blocks.0.mlp.fc1.weight") CHECK(t.shape() == core::Shape{160, 40, 1, 1});
  // Under tessera's names nothing is left out.
  left_out.clear();
  CHECK(nn::export_weights(data, "tessera", &left_out).size() == data.tensors.size());
  CHECK(left_out.empty());
}

}  // namespace tessera::test
