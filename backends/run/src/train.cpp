// run::train: one thread per rank on the local backend, or one rank per process (env://
// rendezvous) on a multi-process backend such as ucx; each rank with its own Trainer. Moved here
// from tools/src/train_run.cpp so that the CLI and the Python module run the same loop.
#include "tessera/run/train.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tessera/builtin_backends.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/core/tracing.hpp"
#include "tessera/run/live_metrics.hpp"
#include "counting_comm.hpp"
#include "fault_comm.hpp"

namespace tessera::run {

namespace {

std::shared_ptr<const data::Dataset> make_dataset(const TrainSetup& c) {
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

/// The memory category names, core's (the keys of every memory figure in JSON).
std::string_view category(int c) { return core::mem_category_name(static_cast<core::MemCategory>(c)); }

}  // namespace

std::string metrics_line(const TrainSetup& cfg, const std::vector<nn::StepStats>& ranks,
                         const std::vector<Alarm>& alarms) {
  const nn::StepStats& s = ranks[0];
  double worst = 0, data = 0, load = 0;
  for (auto& r : ranks)
    worst = std::max(worst, r.step_time_s), data = std::max(data, r.data_time_s), load = std::max(load, r.load_time_s);
  std::ostringstream os;
  os.precision(9);
  os << "{\"step\":" << s.step << ",\"loss\":" << s.loss << ",\"step_time_s\":" << worst
     << ",\"data_time_s\":" << data << ",\"load_time_s\":" << load
     << ",\"images_per_s\":" << cfg.train.batch / worst << ",\"lr\":" << s.lr << ",\"grad_norm\":" << s.grad_norm
     << ",\"loss_scale\":" << s.loss_scale << ",\"skipped\":" << (s.skipped ? "true" : "false")
     << ",\"skipped_steps\":" << s.skipped_steps << ",\"grad_comm_bytes\":" << s.grad_comm_bytes
     << ",\"grad_dense_bytes\":" << s.grad_dense_bytes << ",\"peak_bytes\":[";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    os << (r ? "," : "") << "{\"rank\":" << r << ",\"total\":" << ranks[r].memory.peak_total;
    for (int c = 0; c < core::kNumMemCategories; ++c) os << ",\"" << category(c) << "\":" << ranks[r].memory.peak[c];
    os << "}";
  }
  os << "]";
  if (!alarms.empty()) {
    os << ",\"alarms\":[";
    for (std::size_t i = 0; i < alarms.size(); ++i) os << (i ? "," : "") << alarm_json(alarms[i]);
    os << "]";
  }
  os << "}";
  return os.str();
}

namespace {

/// Every rank's figures of one step, as rank 0 needs them (gathered by the caller's means).
/// `memory` is the rank's allocator: a backend that moves device memory only (nccl) gets the
/// figures in it.
/// `bytes` is this rank's {halo, collective} bytes of the step (CountingComm); `all_bytes` gets
/// every rank's.
using Bytes = std::array<std::int64_t, 2>;
using Gather = std::function<std::vector<nn::StepStats>(const nn::StepStats&, const Bytes& bytes,
                                                        std::vector<Bytes>& all_bytes, const core::AllocatorPtr& memory)>;

/// One rank's training loop; `gather` collects every rank's figures (collective).
void rank_loop(const TrainSetup& cfg, int device_index, comm::Backend& world,
               const std::shared_ptr<const data::Dataset>& dataset, compute::Registry& computes, core::TraceRecorder& recorder, TrainResult& res,
               std::string& metrics_text, const Gather& gather,
               const StepCallback& on_step, const AlarmCallback& on_alarm) {
  const int rank = world.rank();
  compute::BackendOptions co;
  co.num_threads = cfg.threads;
  co.device = device_index;
  co.tf32 = cfg.tf32;
  auto cpu = computes.create(cfg.compute, co);
  // A device backend's ranks keep every tensor in its memory; the allocator books it there.
  const auto memory = cpu->device_memory();
  auto alloc = memory ? std::make_shared<core::Allocator>("rank " + std::to_string(rank), memory)
                      : std::make_shared<core::Allocator>("rank " + std::to_string(rank));
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
  // TESSERA_FAULT (testing fault handling): the trainer's calls pass through the injector.
  std::shared_ptr<FaultState> fault;
  std::unique_ptr<FaultComm> faulty;
  if (auto spec = fault_from_env()) {
    fault = std::make_shared<FaultState>();
    fault->spec = *spec;
    fault->world_rank = rank;
    fault->scope = &scope;
    faulty = std::make_unique<FaultComm>(*w, fault);
    w = faulty.get();
  }
  // Every call of the trainer passes through a counter of halo and collective bytes (live metrics).
  auto counts = std::make_shared<CommCounts>();
  CountingComm counted(*w, counts);
  comm::MeshComm mc(cfg.mesh, counted, cfg.mesh_comm);
  nn::Trainer trainer(cfg.train, &mc, *cb, alloc, dataset);
  trainer.context().scope = &scope;
  if (!cfg.resume.empty()) trainer.load(cfg.resume);
  if (rank == 0) res.parameters = nn::count_parameters(trainer.model());
  AlarmMonitor monitor(cfg.alarms);
  // Rank 0 serves the live metrics (--metrics-port) and/or writes them (--metrics-textfile).
  std::unique_ptr<MetricsServer> server;
  LiveFigures live;
  if (rank == 0 && (cfg.metrics_port >= 0 || !cfg.metrics_textfile.empty())) {
    live.model = cfg.train.model.name;
    live.mesh = cfg.mesh.to_string();
    live.backend = cfg.backend;
    live.batch = cfg.train.batch;
    if (cfg.metrics_port >= 0) {
      server = std::make_unique<MetricsServer>(cfg.metrics_port);
      server->publish(prometheus_text(live));
      std::printf("live metrics on http://127.0.0.1:%d/metrics\n", server->port());
      std::fflush(stdout);
    }
  }
  Bytes seen{0, 0};  // this rank's counts at the end of the previous step
  std::array<bool, kNumAlarmKinds> printed{};
  // Every rank runs this with the same alarms (decided from the same figures): save is collective.
  // A step's alarms go into its metrics line; a non-finite step's (snap null) is a line of its own.
  auto act = [&](std::vector<Alarm>& fired, const std::vector<nn::StepStats>* snap) {
    std::string saved;
    for (Alarm& a : fired)
      if (a.action == AlarmAction::Save || a.action == AlarmAction::SaveStop) {
        if (saved.empty()) {
          saved = cfg.save + ".alarm-step" + std::to_string(a.step);
          trainer.save(saved);
        }
        a.checkpoint = saved;
      }
    if (rank != 0) return;
    if (!cfg.metrics.empty() && (snap || !fired.empty())) {
      if (snap)
        metrics_text += metrics_line(cfg, *snap, fired) + "\n";
      else
        for (const Alarm& a : fired) metrics_text += alarm_json(a) + "\n";
      core::write_file_atomic(cfg.metrics, metrics_text);
    }
    for (const Alarm& a : fired) {
      res.alarms.push_back(a);
      // A non-finite step's own error says it all; the others are printed the first time.
      bool& once = printed[std::size_t(a.kind)];
      if (a.kind != AlarmKind::NonFinite && !once) {
        std::fprintf(stderr, "%s; %s%s\n", a.message.c_str(),
                     a.checkpoint.empty() ? "" : ("checkpoint written to " + a.checkpoint + "; ").c_str(),
                     cfg.metrics.empty() ? "later alarms of this kind are counted in the summary"
                                         : ("later alarms of this kind go to " + cfg.metrics + " only").c_str());
        std::fflush(stderr);
        once = true;
      }
      if (on_alarm) on_alarm(a);
    }
  };
  while (trainer.next_step() < cfg.train.steps) {
    nn::StepStats st;
    if (fault) fault->step = trainer.next_step();
    try {
      st = trainer.step();
    } catch (const NonFiniteError& e) {
      std::vector<Alarm> fired = monitor.nonfinite(e);  // the state is the one before this step
      act(fired, nullptr);
      throw;
    }
    const Bytes now{counts->halo_bytes.load(), counts->collective_bytes.load()};
    std::vector<Bytes> bytes;
    std::vector<nn::StepStats> snap = gather(st, {now[0] - seen[0], now[1] - seen[1]}, bytes, alloc);
    seen = now;
    std::vector<Alarm> fired = monitor.observe(snap);
    if (rank == 0) res.steps.push_back(snap);
    act(fired, &snap);
    if (rank == 0 && (server || !cfg.metrics_textfile.empty())) {
      live.ranks = snap;
      live.halo_bytes.assign(bytes.size(), 0);
      live.collective_bytes.assign(bytes.size(), 0);
      live.halo_bytes_total.resize(bytes.size(), 0);
      live.collective_bytes_total.resize(bytes.size(), 0);
      for (std::size_t r = 0; r < bytes.size(); ++r) {
        live.halo_bytes[r] = bytes[r][0];
        live.collective_bytes[r] = bytes[r][1];
        live.halo_bytes_total[r] += bytes[r][0];
        live.collective_bytes_total[r] += bytes[r][1];
      }
      live.alarms = monitor.counts();
      const std::string text = prometheus_text(live);
      if (!cfg.metrics_textfile.empty()) core::write_file_atomic(cfg.metrics_textfile, text);
      if (server) server->publish(text);
    }
    if (rank == 0 && on_step) on_step(snap);
    for (const Alarm& a : fired)
      if (a.action == AlarmAction::Stop || a.action == AlarmAction::SaveStop) throw AlarmStopped(a);
    // Rank 0's bookkeeping (the metrics file is written and synced every step) stays out of the
    // next step's time: without this barrier the other ranks start without it and wait for it
    // at their first halo exchange, inside their step.
    world.barrier();
  }
  if (!cfg.save.empty()) trainer.save(cfg.save);
}

/// Figures of a step as doubles for an all_gather across processes.
constexpr std::size_t kStatDoubles = 15 + core::kNumMemCategories;

/// One rank per process (ucx, ...): env:// rendezvous, the world backend from the registry,
/// figures gathered with all_gather. A failure aborts the job so the other ranks stop at once
/// (except a NonFiniteError, which every rank throws at the same step by itself).
void run_distributed(const TrainSetup& cfg, const std::shared_ptr<const data::Dataset>& dataset,
                     compute::Registry& computes, core::TraceRecorder& recorder, TrainResult& res,
                     std::string& metrics_text, const StepCallback& on_step, const AlarmCallback& on_alarm) {
  const comm::EnvInfo info = comm::read_env();
  TESSERA_CHECK(info.size == cfg.mesh.size(), "mesh ", cfg.mesh.to_string(), " has ", cfg.mesh.size(),
                " ranks but this job has ", info.size, " processes (", info.source,
                " variables); start one process per rank, e.g. tessera launch --nproc ", cfg.mesh.size(), " -- train ...");
  res.rank = info.rank;
  WorldBackend job = make_world_backend(cfg.backend, cfg.timeout, info);
  comm::Backend* world = job.world.get();
  try {
    const auto n = static_cast<std::size_t>(world->size());
    Gather gather = [&](const nn::StepStats& st, const Bytes& bytes, std::vector<Bytes>& all_bytes,
                        const core::AllocatorPtr& memory) {
      std::vector<double> mine = {double(st.step), st.loss,        st.grad_norm, st.lr, st.step_time_s,
                                  st.data_time_s,  double(st.memory.peak_total), st.loss_scale,
                                  st.skipped ? 1.0 : 0.0, double(st.skipped_steps)};
      for (int c = 0; c < core::kNumMemCategories; ++c) mine.push_back(double(st.memory.peak[c]));
      mine.push_back(double(st.grad_comm_bytes));
      mine.push_back(double(st.grad_dense_bytes));
      mine.push_back(double(bytes[0]));
      mine.push_back(double(bytes[1]));
      mine.push_back(st.load_time_s);
      std::vector<double> all(kStatDoubles * n);
      if (memory && memory->space() != core::MemorySpace::Host) {
        // Ranks on GPUs: the figures travel in device memory (nccl takes nothing else).
        const core::Tensor host_mine = core::Tensor::from_blob(mine.data(), {core::Shape::value_type(kStatDoubles)},
                                                               core::DType::F64, nullptr);
        const core::Tensor dev_mine = host_mine.to(memory, core::MemCategory::Workspace);
        core::Tensor dev_all = core::Tensor::empty({core::Shape::value_type(all.size())}, core::DType::F64,
                                                   core::MemCategory::Workspace, memory);
        world->all_gather(comm::buffer_of(dev_mine), comm::buffer_of(dev_all))->wait();
        core::Tensor::from_blob(all.data(), {core::Shape::value_type(all.size())}, core::DType::F64, nullptr)
            .copy_from(dev_all);
      } else {
        world->all_gather({mine.data(), kStatDoubles, core::DType::F64}, {all.data(), all.size(), core::DType::F64})->wait();
      }
      std::vector<nn::StepStats> out(n);
      all_bytes.assign(n, {});
      for (std::size_t r = 0; r < n; ++r) {
        const double* v = all.data() + r * kStatDoubles;
        out[r].step = static_cast<std::int64_t>(v[0]);
        out[r].loss = v[1];
        out[r].grad_norm = v[2];
        out[r].lr = v[3];
        out[r].step_time_s = v[4];
        out[r].data_time_s = v[5];
        out[r].memory.peak_total = static_cast<std::size_t>(v[6]);
        out[r].loss_scale = v[7];
        out[r].skipped = v[8] != 0;
        out[r].skipped_steps = static_cast<std::int64_t>(v[9]);
        for (int c = 0; c < core::kNumMemCategories; ++c) out[r].memory.peak[c] = static_cast<std::size_t>(v[10 + c]);
        out[r].grad_comm_bytes = static_cast<std::int64_t>(v[10 + core::kNumMemCategories]);
        out[r].grad_dense_bytes = static_cast<std::int64_t>(v[11 + core::kNumMemCategories]);
        all_bytes[r] = {static_cast<std::int64_t>(v[12 + core::kNumMemCategories]),
                        static_cast<std::int64_t>(v[13 + core::kNumMemCategories])};
        out[r].load_time_s = v[14 + core::kNumMemCategories];
      }
      return out;
    };
    if (!cfg.trace.empty() && info.rank != 0) {
      const std::size_t slash = cfg.trace.find_last_of('/'), dot = cfg.trace.find_last_of('.');
      const std::size_t at = dot != std::string::npos && (slash == std::string::npos || dot > slash) ? dot : cfg.trace.size();
      res.trace_path = cfg.trace.substr(0, at) + ".rank" + std::to_string(info.rank) + cfg.trace.substr(at);
    }
    // One process per rank: each takes its own GPU (cuda:N is the first of this node's).
    rank_loop(cfg, cfg.device_index + info.local_rank, *world, dataset, computes, recorder, res, metrics_text,
              gather, on_step, on_alarm);
    world->barrier();
  } catch (const NonFiniteError&) {
    // Every rank decided this from the same replicated loss and norm and stops at the same step
    // by itself; aborting the job could only turn a peer's own message into "aborted".
    throw;
  } catch (const AlarmStopped&) {
    throw;  // likewise: every rank judged the same gathered figures and stops after the same step
  } catch (const std::exception& e) {
    job.rendezvous->store()->abort(detail::cat("rank ", info.rank, " failed: ", e.what()));
    throw;
  }
}

}  // namespace

TrainResult train(const TrainSetup& cfg, const StepCallback& on_step, const AlarmCallback& on_alarm) {
  const int n = cfg.mesh.size();
  // A malformed TESSERA_FAULT is refused before any rank starts (each rank reads it again).
  if (const auto fault = fault_from_env())
    TESSERA_CHECK(fault->rank < n, kFaultVariable, "='", fault->text, "' names rank ", fault->rank, " but mesh ",
                  cfg.mesh.to_string(), " has ", n, " rank(s); expected ", kFaultSyntax);
  auto dataset = make_dataset(cfg);
  compute::Registry computes;
  register_builtin_backends(computes);
  core::TraceRecorder recorder;
  TrainResult res;
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
      std::vector<Bytes> current_bytes(static_cast<std::size_t>(n));
      std::mutex mu;
      comm::local::run(n, [&](comm::Backend& world) {
        Gather gather = [&](const nn::StepStats& st, const Bytes& bytes, std::vector<Bytes>& all_bytes,
                            const core::AllocatorPtr&) {
          {
            std::lock_guard<std::mutex> lock(mu);
            current[static_cast<std::size_t>(world.rank())] = st;
            current_bytes[static_cast<std::size_t>(world.rank())] = bytes;
          }
          world.barrier();
          std::vector<nn::StepStats> snap;
          {
            std::lock_guard<std::mutex> lock(mu);
            snap = current;
            all_bytes = current_bytes;
          }
          world.barrier();
          return snap;
        };
        rank_loop(cfg, cfg.device_index, world, dataset, computes, recorder, res, metrics_text, gather, on_step,
                  on_alarm);
      });
    } else {
      run_distributed(cfg, dataset, computes, recorder, res, metrics_text, on_step, on_alarm);
    }
  } catch (const NonFiniteError&) {
    // A diverged run stopped every rank at the same step: the metrics file already holds the
    // steps that completed; the trace shows them and the failed step up to the check; the
    // checkpoint (--save) is not written, so an existing file stays as it was.
    write_trace();
    throw;
  } catch (const AlarmStopped&) {
    // An alarm stopped every rank after the same step: its metrics are written, as is the trace.
    write_trace();
    throw;
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_trace();
  return res;
}

std::string training_summary(const TrainSetup& cfg, const TrainResult& r) {
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
  os << buf;
  {
    // The input pipeline: whether the loader kept up (the first step always waits for its batch).
    std::vector<double> wait, load;
    for (std::size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i) {
      double w = 0, l = 0;
      for (auto& s : r.steps[i]) w = std::max(w, s.data_time_s), l = std::max(l, s.load_time_s);
      wait.push_back(w), load.push_back(l);
    }
    std::sort(wait.begin(), wait.end());
    std::sort(load.begin(), load.end());
    const double w = wait[wait.size() / 2], l = load[load.size() / 2];
    const data::LoaderOptions& lo = cfg.train.loader;
    if (lo.prefetch > 0)
      std::snprintf(buf, sizeof buf, "input: prefetch %d, %d loader thread(s) per rank; a batch loads in %.3f s, steps "
                    "waited %.3f s for it (median)%s\n", lo.prefetch, lo.workers, l, w,
                    w > 0.1 * med ? "; the loader does not keep up: add --loader-workers" : "");
    else
      std::snprintf(buf, sizeof buf, "input: loaded in each step, %.3f s of it (median; --prefetch N loads ahead)\n", w);
    os << buf;
  }
  const nn::StepStats& g = r.steps.back()[0];
  if (g.grad_dense_bytes > 0) {
    // What rank 0's gradient collectives carried in the last step (the buffers handed to them).
    std::ostringstream how;
    if (cfg.train.grad_compression == nn::GradCompression::TopK)
      how << "top-k, ratio " << cfg.train.topk_ratio << ", all_gather of (index, value) pairs";
    else
      how << "all-reduce in " << nn::precision_name(cfg.train.grad_reduce);
    std::snprintf(buf, sizeof buf, "gradient buckets per step: %.3f MiB on the wire of %.3f MiB dense (%.1fx less; %s)\n",
                  g.grad_comm_bytes / 1048576.0, g.grad_dense_bytes / 1048576.0,
                  double(g.grad_dense_bytes) / double(std::max<std::int64_t>(g.grad_comm_bytes, 1)), how.str().c_str());
    os << buf;
  }
  if (!r.alarms.empty()) {
    std::array<int, kNumAlarmKinds> n{};
    for (const Alarm& a : r.alarms) ++n[std::size_t(a.kind)];
    os << "alarms:";
    for (int k = 0; k < kNumAlarmKinds; ++k)
      if (n[std::size_t(k)]) os << " " << alarm_kind_name(static_cast<AlarmKind>(k)) << " " << n[std::size_t(k)];
    os << " (first at step " << r.alarms.front().step + 1 << (cfg.metrics.empty() ? "" : "; each in " + cfg.metrics)
       << ")\n";
  }
  os << "peak memory per rank (MiB):\n  rank        total";
  for (int c = 0; c < core::kNumMemCategories; ++c) {
    std::snprintf(buf, sizeof buf, " %15s", std::string(category(c)).c_str());
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

TrainResult train(const RunSpec& spec, const StepCallback& on_step, const AlarmCallback& on_alarm) {
  return train(resolve_train(spec), on_step, on_alarm);
}

namespace {

using Json = nlohmann::ordered_json;

Json step_object(const std::vector<nn::StepStats>& ranks) {
  const nn::StepStats& s = ranks.at(0);
  Json d;
  d["step"] = s.step;
  d["loss"] = s.loss;
  d["grad_norm"] = s.grad_norm;
  d["loss_scale"] = s.loss_scale;
  d["skipped"] = s.skipped;
  d["skipped_steps"] = s.skipped_steps;
  d["grad_comm_bytes"] = s.grad_comm_bytes;
  d["grad_dense_bytes"] = s.grad_dense_bytes;
  d["lr"] = s.lr;
  d["step_time_s"] = s.step_time_s;
  double data = 0, load = 0;
  for (const nn::StepStats& r : ranks) data = std::max(data, r.data_time_s), load = std::max(load, r.load_time_s);
  d["data_time_s"] = data;
  d["load_time_s"] = load;
  Json times = Json::array(), mem = Json::array();
  for (const nn::StepStats& r : ranks) {
    times.push_back(r.step_time_s);
    Json m = Json::object();
    for (int c = 0; c < core::kNumMemCategories; ++c)
      m[std::string(category(c))] = r.memory.peak[c];
    m["total"] = r.memory.peak_total;
    mem.push_back(m);
  }
  d["step_time_s_per_rank"] = times;
  d["peak_memory_bytes"] = mem;
  return d;
}

}  // namespace

std::string step_json(const std::vector<nn::StepStats>& ranks) { return step_object(ranks).dump(); }

std::string train_json(const TrainSetup& setup, const TrainResult& r) {
  Json o;
  o["model"] = setup.train.model.name;
  o["mesh"] = setup.mesh.to_string();
  o["backend"] = setup.backend;
  o["rank"] = r.rank;
  o["parameters"] = r.parameters;
  o["wall_s"] = r.wall_s;
  Json steps = Json::array();
  for (const auto& s : r.steps) steps.push_back(step_object(s));
  o["steps"] = steps;
  Json alarms = Json::array();
  for (const Alarm& a : r.alarms) alarms.push_back(Json::parse(alarm_json(a)));
  o["alarms"] = alarms;
  o["summary"] = training_summary(setup, r);
  return o.dump(1);
}

}  // namespace tessera::run
