// run_training: one thread per rank on the local backend, or one rank per process (env://
// rendezvous) on a multi-process backend such as ucx; each rank with its own Trainer.
#include "train_run.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "tessera/builtin_backends.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/core/tracing.hpp"

namespace tessera::tools {

void add_train_options(CLI::App& c, TrainArgs& a) {
  c.add_option("--model", a.model, "Model preset (convnext-atto ... convnext-xl, regnetx-200mf, regnety-400mf, ...) "
               "or a JSON model file")->capture_default_str();
  c.add_option("--input", a.input, "Image size CxHxW (H and W multiples of 32)")->capture_default_str();
  c.add_option("--batch", a.batch, "Global batch size")->capture_default_str();
  c.add_option("--mesh", a.mesh, "Device mesh: sp=4, dp=2,sp=2 or sp_h=2,sp_w=2")->capture_default_str();
  c.add_option("--shard", a.shard, "Spatial dimension a mesh dim named sp splits: W or H (HW needs sp_h,sp_w)")
      ->capture_default_str();
  c.add_option("--backend", a.backend, "Communication backend")->capture_default_str();
  c.add_option("--steps", a.steps, "Training steps")->capture_default_str();
  c.add_option("--checkpointing", a.checkpointing, "Activation checkpointing: none, block or stage")->capture_default_str();
  c.add_option("--optimizer", a.optimizer, "sgd or adamw")->capture_default_str();
  c.add_option("--lr", a.lr, "Peak learning rate")->capture_default_str();
  c.add_option("--weight-decay", a.weight_decay, "Weight decay")->capture_default_str();
  c.add_option("--momentum", a.momentum, "SGD momentum")->capture_default_str();
  c.add_option("--warmup", a.warmup, "Warmup steps (then cosine decay)")->capture_default_str();
  c.add_option("--clip", a.clip, "Global gradient-norm clip (0 = off)")->capture_default_str();
  c.add_option("--seed", a.seed, "Seed for weights, data and DropPath")->capture_default_str();
  c.add_option("--task", a.task, "classify or segment")->capture_default_str();
  c.add_option("--classes", a.classes, "Number of classes")->capture_default_str();
  c.add_option("--drop-path", a.drop_path, "Stochastic-depth rate (default: the model's)");
  c.add_option("--data", a.data, "synthetic, or a folder of .npy images with labels.npy")->capture_default_str();
  c.add_option("--save", a.save, "Write a checkpoint here at the end");
  c.add_option("--resume", a.resume, "Resume from this checkpoint");
  c.add_option("--trace", a.trace, "Write the Chrome-trace timeline (Perfetto) here");
  c.add_option("--metrics", a.metrics, "Write one JSON object per step here (JSON lines)");
  c.add_option("--threads", a.threads, "Compute threads per rank (0 = cores / ranks)")->capture_default_str();
  c.add_option("--timeout", a.timeout_s, "Deadline of every communication wait, seconds")->capture_default_str();
  c.add_flag("--no-overlap", a.no_overlap, "Do not overlap halo exchange and gradient all-reduce with compute");
  c.add_option("--dtype", a.dtype, "Training dtype: f32, or f64 (float64: the exact answer a float32 run is "
               "compared against)")->capture_default_str();
}

namespace {

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
      throw InvalidArgument("--input '" + s + "': expected CxHxW, e.g. 3x512x2048");
    }
  }
  TESSERA_CHECK(v.size() == 3 && v[0] > 0 && v[1] > 0 && v[2] > 0, "--input '", s,
                "': expected three positive sizes CxHxW, e.g. 3x512x2048");
  return v;
}

}  // namespace

TrainRunConfig make_train_config(const TrainArgs& a) {
  TrainRunConfig c;
  nn::TrainOptions& t = c.train;
  if (a.model.size() > 5 && a.model.substr(a.model.size() - 5) == ".json") {
    TESSERA_CHECK(std::filesystem::exists(a.model), "--model '", a.model, "': no such file");
    t.model = nn::model_from_json(core::read_file(a.model), a.model);
  } else {
    t.model = nn::model_preset(a.model);
  }
  TESSERA_CHECK(a.task == "classify" || a.task == "segment", "--task '", a.task, "': expected classify or segment");
  t.model.task = a.task == "classify" ? nn::Task::Classify : nn::Task::Segment;
  t.model.num_classes = a.classes;
  if (a.drop_path >= 0) t.model.drop_path = a.drop_path;
  t.input = parse_chw(a.input);
  t.model.in_channels = static_cast<int>(t.input[0]);
  t.batch = a.batch;
  t.shard = a.shard;
  std::transform(t.shard.begin(), t.shard.end(), t.shard.begin(), ::toupper);
  t.checkpointing = a.checkpointing;
  t.optimizer.kind = a.optimizer;
  t.optimizer.lr = a.lr;
  t.optimizer.weight_decay = a.weight_decay;
  t.optimizer.momentum = a.momentum;
  t.steps = a.steps;
  t.warmup_steps = a.warmup;
  t.clip_norm = a.clip;
  t.seed = a.seed;
  t.overlap = !a.no_overlap;
  const std::optional<core::DType> dtype = nn::training_dtype(a.dtype);
  TESSERA_CHECK(dtype.has_value(), "--dtype '", a.dtype, "': the trainer trains in ", nn::training_dtype_names());
  t.dtype = *dtype;
  t.model.validate();
  c.mesh = core::DeviceMesh::parse(a.mesh);
  comm::Registry comms;
  register_builtin_backends(comms);
  std::string why_not;
  for (const auto& st : register_plugin_backends(comms))
    if (st.name == a.backend && !st.loaded) why_not = " (" + st.why + ")";
  std::string avail;
  for (const auto& n : comms.names()) avail += (avail.empty() ? "" : ", ") + n;
  TESSERA_CHECK(comms.contains(a.backend), "--backend '", a.backend, "': not available", why_not, "; available: ", avail);
  c.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  c.backend = a.backend;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  c.threads = a.threads > 0 ? a.threads : std::max(1, cores / c.mesh.size());
  c.data = a.data;
  c.save = a.save;
  c.resume = a.resume;
  c.trace = a.trace;
  c.metrics = a.metrics;
  TESSERA_CHECK(a.steps >= 1, "--steps ", a.steps, " must be at least 1");
  // Validate the layout now, so a bad mesh or input fails before any thread starts.
  nn::input_layout(c.mesh, t.shard, t.batch, t.input, t.model.total_stride());
  return c;
}

namespace {

std::shared_ptr<const data::Dataset> make_dataset(const TrainRunConfig& c) {
  if (c.data == "synthetic") {
    data::SyntheticOptions o;
    o.task = c.train.model.task == nn::Task::Classify ? data::Task::Classify : data::Task::Segment;
    o.channels = static_cast<int>(c.train.input[0]);
    o.height = static_cast<int>(c.train.input[1]);
    o.width = static_cast<int>(c.train.input[2]);
    o.num_classes = c.train.model.num_classes;
    o.seed = c.train.seed;
    return data::make_synthetic(o);
  }
  return data::open_npy_folder(c.data, c.train.model.num_classes);
}

const char* kCategoryKeys[] = {"parameter", "gradient", "optimizer_state", "activation", "halo_buffer", "workspace"};

}  // namespace

std::string metrics_line(const TrainRunConfig& cfg, const std::vector<nn::StepStats>& ranks) {
  const nn::StepStats& s = ranks[0];
  double worst = 0, data = 0;
  for (auto& r : ranks) worst = std::max(worst, r.step_time_s), data = std::max(data, r.data_time_s);
  std::ostringstream os;
  os.precision(9);
  os << "{\"step\":" << s.step << ",\"loss\":" << s.loss << ",\"step_time_s\":" << worst
     << ",\"data_time_s\":" << data
     << ",\"images_per_s\":" << cfg.train.batch / worst << ",\"lr\":" << s.lr << ",\"grad_norm\":" << s.grad_norm
     << ",\"peak_bytes\":[";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    os << (r ? "," : "") << "{\"rank\":" << r << ",\"total\":" << ranks[r].memory.peak_total;
    for (int c = 0; c < core::kNumMemCategories; ++c) os << ",\"" << kCategoryKeys[c] << "\":" << ranks[r].memory.peak[c];
    os << "}";
  }
  os << "]}";
  return os.str();
}

namespace {

/// Every rank's figures of one step, as rank 0 needs them (gathered by the caller's means).
using Gather = std::function<std::vector<nn::StepStats>(const nn::StepStats&)>;

/// One rank's training loop; `gather` collects every rank's figures (collective).
void rank_loop(const TrainRunConfig& cfg, comm::Backend& world, const std::shared_ptr<const data::Dataset>& dataset,
               compute::Registry& computes, core::TraceRecorder& recorder, TrainRunResult& res,
               std::string& metrics_text, const Gather& gather,
               const std::function<void(const std::vector<nn::StepStats>&)>& on_step) {
  const int rank = world.rank();
  auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(rank));
  auto cpu = computes.create("cpu", compute::BackendOptions{cfg.threads});
  // With --trace, the rank's communicator and compute backend are wrapped by recorders that
  // share the layer scope the modules set.
  nn::Scope scope;
  const core::TraceTarget target{&recorder, rank, cfg.mesh.coords_of(rank), &scope, alloc};
  std::unique_ptr<core::TracingComm> traced_world;
  std::unique_ptr<core::TracingCompute> traced_cpu;
  comm::Backend* w = &world;
  compute::Backend* cb = cpu.get();
  if (!cfg.trace.empty()) {
    traced_world = std::make_unique<core::TracingComm>(world, target);
    traced_cpu = std::make_unique<core::TracingCompute>(*cpu, target);
    w = traced_world.get();
    cb = traced_cpu.get();
    std::ostringstream name;
    name << "rank " << rank << " (";
    const auto cs = cfg.mesh.coords_of(rank);
    for (std::size_t i = 0; i < cs.size(); ++i) name << (i ? "," : "") << cs[i];
    name << ")";
    recorder.set_process_name(rank, name.str());
  }
  comm::MeshComm mc(cfg.mesh, *w);
  nn::Trainer trainer(cfg.train, &mc, *cb, alloc, dataset);
  trainer.context().scope = &scope;
  if (!cfg.resume.empty()) trainer.load(cfg.resume);
  if (rank == 0) res.parameters = nn::count_parameters(trainer.model());
  while (trainer.next_step() < cfg.train.steps) {
    nn::StepStats st = trainer.step();
    std::vector<nn::StepStats> snap = gather(st);
    if (rank == 0) {
      res.steps.push_back(snap);
      if (!cfg.metrics.empty()) {
        metrics_text += metrics_line(cfg, snap) + "\n";
        core::write_file_atomic(cfg.metrics, metrics_text);
      }
      if (on_step) on_step(snap);
    }
    // Rank 0's bookkeeping (the metrics file is written and synced every step) stays out of the
    // next step's time: without this barrier the other ranks start without it and wait for it
    // at their first halo exchange, inside their step.
    world.barrier();
  }
  if (!cfg.save.empty()) trainer.save(cfg.save);
}

/// Figures of a step as doubles for an all_gather across processes.
constexpr std::size_t kStatDoubles = 7 + core::kNumMemCategories;

/// One rank per process (ucx, ...): env:// rendezvous, the world backend from the registry,
/// figures gathered with all_gather. A failure aborts the job so the other ranks stop at once
/// (except a NonFiniteError, which every rank throws at the same step by itself).
void run_distributed(const TrainRunConfig& cfg, const std::shared_ptr<const data::Dataset>& dataset,
                     compute::Registry& computes, core::TraceRecorder& recorder, TrainRunResult& res,
                     std::string& metrics_text, const std::function<void(const std::vector<nn::StepStats>&)>& on_step) {
  const comm::EnvInfo info = comm::read_env();
  TESSERA_CHECK(info.size == cfg.mesh.size(), "--mesh ", cfg.mesh.to_string(), " has ", cfg.mesh.size(),
                " ranks but this job has ", info.size, " processes (", info.source,
                " variables); start one process per rank, e.g. tessera launch --nproc ", cfg.mesh.size(), " -- train ...");
  WorldBackend job = make_world_backend(cfg.backend, cfg.timeout, info);
  comm::Backend* world = job.world.get();
  try {
    const auto n = static_cast<std::size_t>(world->size());
    Gather gather = [&](const nn::StepStats& st) {
      std::vector<double> mine = {double(st.step), st.loss,        st.grad_norm, st.lr, st.step_time_s,
                                  st.data_time_s,  double(st.memory.peak_total)};
      for (int c = 0; c < core::kNumMemCategories; ++c) mine.push_back(double(st.memory.peak[c]));
      std::vector<double> all(kStatDoubles * n);
      world->all_gather({mine.data(), kStatDoubles, core::DType::F64}, {all.data(), all.size(), core::DType::F64})->wait();
      std::vector<nn::StepStats> out(n);
      for (std::size_t r = 0; r < n; ++r) {
        const double* v = all.data() + r * kStatDoubles;
        out[r].step = static_cast<std::int64_t>(v[0]);
        out[r].loss = v[1];
        out[r].grad_norm = v[2];
        out[r].lr = v[3];
        out[r].step_time_s = v[4];
        out[r].data_time_s = v[5];
        out[r].memory.peak_total = static_cast<std::size_t>(v[6]);
        for (int c = 0; c < core::kNumMemCategories; ++c) out[r].memory.peak[c] = static_cast<std::size_t>(v[7 + c]);
      }
      return out;
    };
    if (!cfg.trace.empty() && info.rank != 0) {
      const std::size_t slash = cfg.trace.find_last_of('/'), dot = cfg.trace.find_last_of('.');
      const std::size_t at = dot != std::string::npos && (slash == std::string::npos || dot > slash) ? dot : cfg.trace.size();
      res.trace_path = cfg.trace.substr(0, at) + ".rank" + std::to_string(info.rank) + cfg.trace.substr(at);
    }
    rank_loop(cfg, *world, dataset, computes, recorder, res, metrics_text, gather, on_step);
    world->barrier();
  } catch (const NonFiniteError&) {
    // Every rank decided this from the same replicated loss and norm and stops at the same step
    // by itself; aborting the job could only turn a peer's own message into "aborted".
    throw;
  } catch (const std::exception& e) {
    job.rendezvous->store()->abort(detail::cat("rank ", info.rank, " failed: ", e.what()));
    throw;
  }
}

}  // namespace

TrainRunResult run_training(const TrainRunConfig& cfg,
                            const std::function<void(const std::vector<nn::StepStats>&)>& on_step) {
  const int n = cfg.mesh.size();
  auto dataset = make_dataset(cfg);
  compute::Registry computes;
  register_builtin_backends(computes);
  core::TraceRecorder recorder;
  TrainRunResult res;
  std::string metrics_text;
  const auto t0 = std::chrono::steady_clock::now();
  auto write_trace = [&] {
    if (cfg.trace.empty()) return;
    if (res.trace_path.empty()) res.trace_path = cfg.trace;
    std::ostringstream os;
    core::write_chrome_trace(os, recorder.events(), recorder.process_names(),
                             {{"model", cfg.train.model.name}, {"mesh", cfg.mesh.to_string()},
                              {"input", core::shape_str(cfg.train.input)}, {"source", "tessera train"}});
    core::write_file_atomic(res.trace_path, os.str());
  };
  try {
    if (cfg.backend == "local") {
      std::vector<nn::StepStats> current(static_cast<std::size_t>(n));
      std::mutex mu;
      comm::local::run(n, [&](comm::Backend& world) {
        Gather gather = [&](const nn::StepStats& st) {
          {
            std::lock_guard<std::mutex> lock(mu);
            current[static_cast<std::size_t>(world.rank())] = st;
          }
          world.barrier();
          std::vector<nn::StepStats> snap;
          {
            std::lock_guard<std::mutex> lock(mu);
            snap = current;
          }
          world.barrier();
          return snap;
        };
        rank_loop(cfg, world, dataset, computes, recorder, res, metrics_text, gather, on_step);
      });
    } else {
      run_distributed(cfg, dataset, computes, recorder, res, metrics_text, on_step);
    }
  } catch (const NonFiniteError&) {
    // A diverged run stopped every rank at the same step: the metrics file already holds the
    // steps that completed; the trace shows them and the failed step up to the check; the
    // checkpoint (--save) is not written, so an existing file stays as it was.
    write_trace();
    throw;
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_trace();
  return res;
}

std::string training_summary(const TrainRunConfig& cfg, const TrainRunResult& r) {
  std::ostringstream os;
  char buf[256];
  if (r.steps.empty()) return "no steps were run\n";
  std::vector<double> times;
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    double worst = 0;
    for (auto& s : r.steps[i]) worst = std::max(worst, s.step_time_s);
    if (i > 0 || r.steps.size() == 1) times.push_back(worst);
  }
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  std::snprintf(buf, sizeof buf,
                "\nsummary: %zu steps in %.1f s; %lld parameters; loss %.4f -> %.4f\n"
                "step time median %.3f s (min %.3f, max %.3f; first step excluded), %.2f images/s\n",
                r.steps.size(), r.wall_s, static_cast<long long>(r.parameters), r.steps.front()[0].loss,
                r.steps.back()[0].loss, med, times.front(), times.back(), cfg.train.batch / med);
  os << buf << "peak memory per rank (MiB):\n  rank        total";
  for (const char* k : kCategoryKeys) {
    std::snprintf(buf, sizeof buf, " %15s", k);
    os << buf;
  }
  os << "\n";
  const auto& last = r.steps.back();
  for (std::size_t q = 0; q < last.size(); ++q) {
    std::snprintf(buf, sizeof buf, "  %4zu %12.1f", q, last[q].memory.peak_total / 1048576.0);
    os << buf;
    for (int c = 0; c < core::kNumMemCategories; ++c) {
      std::snprintf(buf, sizeof buf, " %15.1f", last[q].memory.peak[c] / 1048576.0);
      os << buf;
    }
    os << "\n";
  }
  if (!cfg.trace.empty())
    os << "trace written to " << r.trace_path << (r.trace_path != cfg.trace || cfg.backend == "local" ? "" : " (this rank; the others beside it as .rank<r>)")
       << " (open in https://ui.perfetto.dev)\n";
  if (!cfg.metrics.empty()) os << "metrics written to " << cfg.metrics << "\n";
  if (!cfg.save.empty()) os << "checkpoint written to " << cfg.save << "\n";
  return os.str();
}

}  // namespace tessera::tools
