// `tessera train`: sharded training of a ConvNeXt or RegNet on in-process ranks, with a progress
// line per step, a final summary, and optional trace, metrics and checkpoint files.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "commands.hpp"
#include "spec_options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "tessera/run/train.hpp"

namespace tessera::tools {

namespace {

std::string mib(std::size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", double(b) / (1 << 20));
  return buf;
}

/// The size of the mesh dim named pp (1 without one).
int pipeline_stages(const run::TrainSetup& cfg) {
  const int d = cfg.mesh.find_dim("pp");
  return d >= 0 ? cfg.mesh.dim_size(d) : 1;
}

void print_step(const run::TrainSetup& cfg, const std::vector<nn::StepStats>& ranks,
                const std::vector<data::DataStats>& data, bool tty) {
  const nn::StepStats& s = ranks[0];
  double worst = 0;
  for (auto& r : ranks) worst = std::max(worst, r.step_time_s);
  std::string line = "step " + std::to_string(s.step + 1) + "/" + std::to_string(cfg.train.steps);
  char buf[160];
  std::snprintf(buf, sizeof buf, "  loss %.4f  %.3f s/step  %.2f img/s  lr %.2e  peak MiB", s.loss, worst,
                cfg.train.batch / worst, s.lr);
  line += buf;
  for (std::size_t r = 0; r < ranks.size(); ++r) line += " r" + std::to_string(r) + " " + mib(ranks[r].memory.peak_total);
  if (!data.empty()) {
    // A run on an image folder: what each rank decoded for this step (a share with sp ranks).
    line += "  decoded Mpx";
    for (std::size_t r = 0; r < data.size(); ++r) {
      std::snprintf(buf, sizeof buf, " r%zu %.2f", r, data[r].pixels_decoded / 1e6);
      line += buf;
    }
  }
  if (pipeline_stages(cfg) > 1) {
    // The rank that waited longest for a neighbouring stage: the pipeline's bubble, at its worst.
    std::size_t w = 0;
    for (std::size_t r = 1; r < ranks.size(); ++r)
      if (ranks[r].pipeline_wait_s > ranks[w].pipeline_wait_s) w = r;
    std::snprintf(buf, sizeof buf, "  pipeline wait r%zu %.3f s", w, ranks[w].pipeline_wait_s);
    line += buf;
  }
  if (tty) std::printf("\r%-150s", line.c_str());
  else std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

/// The run's notices: the live metrics address on stdout (stderr under --json, whose stdout is
/// the one JSON object), the first alarm of each kind on stderr.
run::NoticeCallback print_notice(bool json) {
  return [json](core::ReportLevel level, const std::string& text) {
    std::FILE* to = level == core::ReportLevel::Info && !json ? stdout : stderr;
    std::fprintf(to, "%s\n", text.c_str());
    std::fflush(to);
  };
}

}  // namespace

struct TrainCommandArgs {
  SpecOptions spec{run::RunSpec{}};
  bool json = false;
};

int run_train_command(const run::TrainSetup& cfg, bool json) {
  run::TrainCallbacks callbacks;
  callbacks.on_notice = print_notice(json);
  // One process per rank (ucx, ...): rank 0 reports for everyone.
  if (run::process_rank(cfg) != 0) {
    run::train(cfg, callbacks);
    return 0;
  }
  if (json) {
    std::printf("%s\n", run::train_json(cfg, run::train(cfg, callbacks)).c_str());
    return 0;
  }
  const bool tty = isatty(fileno(stdout));
  std::printf("tessera train: %s, input %s, batch %d, mesh %s (shard %s), %s backend, %d step(s), "
              "checkpointing %s, %s\n",
              cfg.train.model.name.c_str(), core::shape_str(cfg.train.input).c_str(), cfg.train.batch,
              cfg.mesh.to_string().c_str(), cfg.train.shard.c_str(), cfg.backend.c_str(), cfg.train.steps,
              cfg.train.checkpointing.c_str(), cfg.train.optimizer.kind.c_str());
  if (pipeline_stages(cfg) > 1)
    std::printf("  %d pipeline stages, schedule %s, %d micro-batch(es) of %d\n",
                pipeline_stages(cfg),
                std::string(nn::pipeline_schedule_name(cfg.train.schedule)).c_str(),
                cfg.train.micro_batches, cfg.train.batch / cfg.train.micro_batches);
  else if (cfg.train.micro_batches > 1)
    std::printf("  %d micro-batches of %d (gradient accumulation)\n", cfg.train.micro_batches,
                cfg.train.batch / cfg.train.micro_batches);
  run::TrainResult res;
  try {
    std::vector<data::DataStats> step_data;  // this step's, when the run decodes images
    callbacks.on_step_data = [&](const std::vector<data::DataStats>& d) { step_data = d; };
    callbacks.on_step = [&](const std::vector<nn::StepStats>& ranks,
                            const std::vector<run::Alarm>&) {
      print_step(cfg, ranks, step_data, tty);
    };
    res = run::train(cfg, callbacks);
  } catch (const run::AlarmStopped& e) {
    if (tty) std::printf("\n");
    std::printf("stopped after step %lld/%d by alarm %s", static_cast<long long>(e.alarm().step) + 1, cfg.train.steps,
                std::string(run::alarm_kind_name(e.alarm().kind)).c_str());
    if (!cfg.metrics.empty()) std::printf("; metrics up to it (and the alarm) are in %s", cfg.metrics.c_str());
    if (!e.alarm().checkpoint.empty()) std::printf("; checkpoint written to %s", e.alarm().checkpoint.c_str());
    std::printf("\n");
    std::fflush(stdout);
    throw;
  } catch (const NonFiniteError& e) {
    // What the diverged run left behind; main then prints the error itself and exits 1.
    if (tty) std::printf("\n");
    std::printf("stopped at step %lld/%d, which diverged", static_cast<long long>(e.step()) + 1, cfg.train.steps);
    if (!cfg.metrics.empty()) std::printf("; metrics of the steps that completed are in %s", cfg.metrics.c_str());
    if (!cfg.trace.empty()) std::printf("; trace up to the failure written to %s", cfg.trace.c_str());
    if (!cfg.save.empty()) std::printf("; checkpoint %s not written (an existing file is left as it was)", cfg.save.c_str());
    std::printf("\n");
    std::fflush(stdout);
    throw;
  }
  if (tty) std::printf("\n");
  std::printf("%s", run::training_summary(cfg, res).c_str());
  return 0;
}

void add_train_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<TrainCommandArgs>();
  CLI::App* c = app.add_subcommand("train", "Train a model spatially sharded over in-process ranks");
  a->spec.add(*c,
              {"model",
               "input",
               "batch",
               "mesh",
               "shard",
               "backend",
               "steps",
               "checkpointing",
               "halo_recompute",
               "optimizer",
               "lr",
               "weight_decay",
               "momentum",
               "warmup",
               "clip",
               "seed",
               "task",
               "classes",
               "drop_path",
               "data",
               "prefetch",
               "loader_workers",
               "shuffle",
               "augment",
               "zoom",
               "flip",
               "mean",
               "std",
               "mask_ignore",
               "skip_bad_samples",
               "save",
               "save_every",
               "keep_checkpoints",
               "resume",
               "init_from",
               "trace",
               "metrics",
               "threads",
               "timeout_s",
               "overlap",
               "dtype",
               "precision",
               "loss_scale",
               "grad_reduce_dtype",
               "grad_compression",
               "topk_ratio",
               "all_reduce",
               "node_dim",
               "bucket_mib",
               "micro_batches",
               "schedule",
               "stage_starts",
               "device",
               "tf32",
               "alarm",
               "metrics_port",
               "metrics_textfile"},
              /*with_config=*/true);
  c->add_flag("--json", a->json, "Print the run's summary as one JSON object (steps[], wall_s, parameters, summary) "
                                 "instead of the progress lines");
  c->callback([&action, a] { action = [a] { return run_train_command(run::resolve_train(a->spec.spec()), a->json); }; });
}

}  // namespace tessera::tools
