// PlanRun::to_table: the text `tessera plan` prints — configurations fastest first with their
// memory fit, the top-k verdict, the skipped candidates. Returned as a string: run/ never prints.
#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "tessera/run/plan.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::run {

namespace {

/// printf into `out` (the table's columns are printf widths).
void appendf(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& out, const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string buf(static_cast<std::size_t>(n) + 1, '\0');
  std::vsnprintf(buf.data(), buf.size(), fmt, again);
  va_end(again);
  out.append(buf.data(), static_cast<std::size_t>(n));
}

std::string duration(double s) { return sim::format_duration(static_cast<sim::Picos>(s * 1e12)); }

bool shows_compression(const sim::PlanOptions& o) {
  return o.compressions != std::vector<std::string>{"none"};
}

void append_rows(std::string& out, const PlanRun& p, int top) {
  const bool grads = shows_compression(p.options);
  appendf(out, "%4s  %-22s %3s %3s %-5s %-6s %-5s %s%11s %9s %9s %9s  %-4s %10s %10s\n", "#",
          "mesh", "pp", "M", "shard", "ckpt", "prec", grads ? "grads " : "", "iteration",
          "images/s", "peak GB", "activ GB", "fit", "compute", "comm");
  const int best = p.result.best_fit();
  for (std::size_t i = 0; i < p.result.entries.size(); ++i) {
    if (top > 0 && static_cast<int>(i) >= top && static_cast<int>(i) != best) continue;
    const sim::PlanEntry& e = p.result.entries[i];
    const char* g = grads ? (e.config.compression == "topk" ? "topk  " : "dense ") : "";
    // A pruned row's time is its lower bound; its images/s and busy times are unknown.
    const std::string time = (e.simulated ? "" : "≥ ") + duration(e.iteration_s);
    appendf(out, "%4zu  %-22s %3d %3d %-5s %-6s %-5s %s%*s ", i + 1, e.config.mesh.c_str(),
            e.config.pp, e.config.micro_batches, e.config.shard.c_str(),
            e.config.checkpointing.c_str(), e.config.precision.c_str(), g, e.simulated ? 11 : 13,
            time.c_str());  // "≥" is 3 bytes, 1 column
    if (e.simulated)
      appendf(out, "%9.3f", e.images_per_s);
    else
      appendf(out, "%9s", "-");
    // Pruned on rank 0's replay alone: its peaks, lower bounds on the candidate's.
    const char* at_least = e.memory_exact ? "" : "≥";
    const int width = e.memory_exact ? 9 : 11;  // "≥" is 3 bytes, 1 column
    char peak[32], activ[32];
    std::snprintf(peak, sizeof peak, "%s%.2f", at_least, e.peak_bytes / 1e9);
    std::snprintf(activ, sizeof activ, "%s%.2f", at_least, e.activation_peak_bytes / 1e9);
    appendf(out, " %*s %*s  %-4s %10s %10s%s\n", width, peak, width, activ,
            e.fits ? (e.memory_exact ? "ok" : "ok?") : "OOM",
            e.simulated ? duration(e.compute_busy_s).c_str() : "(pruned)",
            e.simulated ? duration(e.comm_busy_s).c_str() : "-",
            static_cast<int>(i) == best ? "  <- fastest that fits" : "");
  }
  if (best < 0) out += "no configuration fits: try more devices, a smaller batch or a larger cap\n";
}

void append_verdict(std::string& out, const PlanRun& p) {
  const sim::CompressionVerdict v = p.result.compression_verdict();
  const std::vector<std::string>& c = p.options.compressions;
  if (v.compared == 0) {
    if (c.size() > 1 && std::find(c.begin(), c.end(), "topk") != c.end())
      out += p.options.exhaustive
                 ? "top-k gradient compression: no configuration was simulated both ways (see "
                   "skipped)\n"
                 : "top-k gradient compression: no configuration was simulated both ways (the "
                   "search simulates only those that can win; --exhaustive compares them all)\n";
    return;
  }
  appendf(out,
          "top-k gradient compression (ratio %g, error feedback) against the dense all-reduce: "
          "faster in %d of %d configurations simulated both ways (saving %+.1f%% at best, %+.1f%% "
          "at worst: its selection, scatter-add and residual cost compute, its all_gather saves "
          "bytes)\n",
          p.options.train.topk_ratio, v.faster, v.compared, 100 * v.best_saving,
          100 * v.worst_saving);
  if (v.best_dense >= 0 && v.best_topk >= 0) {
    const double d = p.result.entries[std::size_t(v.best_dense)].iteration_s;
    const double t = p.result.entries[std::size_t(v.best_topk)].iteration_s;
    appendf(
        out,
        "verdict: %s: the fastest plan that fits with top-k takes %s against %s dense (%+.1f%%)\n",
        t < d ? "top-k pays here" : "top-k does not pay here", duration(t).c_str(),
        duration(d).c_str(), 100 * (t / d - 1));
  } else {
    appendf(out, "verdict: none: %s\n",
            v.best_dense < 0 && v.best_topk < 0 ? "no plan fits either way"
            : v.best_topk < 0                   ? "no top-k plan fits"
                                                : "no dense plan fits");
  }
}

}  // namespace

std::string PlanRun::to_table(int top) const {
  std::string out;
  const sim::PlanOptions& o = options;
  appendf(out, "plan: %s, input %s, global batch %d, %s, %s on %d devices of %s\n",
          o.train.model.name.c_str(), input.c_str(), o.train.batch, o.train.optimizer.kind.c_str(),
          o.train.overlap ? "overlap" : "no overlap", result.devices, topology.c_str());
  if (o.memory_cap_bytes > 0)
    appendf(out, "memory cap %.2f GB per device\n", o.memory_cap_bytes / 1e9);
  const sim::PlanProgress& n = result.progress;
  appendf(out,
          "%d configurations: %d simulated, %d pruned (≥: a lower bound above the best, or OOM), "
          "%d skipped, in %.1f s%s; sorted by predicted iteration time (GB = 1e9 bytes; peak = "
          "the largest rank's replayed peak)\n",
          n.total, n.simulated, n.pruned, n.done - n.simulated - n.pruned, wall_s,
          result.cancelled ? " (cancelled)" : "");
  append_rows(out, *this, top);
  append_verdict(out, *this);
  if (!result.skipped.empty()) {
    out += "skipped:\n";
    const bool grads = shows_compression(o);
    for (const sim::PlanSkip& s : result.skipped)
      appendf(out, "  %-22s %-5s %-6s %-5s %s%s\n", s.config.mesh.c_str(), s.config.shard.c_str(),
              s.config.checkpointing.c_str(), s.config.precision.c_str(),
              grads ? (s.config.compression + " ").c_str() : "", s.reason.c_str());
  }
  out +=
      "(pp: pipeline stages, cut where the simulator balances the units' kernel time; M: "
      "micro-batches per step, whose gradients accumulate before one optimizer step; M > 1 "
      "keeps 1/M of the activations with pp = 1, and with pp > 1 fills the pipeline's bubble of "
      "about (pp-1)/(M+pp-1))\n";
  return out;
}

}  // namespace tessera::run
