// resolve_train and resolve_sim: a RunSpec into core's TrainOptions + DeviceMesh and sim's
// catalog, engine options and topology (what make_train_config, make_sim_setup and the studio's
// resolveConfig did, each on its own, before).
#include "tessera/run/resolve.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "resolve_images.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/run/devices.hpp"
#include "tessera/sim/calibration.hpp"
#include "tessera/sim/stage_cut.hpp"

namespace tessera::run {

core::Shape parse_chw(const std::string& s) {
  core::Shape v;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    try {
      std::size_t used = 0;
      v.push_back(std::stoll(part, &used));
      if (used != part.size()) throw std::invalid_argument(part);
    } catch (const std::exception&) {
      throw InvalidArgument("input '" + s + "': expected CxHxW, e.g. 3x512x2048");
    }
  }
  TESSERA_CHECK(v.size() == 3 && v[0] > 0 && v[1] > 0 && v[2] > 0, "input '", s,
                "': expected three positive sizes CxHxW, e.g. 3x512x2048");
  return v;
}

std::vector<int> parse_stage_starts(const std::string& s) {
  std::vector<int> v;
  if (s.empty()) return v;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    int x = 0;
    try {
      std::size_t used = 0;
      x = std::stoi(part, &used);
      if (used != part.size()) throw std::invalid_argument(part);
    } catch (const std::exception&) {
      throw InvalidArgument(
          "stage_starts '" + s + "': '" + part +
          "' is not a unit index; expected indices separated by commas, e.g. 4,9");
    }
    TESSERA_CHECK(x >= 1 && (v.empty() || x > v.back()), "stage_starts '", s,
                  "': expected strictly increasing unit indices >= 1 (stage 0 begins at unit 0)");
    v.push_back(x);
  }
  TESSERA_CHECK(s.back() != ',', "stage_starts '", s, "': a trailing comma; expected e.g. 4,9");
  return v;
}

sim::Topology load_topology(const std::string& spec, const sim::DeviceCatalog& catalog) {
  if (!spec.empty() && spec.front() == '{')
    return sim::Topology::from_json(spec, catalog, "topology JSON");
  std::ifstream in(spec);
  if (!in) return sim::Topology::preset(spec, catalog);
  std::stringstream text;
  text << in.rdbuf();
  sim::Topology t = sim::Topology::from_json(text.str(), catalog, "topology file '" + spec + "'");
  if (t.name.empty()) t.name = spec;
  return t;
}

namespace {

/// The items of a mesh's text, "dp=auto,sp=2" as {"dp=auto", "sp=2"}.
std::vector<std::string> mesh_items(const std::string& mesh) {
  std::vector<std::string> items;
  std::stringstream ss(mesh);
  std::string item;
  while (std::getline(ss, item, ',')) items.push_back(item);
  return items;
}

bool is_auto_item(const std::string& item) {
  const std::size_t eq = item.find('=');
  return eq != std::string::npos && item.substr(eq + 1) == "auto";
}

/// The mesh with its auto size (if any) replaced by `size`, and the number of autos.
std::pair<std::string, int> replace_auto(const std::string& mesh, int size) {
  std::string out;
  int autos = 0;
  for (const std::string& item : mesh_items(mesh)) {
    const bool a = is_auto_item(item);
    autos += a;
    out += (out.empty() ? "" : ",") +
           (a ? item.substr(0, item.find('=') + 1) + std::to_string(size) : item);
  }
  // A trailing comma is the parser's to refuse.
  if (!mesh.empty() && mesh.back() == ',') out += ',';
  return {out, autos};
}

}  // namespace

void check_mesh_text(const std::string& mesh) {
  const auto [probe, autos] = replace_auto(mesh, 1);
  TESSERA_CHECK(autos <= 1, "mesh '", mesh,
                "': only one dimension may be auto (it takes the world size over the others); "
                "give the others a number, e.g. dp=auto,sp=2");
  if (autos == 0) {
    core::DeviceMesh::parse(mesh);
    return;
  }
  try {
    core::DeviceMesh::parse(probe);
  } catch (const InvalidArgument& e) {  // the parser's message, naming the mesh as given
    std::string why = e.what();
    const std::string as_parsed = "mesh '" + probe + "'";
    const std::size_t at = why.find(as_parsed);
    if (at != std::string::npos) why.replace(at, as_parsed.size(), "mesh '" + mesh + "'");
    throw InvalidArgument(why);
  }
}

std::string resolve_mesh_auto(const std::string& mesh, int world) {
  check_mesh_text(mesh);
  const auto [probe, autos] = replace_auto(mesh, 1);
  if (autos == 0) return mesh;
  const int others = core::DeviceMesh::parse(probe).size();
  TESSERA_CHECK(world >= 1 && world % others == 0, "with ", world, " ranks, mesh ", mesh,
                ": the other dimensions take ", others, " ranks, which does not divide ", world,
                "; start a multiple of ", others, " ranks (e.g. tessera launch --nproc ",
                others * std::max(1, world / others), ")");
  return replace_auto(mesh, world / others).first;
}

namespace {

/// spec.mesh with an auto dimension resolved from the launcher's world size (WORLD_SIZE, ...).
std::string training_mesh(const RunSpec& spec, bool check_backend) {
  if (replace_auto(spec.mesh, 1).second == 0) return spec.mesh;
  TESSERA_CHECK(check_backend, "mesh ", spec.mesh,
                ": a simulation or plan needs every dimension's size; give a number instead of "
                "auto (auto takes the world size of a training job started by a launcher)");
  TESSERA_CHECK(spec.backend != "local", "mesh ", spec.mesh,
                ": auto takes the world size from the launcher (one process per rank); give a "
                "number with --backend local");
  return resolve_mesh_auto(spec.mesh, comm::read_env().size);
}

/// Runs `check` (checks of the resolved mesh); with an auto mesh, its errors say which world the
/// mesh was resolved for.
template <class F>
void with_world(const RunSpec& spec, const core::DeviceMesh& mesh, F check) {
  if (replace_auto(spec.mesh, 1).second == 0) return check();
  try {
    check();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::cat("with ", mesh.size(), " ranks, mesh ", spec.mesh, " is ",
                                      mesh.to_string(), ": ", e.what()));
  }
}

/// save_every and resume auto work on save's files: both need save.
void check_checkpoint_fields(const RunSpec& spec) {
  TESSERA_CHECK(spec.save_every == 0 || !spec.save.empty(), "save_every ", spec.save_every,
                " writes SAVE.step<N> beside the checkpoint of save, but save is empty; give save "
                "(--save PATH), or save_every 0");
  TESSERA_CHECK(spec.resume != "auto" || !spec.save.empty(),
                "resume 'auto' picks the newest complete checkpoint among save's (SAVE and "
                "SAVE.step<N>), but save is empty; give save (--save PATH)");
}

/// The batch must split into micro_batches equal micro-batches, each still covering the mesh's
/// dp ranks: checked here so that the error names the options, before any rank starts.
void check_micro_batches(const RunSpec& spec, const core::DeviceMesh& mesh) {
  const int b = spec.batch, m = spec.micro_batches;
  if (b % m != 0) {
    int divisor = m;
    while (b % divisor != 0) --divisor;
    throw InvalidArgument(detail::cat("batch ", b, " is not a multiple of micro_batches ", m,
                                      " (--micro-batches); use batch ", (b / m + 1) * m,
                                      " or micro_batches ", divisor));
  }
  const int d = mesh.find_dim("dp");
  const int dp = d >= 0 ? mesh.dim_size(d) : 1;
  // With one micro-batch nn::input_layout says it (the batch against dp), as before.
  if (m == 1 || b / m >= dp) return;
  int fewer = std::max(1, b / dp);  // the most micro-batches that divide b and still cover dp
  while (fewer > 1 && b % fewer != 0) --fewer;
  throw InvalidArgument(detail::cat("batch ", b, " in micro_batches ", m,
                                    " gives micro-batches of ", b / m, " samples, fewer than the ",
                                    dp, " ranks of mesh dim dp (", mesh.to_string(),
                                    "); use batch ", m * dp, " or more, or micro_batches ", fewer));
}

/// With a mesh dim named pp: stage_starts names pp - 1 stages after the first (their fit to the
/// model's units is the Trainer's check); without one there are no stages to start.
void check_stage_count(const std::string& text, const std::vector<int>& starts,
                       const core::DeviceMesh& mesh) {
  const int d = mesh.find_dim("pp");
  const int pp = d >= 0 ? mesh.dim_size(d) : 1;
  if (starts.empty()) return;
  TESSERA_CHECK(pp > 1, "stage_starts '", text, "': mesh ", mesh.to_string(),
                " has no pipeline stages (no dim pp); leave stage_starts empty, or add a dim such "
                "as pp=2");
  TESSERA_CHECK(static_cast<int>(starts.size()) == pp - 1, "stage_starts '", text,
                "': ", starts.size(), " stage start(s) but mesh ", mesh.to_string(), " has ", pp,
                " pipeline stages (dim pp); give ", pp - 1,
                pp == 2 ? " unit index" : " increasing unit indices",
                ", or leave it empty for the balanced default");
}

}  // namespace

nn::ModelSpec load_model(const std::string& m) {
  if (!m.empty() && m.front() == '{') return nn::model_from_json(m, "model JSON");
  if (m.size() > 5 && m.substr(m.size() - 5) == ".json") {
    TESSERA_CHECK(std::filesystem::exists(m), "model '", m, "': no such file");
    return nn::model_from_json(core::read_file(m), m);
  }
  return nn::model_preset(m);
}

TrainSetup resolve_train(const RunSpec& spec, bool check_backend) {
  spec.validate();
  TrainSetup c;
  nn::TrainOptions& t = c.train;
  t.model = load_model(spec.model);
  t.model.task = spec.task == "classify" ? nn::Task::Classify : nn::Task::Segment;
  t.model.num_classes = spec.classes;
  if (spec.drop_path >= 0) t.model.drop_path = spec.drop_path;
  t.input = parse_chw(spec.input);
  t.model.in_channels = static_cast<int>(t.input[0]);
  t.batch = spec.batch;
  t.shard = spec.shard;
  std::transform(t.shard.begin(), t.shard.end(), t.shard.begin(), ::toupper);
  t.checkpointing = spec.checkpointing;
  t.halo_recompute = *nn::parse_halo_recompute(spec.halo_recompute);  // validate() checked it
  t.optimizer.kind = spec.optimizer;
  t.optimizer.lr = spec.lr;
  t.optimizer.weight_decay = spec.weight_decay;
  t.optimizer.momentum = spec.momentum;
  t.steps = spec.steps;
  t.warmup_steps = spec.warmup;
  t.clip_norm = spec.clip;
  t.seed = spec.seed;
  t.overlap = spec.overlap;
  t.dtype = *nn::training_dtype(spec.dtype);  // validate() checked it, and the three below
  t.precision = *nn::parse_precision(spec.precision);
  t.loss_scale = nn::parse_loss_scale(spec.loss_scale);
  t.grad_reduce = *nn::parse_precision(spec.grad_reduce_dtype);
  t.grad_compression = *nn::parse_grad_compression(spec.grad_compression);
  t.topk_ratio = spec.topk_ratio;
  t.bucket_bytes = std::size_t(spec.bucket_mib) << 20;
  t.micro_batches = spec.micro_batches;
  t.schedule = *nn::parse_pipeline_schedule(spec.schedule);  // validate() checked it
  t.stage_starts = parse_stage_starts(spec.stage_starts);
  // Auto: prefetch on GPUs; the cpu backend's threads already use every core, and a loader
  // thread beside them slows the step (docs/training.md, "Input pipeline"). For a simulation the
  // device model decides (resolve_sim).
  const bool on_gpu = check_backend && names_gpu(spec.device);
  t.loader.prefetch = spec.prefetch >= 0 ? spec.prefetch : on_gpu ? 2 : 0;
  t.loader.workers = spec.loader_workers;
  t.loader.shuffle = spec.shuffle;
  // A training run opens an image folder now: its layout gives the task and classes the model
  // is built with (a simulation reads no data).
  if (check_backend) resolve_image_folder(spec, c);
  t.model.validate();
  c.mesh = core::DeviceMesh::parse(training_mesh(spec, check_backend));
  with_world(spec, c.mesh, [&] {
    check_micro_batches(spec, c.mesh);
    check_stage_count(spec.stage_starts, t.stage_starts, c.mesh);
    // Default stage starts (t.stage_starts empty with a dim pp): the simulator's per-unit kernel
    // time, balanced. Here, before resolve_sim looks at any topology, so that training and
    // simulation cut the model alike: one device model for both, the built-in cpu-host roofline
    // (uncalibrated; a GPU run has no device model here either).
    if (t.stage_starts.empty())
      t.stage_starts = sim::balanced_stage_starts(t, c.mesh, sim::DeviceCatalog().get("cpu-host"));
  });
  c.mesh_comm.all_reduce = comm::parse_all_reduce_algorithm(spec.all_reduce);
  c.mesh_comm.node_dim = spec.node_dim;
  c.alarms = parse_alarms(spec.alarm);
  TESSERA_CHECK(!c.alarms.any_saves() || !spec.save.empty(), "alarm '", spec.alarm,
                "': an alarm that saves writes its checkpoint beside --save's "
                "(PATH.alarm-step<N>); give --save PATH");
  TESSERA_CHECK(spec.node_dim.empty() || c.mesh.find_dim(spec.node_dim) >= 0, "node_dim '",
                spec.node_dim, "' is not a dimension of mesh ", c.mesh.to_string(),
                "; name the mesh dimension whose ranks are on different hosts, e.g. dp");
  if (check_backend) {
    comm::Registry comms;
    register_builtin_backends(comms);
    std::string why_not;
    for (const auto& st : register_plugin_backends(comms))
      if (st.name == spec.backend && !st.loaded) why_not = " (" + st.why + ")";
    std::string avail;
    for (const auto& n : comms.names()) avail += (avail.empty() ? "" : ", ") + n;
    TESSERA_CHECK(comms.contains(spec.backend), "backend '", spec.backend, "': not available",
                  why_not, "; available: ", avail);
  }
  c.backend = spec.backend;
  // What the ranks compute on: cpu, cuda or cuda:N. For a simulation (check_backend false) the
  // field names a device model (h200) instead, which resolve_sim checks.
  const std::string& dev = spec.device;
  if (!check_backend || dev.empty() || dev == "cpu") {
    c.compute = "cpu";
  } else if (names_gpu(dev)) {
    const std::optional<Device> d = try_parse_device(dev);
    TESSERA_CHECK(d.has_value(), "device '", dev,
                  "': expected cuda:N with N a GPU index (cuda:0, cuda:1, ...)");
    c.compute = d->backend;
    c.device_index = d->index;
  } else {
    throw InvalidArgument(
        detail::cat("device '", dev,
                    "': training runs on cpu or cuda (cuda:N); a device model such "
                    "as '",
                    dev, "' is what a simulation takes (tessera sim run --device ", dev, ")"));
  }
  c.tf32 = spec.tf32;
  c.timeout = std::chrono::milliseconds(static_cast<long long>(spec.timeout_s * 1000));
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  c.threads = spec.threads > 0 ? spec.threads : std::max(1, cores / c.mesh.size());
  c.data = spec.data;
  check_checkpoint_fields(spec);
  c.save = spec.save;
  c.resume = spec.resume;
  c.save_every = spec.save_every;
  c.keep_checkpoints = spec.keep_checkpoints;
  check_init_from(spec);
  c.init_from = spec.init_from;
  c.trace = spec.trace;
  c.metrics = spec.metrics;
  c.metrics_port = spec.metrics_port;
  c.metrics_textfile = spec.metrics_textfile;
  // Validate the layout now, so a bad mesh or input fails before any thread starts.
  with_world(spec, c.mesh,
             [&] { nn::input_layout(c.mesh, t.shard, t.batch, t.input, t.model.total_stride()); });
  return c;
}

SimSetup resolve_sim(const RunSpec& spec) {
  TrainSetup t = resolve_train(spec, /*check_backend=*/false);
  SimSetup s{std::move(t.train), std::move(t.mesh), {}, {}, {}, std::move(t.mesh_comm)};
  // Calibrate first: the cpu-host presets take the measured device's shared-memory links.
  if (!spec.calibration.empty())
    sim::apply_calibration(sim::load_calibration(spec.calibration), s.catalog, s.engine);
  s.topology = load_topology(spec.topology, s.catalog);
  s.topology.check_devices(s.catalog);
  if (!spec.device.empty())
    s.catalog.get(spec.device);  // an unknown name fails here, naming the devices
  s.engine.device = spec.device;
  s.engine.tf32 = spec.tf32;
  s.engine.comm_progress = sim::parse_comm_progress(spec.comm_progress);
  s.engine.engine = sim::parse_engine_kind(spec.engine);
  // The replay's tensors are meta, which MeshComm takes for host buffers; on GPUs the runtime's
  // gradient buckets are device memory, where Auto stays flat (comm::choose_all_reduce_algorithm:
  // NCCL picks its own topology-aware algorithm). Resolve Auto as the runtime will.
  if (spec.prefetch < 0) {  // auto, as the runtime resolves it on such a device
    const std::vector<int> devices = s.topology.devices();
    bool gpu = false;
    for (int r = 0; r < s.mesh.size() && r < static_cast<int>(devices.size()); ++r) {
      const std::string& dev =
          s.engine.device.empty() ? s.topology.nodes()[devices[r]].device : s.engine.device;
      gpu = gpu || s.catalog.get(dev).kind != "cpu";
    }
    s.train.loader.prefetch = gpu ? 2 : 0;
  }
  if (s.mesh_comm.all_reduce == comm::AllReduceAlgorithm::Auto) {
    const std::vector<int> devices = s.topology.devices();
    for (int r = 0; r < s.mesh.size() && r < static_cast<int>(devices.size()); ++r) {
      const std::string& dev =
          s.engine.device.empty() ? s.topology.nodes()[devices[r]].device : s.engine.device;
      if (s.catalog.get(dev).kind != "cpu") {
        s.mesh_comm.all_reduce = comm::AllReduceAlgorithm::Flat;
        break;
      }
    }
  }
  const int have = static_cast<int>(s.topology.devices().size());
  TESSERA_CHECK(s.mesh.size() <= have, "mesh ", s.mesh.to_string(), " has ", s.mesh.size(),
                " ranks but topology '", s.topology.name, "' has ", have, " devices",
                "; choose a smaller mesh or a larger topology (e.g. dgx-a100:2)");
  return s;
}

}  // namespace tessera::run
