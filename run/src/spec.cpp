// RunSpec: the field table (name, member, help, check) behind set(), from_json(), to_json() and
// validate(), so that every field is parsed and checked in one place.
#include "tessera/run/spec.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <variant>

#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/core/mesh.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/run/alarms.hpp"
#include "tessera/run/resolve.hpp"

namespace tessera::run {

namespace {

using Json = nlohmann::ordered_json;
using Member = std::variant<std::string RunSpec::*, int RunSpec::*, double RunSpec::*, bool RunSpec::*,
                            std::uint64_t RunSpec::*>;

/// One field: its name, where it lives, a line of help, and its check (the rule it breaks, or "").
struct Field {
  const char* name;
  Member member;
  const char* help;
  std::string (*check)(RunSpec&);
};

std::string ok_or(bool ok, const char* rule) { return ok ? std::string() : std::string(rule); }

/// A precision field (fp32, bf16, fp16): 16 bits need f32 master weights (`why` otherwise).
std::string precision_rule(const std::string& text, const std::string& dtype, const char* why) {
  const auto p = nn::parse_precision(text);
  if (!p) return "expected fp32, bf16 or fp16";
  return ok_or(*p == nn::Precision::FP32 || dtype == "f32", why);
}

std::string one_of(const std::string& v, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return {};
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  return "expected one of: " + list;
}

/// zoom "MIN:MAX" with 1 <= MIN <= MAX.
std::string zoom_rule(const std::string& text) {
  const char* rule = "expected MIN:MAX with 1 <= MIN <= MAX, e.g. 1:1.5";
  try {
    const auto [lo, hi] = parse_zoom(text);
    return ok_or(lo >= 1 && lo <= hi && std::isfinite(hi), rule);
  } catch (const Error&) {
    return rule;
  }
}

/// mean / std: one value, or three (r,g,b); std's positive.
std::string channel_values_rule(const std::string& text, bool positive) {
  const char* rule =
      positive ? "expected r,g,b (or one value), each a number > 0, e.g. 0.229,0.224,0.225"
               : "expected r,g,b (or one value), e.g. 0.485,0.456,0.406";
  try {
    const std::vector<double> v = parse_channel_values(text);
    for (double x : v)
      if (!std::isfinite(x) || (positive && x <= 0)) return rule;
    return {};
  } catch (const Error&) {
    return rule;
  }
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      {"model", &RunSpec::model,
       "Model preset (convnext-atto ... convnext-xl, regnetx-200mf, regnety-400mf, ...), "
       "a JSON model file, or the model's JSON itself",
       [](RunSpec& s) {
         return ok_or(!s.model.empty(), "expected a preset name or a JSON model file");
       }},
      {"input", &RunSpec::input, "Image size CxHxW (H and W multiples of the model's stride, 32)",
       [](RunSpec& s) {
         try {
           parse_chw(s.input);
           return std::string();
         } catch (const Error&) {
           return std::string("expected three positive sizes CxHxW, e.g. 3x512x2048");
         }
       }},
      {"batch", &RunSpec::batch, "Global batch size",
       [](RunSpec& s) { return ok_or(s.batch >= 1, "must be a positive integer"); }},
      {"mesh", &RunSpec::mesh,
       "Device mesh: sp=4, dp=2,sp=2 or sp_h=2,sp_w=2; one dimension may be auto (dp=auto,sp=2: "
       "training with one process per rank, the launcher's world size over the other dims)",
       [](RunSpec& s) {
         try {
           check_mesh_text(s.mesh);
           return std::string();
         } catch (const Error& e) {
           return std::string(e.what());
         }
       }},
      {"shard", &RunSpec::shard,
       "Spatial dimension a mesh dim named sp splits: W or H (HW needs sp_h,sp_w)",
       [](RunSpec& s) {
         std::transform(s.shard.begin(), s.shard.end(), s.shard.begin(), ::toupper);
         return one_of(s.shard, {"W", "H", "HW"});
       }},
      {"checkpointing", &RunSpec::checkpointing, "Activation checkpointing: none, block or stage",
       [](RunSpec& s) {
         return one_of(s.checkpointing, {"none", "block", "stage"});
       }},
      {"halo_recompute", &RunSpec::halo_recompute,
       "With checkpointing: keep (a block's recompute reuses the halos its forward received, kept "
       "as halo "
       "buffers) or exchange (the recompute exchanges them again)",
       [](RunSpec& s) {
         return one_of(s.halo_recompute, {"keep", "exchange"});
       }},
      {"optimizer", &RunSpec::optimizer, "sgd or adamw",
       [](RunSpec& s) {
         return one_of(s.optimizer, {"sgd", "adamw"});
       }},
      {"lr", &RunSpec::lr, "Peak learning rate",
       [](RunSpec& s) {
         return ok_or(std::isfinite(s.lr) && s.lr >= 0, "must be a finite number >= 0");
       }},
      {"weight_decay", &RunSpec::weight_decay, "Weight decay",
       [](RunSpec& s) {
         return ok_or(std::isfinite(s.weight_decay) && s.weight_decay >= 0,
                      "must be a finite number >= 0");
       }},
      {"momentum", &RunSpec::momentum, "SGD momentum",
       [](RunSpec& s) { return ok_or(s.momentum >= 0 && s.momentum < 1, "must be in [0, 1)"); }},
      {"warmup", &RunSpec::warmup, "Warmup steps (then cosine decay)",
       [](RunSpec& s) { return ok_or(s.warmup >= 0, "must be at least 0"); }},
      {"clip", &RunSpec::clip, "Global gradient-norm clip (0 = off)",
       [](RunSpec& s) {
         return ok_or(std::isfinite(s.clip) && s.clip >= 0,
                      "must be a finite number >= 0 (0: off)");
       }},
      {"steps", &RunSpec::steps, "Training steps",
       [](RunSpec& s) { return ok_or(s.steps >= 1, "must be at least 1"); }},
      {"seed", &RunSpec::seed, "Seed for weights, data and DropPath",
       [](RunSpec&) { return std::string(); }},
      {"task", &RunSpec::task, "classify or segment",
       [](RunSpec& s) {
         return one_of(s.task, {"classify", "segment"});
       }},
      {"classes", &RunSpec::classes, "Number of classes",
       [](RunSpec& s) { return ok_or(s.classes >= 2, "must be at least 2"); }},
      {"drop_path", &RunSpec::drop_path, "Stochastic-depth rate (negative: the model's own)",
       [](RunSpec& s) {
         return ok_or(s.drop_path < 1, "must be below 1 (negative: the model's own)");
       }},
      {"data", &RunSpec::data,
       "synthetic; images:DIR, a folder of JPEG/PNG images (DIR/images + DIR/masks: "
       "segmentation; one folder per class: classification); or a folder of .npy images with "
       "labels.npy",
       [](RunSpec& s) {
         return ok_or(!s.data.empty() && s.data != "images:",
                      "expected synthetic, images:DIR or a folder of .npy files");
       }},
      {"prefetch", &RunSpec::prefetch,
       "Batches each rank's loader threads load ahead of the step being trained, each booked as "
       "activation memory "
       "(0: every step loads its own batch when it starts; -1, auto: 2 when the ranks compute on "
       "GPUs, 0 on the cpu "
       "backend, whose threads already keep every core busy)",
       [](RunSpec& s) {
         return ok_or(s.prefetch >= -1 && s.prefetch <= 64, "must be in [0, 64], or -1 (auto)");
       }},
      {"loader_workers", &RunSpec::loader_workers,
       "Loader threads per rank that load batches ahead (with prefetch)",
       [](RunSpec& s) {
         return ok_or(s.loader_workers >= 1 && s.loader_workers <= 64, "must be in [1, 64]");
       }},
      {"shuffle", &RunSpec::shuffle,
       "Visit the samples in a new order every epoch, drawn from the seed (every rank "
       "draws the same one); false: in index order",
       [](RunSpec&) { return std::string(); }},
      {"augment", &RunSpec::augment,
       "With data images:DIR: random zoom, crop and flip drawn from the seed (false: resize to "
       "cover the input and centre-crop, as for evaluation)",
       [](RunSpec&) { return std::string(); }},
      {"zoom", &RunSpec::zoom,
       "With data images:DIR and augment: MIN:MAX, the range of the random zoom over the size "
       "that covers the input (1 <= MIN <= MAX, e.g. 1:1.5)",
       [](RunSpec& s) { return zoom_rule(s.zoom); }},
      {"flip", &RunSpec::flip,
       "With data images:DIR and augment: flip left-right with probability 1/2",
       [](RunSpec&) { return std::string(); }},
      {"mean", &RunSpec::mean,
       "With data images:DIR: per-channel mean r,g,b of pixel values in [0, 1] subtracted "
       "(ImageNet's by default, what timm's pretrained models expect)",
       [](RunSpec& s) { return channel_values_rule(s.mean, false); }},
      {"std", &RunSpec::std,
       "With data images:DIR: per-channel standard deviation r,g,b the values are divided by "
       "(ImageNet's by default)",
       [](RunSpec& s) { return channel_values_rule(s.std, true); }},
      {"mask_ignore", &RunSpec::mask_ignore,
       "With a segmentation folder: the mask value of pixels the loss ignores (255 as in "
       "Cityscapes and ADE20K)",
       [](RunSpec& s) {
         return ok_or(s.mask_ignore >= 0 && s.mask_ignore <= 65535,
                      "must be a mask value in [0, 65535]");
       }},
      {"skip_bad_samples", &RunSpec::skip_bad_samples,
       "With data images:DIR: leave out unreadable, truncated or corrupt files and bad masks and "
       "count them (in the metrics) instead of stopping with an error naming the file",
       [](RunSpec&) { return std::string(); }},
      {"dtype", &RunSpec::dtype,
       "Training dtype: f32, or f64 (float64: the exact answer a float32 run is compared against)",
       [](RunSpec& s) {
         return nn::training_dtype(s.dtype) ? std::string()
                                            : "the trainer keeps its weights in f32 or f64 (16-bit activations over f32 weights: precision "
                                                  "bf16 or fp16); use one of: " + nn::training_dtype_names();
       }},
      {"precision", &RunSpec::precision,
       "fp32, or bf16 / fp16: mixed precision (f32 master weights and optimizer state; "
       "activations, saved tensors "
       "and halos in 16 bits; fp32 accumulation)",
       [](RunSpec& s) {
         return precision_rule(s.precision, s.dtype,
                               "mixed precision keeps f32 master weights: use it with dtype f32");
       }},
      {"loss_scale", &RunSpec::loss_scale,
       "Loss scaling: auto (dynamic for fp16, off otherwise), dynamic, off, or a static scale such "
       "as 1024",
       [](RunSpec& s) {
         try {
           nn::parse_loss_scale(s.loss_scale);
         } catch (const InvalidArgument&) {
           return std::string("expected auto, dynamic, off or a positive number");
         }
         return std::string();
       }},
      {"grad_reduce_dtype", &RunSpec::grad_reduce_dtype,
       "What gradient buckets are all-reduced in: fp32 (the gradients' own), or bf16 / fp16 (half "
       "the bytes, "
       "summed in f32 by the backend where it can)",
       [](RunSpec& s) {
         return precision_rule(s.grad_reduce_dtype, s.dtype,
                               "16-bit gradient reduction needs dtype f32");
       }},
      {"grad_compression", &RunSpec::grad_compression,
       "How gradient buckets travel: none (the dense all-reduce) or topk (each rank sends the "
       "topk_ratio largest "
       "entries of each bucket with error feedback: what is not sent is kept and added the next "
       "step)",
       [](RunSpec& s) {
         const std::string e = one_of(s.grad_compression, {"none", "topk"});
         if (!e.empty() || s.grad_compression == "none") return e;
         return ok_or(s.grad_reduce_dtype == "fp32", "topk sends f32 values: use it with grad_reduce_dtype fp32, "
                      "or grad_reduce_dtype bf16/fp16 without topk");
       }},
      {"topk_ratio", &RunSpec::topk_ratio,
       "With grad_compression topk: the fraction of each bucket's elements a rank "
       "sends per step (0 < ratio <= 1; 0.01 sends 1%)",
       [](RunSpec& s) {
         return ok_or(std::isfinite(s.topk_ratio) && s.topk_ratio > 0 && s.topk_ratio <= 1,
                      "must be a fraction: 0 < ratio <= 1");
       }},
      {"backend", &RunSpec::backend, "Communication backend (tessera backends lists them)",
       [](RunSpec& s) {
         return ok_or(!s.backend.empty(), "expected a backend name such as local");
       }},
      {"threads", &RunSpec::threads, "Compute threads per rank (0 = cores / ranks)",
       [](RunSpec& s) { return ok_or(s.threads >= 0, "must be at least 0 (0: cores / ranks)"); }},
      {"timeout_s", &RunSpec::timeout_s, "Deadline of every communication wait, seconds",
       [](RunSpec& s) {
         return ok_or(std::isfinite(s.timeout_s) && s.timeout_s > 0,
                      "must be a positive number of seconds");
       }},
      {"overlap", &RunSpec::overlap, "Overlap halo exchange and gradient all-reduce with compute",
       [](RunSpec&) { return std::string(); }},
      {"bucket_mib", &RunSpec::bucket_mib, "Gradient all-reduce bucket size in MiB",
       [](RunSpec& s) { return ok_or(s.bucket_mib >= 1, "must be at least 1"); }},
      {"micro_batches", &RunSpec::micro_batches,
       "Micro-batches per step (gradient accumulation): the batch is cut into this many, each "
       "runs forward and backward in turn and the optimizer steps once; must divide the batch",
       [](RunSpec& s) { return ok_or(s.micro_batches >= 1, "must be at least 1"); }},
      {"schedule", &RunSpec::schedule,
       "With a mesh dim named pp (pipeline stages): the order each stage runs its micro-batches, "
       "1f1b (backwards start as soon as the last stage can; fewer micro-batches in flight) or "
       "gpipe (every forward first)",
       [](RunSpec& s) {
         return nn::parse_pipeline_schedule(s.schedule) ? std::string()
                                                        : one_of(s.schedule, {"1f1b", "gpipe"});
       }},
      {"stage_starts", &RunSpec::stage_starts,
       "With a mesh dim named pp: the unit index where each stage after the first begins, "
       "comma-separated and increasing (pp - 1 of them, e.g. 4,9 for pp=3); empty: balanced by "
       "cost",
       [](RunSpec& s) {
         try {
           parse_stage_starts(s.stage_starts);
         } catch (const Error&) {
           return std::string(
               "expected increasing unit indices >= 1 separated by commas, e.g. 4,9 (empty: "
               "balanced)");
         }
         return std::string();
       }},
      {"topology", &RunSpec::topology,
       "A topology preset (tessera sim --list), a topology JSON file or its JSON itself",
       [](RunSpec& s) {
         return ok_or(!s.topology.empty(), "expected a preset name or a topology JSON file");
       }},
      {"device", &RunSpec::device,
       "What every rank runs on. Training: cpu (default) or cuda, cuda:N (a GPU; in-process ranks "
       "share it, "
       "one process per rank takes GPU N + its local rank); simulation: a device model (default: "
       "the topology's)",
       [](RunSpec&) { return std::string(); }},
      {"calibration", &RunSpec::calibration,
       "A tessera calibrate file: its device (cpu-host, with the measured shared-memory links of "
       "the cpu-host "
       "presets) and kernel rates replace the built-in figures",
       [](RunSpec&) { return std::string(); }},
      {"tf32", &RunSpec::tf32,
       "Let fp32 convolutions and matrix products use TF32 tensor cores (training on cuda; a "
       "simulation times "
       "them at the TF32 peak)",
       [](RunSpec&) { return std::string(); }},
      {"all_reduce", &RunSpec::all_reduce,
       "Reductions that span the node dimension: auto (hierarchical across >= 2 hosts of >= 2 "
       "ranks up to 32 MiB, "
       "else flat), flat, or hier (reduce-scatter in the node, all-reduce across nodes, all-gather "
       "in the node)",
       [](RunSpec& s) {
         return one_of(s.all_reduce, {"auto", "flat", "hier", "hierarchical"});
       }},
      {"alarm", &RunSpec::alarm,
       "Training alarms over the defaults "
       "(grad_norm=10,grad_variance=1,loss=4,step_time=3,nonfinite=stop,"
       "window=20,warmup=5): name=THRESHOLD[:warn|save|stop|save+stop] or name=off, "
       "comma-separated; each fired "
       "alarm goes to the metrics file and is printed once",
       [](RunSpec& s) {
         try {
           parse_alarms(s.alarm);
         } catch (const Error& e) {
           return std::string(e.what());
         }
         return std::string();
       }},
      {"node_dim", &RunSpec::node_dim,
       "The mesh dimension whose ranks are on different hosts, e.g. dp for dp=2,sp=4 on two hosts "
       "of four "
       "(default: none, or a dimension named node)",
       [](RunSpec&) { return std::string(); }},
      {"comm_progress", &RunSpec::comm_progress,
       "Simulation: when communication moves. overlaps: while the ranks compute (NCCL; local and "
       "ucx by "
       "default); in-calls: a collective blocks its post (local and ucx with "
       "TESSERA_LOCAL_PROGRESS or "
       "TESSERA_UCX_PROGRESS=calls); auto: overlaps",
       [](RunSpec& s) {
         try {
           sim::parse_comm_progress(s.comm_progress);
         } catch (const InvalidArgument&) {
           return std::string("expected auto, overlaps or in-calls");
         }
         return std::string();
       }},
      {"engine", &RunSpec::engine,
       "Simulation: fast (symmetric ranks, routes and collective groups simulated once per "
       "class: the default) or exact (every rank, route and group on its own: the reference)",
       [](RunSpec& s) {
         return one_of(s.engine, {"fast", "exact"});
       }},
      {"trace", &RunSpec::trace, "Write the Chrome-trace timeline (Perfetto) here",
       [](RunSpec&) { return std::string(); }},
      {"metrics", &RunSpec::metrics, "Write one JSON object per step here (JSON lines)",
       [](RunSpec&) { return std::string(); }},
      {"save", &RunSpec::save, "Write a checkpoint here at the end",
       [](RunSpec&) { return std::string(); }},
      {"resume", &RunSpec::resume,
       "Resume from this checkpoint; auto: from the newest complete one among save's (SAVE and "
       "SAVE.step<N>), or from the start when there is none",
       [](RunSpec&) { return std::string(); }},
      {"save_every", &RunSpec::save_every,
       "With save: also write the checkpoint every K steps as SAVE.step<N> (0: off)",
       [](RunSpec& s) { return ok_or(s.save_every >= 0, "must be at least 0 (0: off)"); }},
      {"keep_checkpoints", &RunSpec::keep_checkpoints,
       "How many SAVE.step<N> files save_every keeps, newest first",
       [](RunSpec& s) { return ok_or(s.keep_checkpoints >= 1, "must be at least 1"); }},
      {"init_from", &RunSpec::init_from,
       "Start from the weights of this .safetensors file (timm's pretrained ConvNeXt or RegNet, "
       "or a tessera export); a classifier of another class count is re-initialised. Not with "
       "a resume file; with resume auto, only while no checkpoint exists",
       [](RunSpec&) { return std::string(); }},
      {"metrics_port", &RunSpec::metrics_port,
       "Serve live Prometheus metrics on http://127.0.0.1:PORT/metrics while training (0: any free "
       "port, printed; "
       "-1: off)",
       [](RunSpec& s) {
         return ok_or(s.metrics_port >= -1 && s.metrics_port <= 65535,
                      "must be a port 1-65535, 0 (any free port) or -1 (off)");
       }},
      {"metrics_textfile", &RunSpec::metrics_textfile,
       "Write the live Prometheus metrics to this file after every step (node-exporter textfile "
       "collector; "
       "name it *.prom)",
       [](RunSpec&) { return std::string(); }},
  };
  return table;
}

const Field* find(const std::string& name) {
  for (const Field& f : fields())
    if (name == f.name) return &f;
  return nullptr;
}

std::string known_list() {
  std::string s;
  for (const Field& f : fields()) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

const Field& find_or_throw(const std::string& name, const std::string& where) {
  const Field* f = find(name);
  TESSERA_CHECK(f != nullptr, where, "unknown field \"", name, "\"; known fields: ", known_list());
  return *f;
}

Json value_json(const RunSpec& s, const Field& f) {
  return std::visit([&](auto m) { return Json(s.*m); }, f.member);
}

std::string value_text(const RunSpec& s, const Field& f) {
  if (auto m = std::get_if<std::string RunSpec::*>(&f.member)) return s.**m;
  return value_json(s, f).dump();
}

// The text of a value as set() parses it; "" and the kind expected when it does not parse.
bool parse_text(RunSpec& s, const Field& f, const std::string& text, std::string& expected) {
  struct Visitor {
    RunSpec& s;
    const std::string& t;
    std::string& expected;
    bool operator()(std::string RunSpec::*m) const {
      s.*m = t;
      return true;
    }
    bool operator()(bool RunSpec::*m) const {
      std::string l = t;
      std::transform(l.begin(), l.end(), l.begin(), ::tolower);
      if (l == "true" || l == "1" || l == "on" || l == "yes") return s.*m = true, true;
      if (l == "false" || l == "0" || l == "off" || l == "no") return s.*m = false, true;
      expected = "expected true or false";
      return false;
    }
    bool operator()(int RunSpec::*m) const {
      try {
        std::size_t used = 0;
        const long long v = std::stoll(t, &used);
        if (used == t.size() && v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max())
          return s.*m = static_cast<int>(v), true;
      } catch (const std::exception&) {
      }
      expected = "expected an integer";
      return false;
    }
    bool operator()(std::uint64_t RunSpec::*m) const {
      try {
        std::size_t used = 0;
        if (!t.empty() && t[0] != '-') {
          const unsigned long long v = std::stoull(t, &used);
          if (used == t.size()) return s.*m = v, true;
        }
      } catch (const std::exception&) {
      }
      expected = "expected a non-negative integer";
      return false;
    }
    bool operator()(double RunSpec::*m) const {
      try {
        std::size_t used = 0;
        const double v = std::stod(t, &used);
        if (used == t.size()) return s.*m = v, true;
      } catch (const std::exception&) {
      }
      expected = "expected a number";
      return false;
    }
  };
  return std::visit(Visitor{s, text, expected}, f.member);
}

/// stage_starts given as a JSON list of unit indices ([4, 9]): its text ("4,9").
bool stage_list(const Json& v, std::string& out, std::string& expected) {
  expected = "a string such as \"4,9\" or a list of integers such as [4, 9]";
  if (!v.is_array()) return false;
  std::string text;
  for (const Json& x : v) {
    if (!x.is_number_integer()) return false;
    text += (text.empty() ? "" : ",") + std::to_string(x.get<long long>());
  }
  out = text;
  return true;
}

// A JSON value into the field; the JSON type expected when it does not fit.
bool parse_json(RunSpec& s, const Field& f, const Json& v, std::string& expected) {
  struct Visitor {
    RunSpec& s;
    const Json& v;
    std::string& expected;
    bool operator()(std::string RunSpec::*m) const {
      if (v.is_string()) return s.*m = v.get<std::string>(), true;
      // A model or topology given as its own JSON object.
      if (v.is_object() && (m == &RunSpec::model || m == &RunSpec::topology)) return s.*m = v.dump(), true;
      if (m == &RunSpec::stage_starts) return stage_list(v, s.*m, expected);
      expected = m == &RunSpec::model || m == &RunSpec::topology ? "a string or a JSON object" : "a string";
      return false;
    }
    bool operator()(bool RunSpec::*m) const {
      if (v.is_boolean()) return s.*m = v.get<bool>(), true;
      expected = "true or false";
      return false;
    }
    bool operator()(int RunSpec::*m) const {
      if (v.is_number_integer() && v.get<long long>() >= std::numeric_limits<int>::min() &&
          v.get<long long>() <= std::numeric_limits<int>::max())
        return s.*m = v.get<int>(), true;
      expected = "an integer";
      return false;
    }
    bool operator()(std::uint64_t RunSpec::*m) const {
      if (v.is_number_unsigned() || (v.is_number_integer() && v.get<long long>() >= 0))
        return s.*m = v.get<std::uint64_t>(), true;
      expected = "a non-negative integer";
      return false;
    }
    bool operator()(double RunSpec::*m) const {
      if (v.is_number()) return s.*m = v.get<double>(), true;
      expected = "a number";
      return false;
    }
  };
  return std::visit(Visitor{s, v, expected}, f.member);
}

}  // namespace

RunSpec RunSpec::for_simulation() {
  RunSpec s;
  s.task = "classify";
  s.classes = 1000;
  s.mesh = "sp=4";
  s.steps = 1;
  return s;
}

void RunSpec::set(const std::string& name, const std::string& value) {
  const Field& f = find_or_throw(name, "");
  RunSpec next = *this;
  std::string expected;
  TESSERA_CHECK(parse_text(next, f, value, expected), name, " '", value, "': ", expected);
  const std::string rule = f.check(next);
  TESSERA_CHECK(rule.empty(), name, " '", value, "': ", rule);
  *this = std::move(next);
  if (!given.has(name)) given.names.push_back(name);
}

bool RunSpec::Given::has(const std::string& name) const {
  return std::find(names.begin(), names.end(), name) != names.end();
}

RunSpec RunSpec::from_json(const std::string& text, const RunSpec& base, const std::string& origin) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw InvalidArgument(detail::cat(origin, ": not valid JSON at byte ", e.byte, ": ", e.what()));
  } catch (const Json::exception& e) {  // out_of_range for a number like 1e999
    throw InvalidArgument(detail::cat(origin, ": not valid JSON: ", e.what()));
  }
  TESSERA_CHECK(doc.is_object(), origin, ": expected a JSON object such as {\"model\": \"convnext-t\", \"mesh\": \"sp=4\"}");
  RunSpec s = base;
  for (const auto& [key, v] : doc.items()) {
    const Field& f = find_or_throw(key, origin + ": ");
    std::string expected;
    TESSERA_CHECK(parse_json(s, f, v, expected), origin, ": field \"", key, "\" must be ", expected);
    const std::string rule = f.check(s);
    TESSERA_CHECK(rule.empty(), origin, ": field \"", key, "\" is ", v.dump(), ": ", rule);
    if (!s.given.has(key)) s.given.names.push_back(key);
  }
  return s;
}

RunSpec RunSpec::from_json_file(const std::string& path, const RunSpec& base) {
  std::string text;
  try {
    text = core::read_file(path);
  } catch (const Error& e) {
    throw InvalidArgument(detail::cat("run description '", path, "': cannot be read (", e.what(), ")"));
  }
  return from_json(text, base, "run description '" + path + "'");
}

std::string RunSpec::to_json() const { return to_json(field_names()); }

std::string RunSpec::to_json(const std::vector<std::string>& names) const {
  Json o = Json::object();
  for (const std::string& n : names) o[n] = value_json(*this, find_or_throw(n, ""));
  return o.dump(1);
}

void RunSpec::validate() const {
  RunSpec copy = *this;
  for (const Field& f : fields()) {
    const std::string rule = f.check(copy);
    TESSERA_CHECK(rule.empty(), f.name, " '", value_text(*this, f), "': ", rule);
  }
}

std::string RunSpec::get(const std::string& name) const { return value_text(*this, find_or_throw(name, "")); }

const std::vector<std::string>& RunSpec::field_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Field& f : fields()) v.emplace_back(f.name);
    return v;
  }();
  return names;
}

const std::vector<std::string>& RunSpec::simulation_fields() {
  static const std::vector<std::string> names = {"model",
                                                 "input",
                                                 "batch",
                                                 "mesh",
                                                 "shard",
                                                 "checkpointing",
                                                 "halo_recompute",
                                                 "optimizer",
                                                 "task",
                                                 "classes",
                                                 "dtype",
                                                 "precision",
                                                 "grad_reduce_dtype",
                                                 "grad_compression",
                                                 "topk_ratio",
                                                 "all_reduce",
                                                 "node_dim",
                                                 "overlap",
                                                 "bucket_mib",
                                                 "micro_batches",
                                                 "schedule",
                                                 "stage_starts",
                                                 "prefetch",
                                                 "topology",
                                                 "device",
                                                 "calibration",
                                                 "tf32",
                                                 "comm_progress",
                                                 "engine"};
  return names;
}

std::string RunSpec::help(const std::string& name) { return find_or_throw(name, "").help; }

std::string RunSpec::value_kind(const std::string& name) {
  static const char* const kinds[] = {"TEXT", "INT", "FLOAT", "BOOL", "INT"};  // Member's order
  return kinds[find_or_throw(name, "").member.index()];
}

}  // namespace tessera::run
