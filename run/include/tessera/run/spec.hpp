// The run description every front end fills (the `tessera` CLI, tessera studio, the Python
// module): one typed record of what to train or simulate, parsed and validated here once — from
// JSON or from field=value strings — with errors that name the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::run {

/// Everything a training run or a simulated iteration is made of. Defaults are those of
/// `tessera train` (RunSpec{}); `for_simulation()` gives those of `tessera sim run`.
struct RunSpec {
  std::string model = "convnext-atto";  ///< a preset, a JSON model file, or inline model JSON ("{...}")
  std::string input = "3x256x1024";     ///< CxHxW of one image
  int batch = 2;                        ///< global batch
  /// "sp=4", "dp=2,sp=2", "sp_h=2,sp_w=2"; one dim may be "auto" (training with one process per
  /// rank: the world size over the other dims)
  std::string mesh = "sp=2";
  std::string shard = "W";              ///< W, H or HW: what a mesh dim named sp splits
  std::string checkpointing = "none";   ///< none, block or stage
  std::string halo_recompute = "keep";  ///< with checkpointing: keep (reuse the forward's halos) or exchange
  std::string optimizer = "adamw";      ///< sgd or adamw
  double lr = 2e-3;
  double weight_decay = 0.05;
  double momentum = 0.9;  ///< SGD's
  int warmup = 5;         ///< warmup steps, then cosine decay
  double clip = 1.0;      ///< global gradient-norm clip; 0: off
  int steps = 30;
  std::uint64_t seed = 0;
  // Segmentation by default: its per-pixel loss visibly falls within the ~30 steps the default
  // run takes; classifying one shape that covers a few percent of a 256x1024 image takes
  // hundreds of steps before the loss leaves chance.
  std::string task = "segment";  ///< classify or segment
  int classes = 5;
  double drop_path = -1;             ///< stochastic-depth rate; < 0: the model's own
  /// synthetic, images:DIR (a JPEG/PNG folder), or a folder of .npy images with labels.npy
  std::string data = "synthetic";
  int prefetch = -1;                 ///< batches loaded ahead by loader threads (0: in the step; -1 auto: 2 on GPUs, 0 on cpu)
  int loader_workers = 1;            ///< loader threads per rank (with prefetch)
  bool shuffle = true;               ///< a new order of the samples every epoch, drawn from the seed
  // With data images:DIR: the transforms each sample goes through (data::ImageFolderOptions).
  bool augment = true;                     ///< random zoom, crop, flip (false: resize, centre crop)
  std::string zoom = "1:1";                ///< MIN:MAX, the random zoom range (1 <= MIN <= MAX)
  bool flip = true;                        ///< with augment: flip left-right with probability 1/2
  std::string mean = "0.485,0.456,0.406";  ///< r,g,b (or one value): per-channel normalisation
  std::string std = "0.229,0.224,0.225";   ///< r,g,b (or one value), each > 0
  int mask_ignore = 255;                   ///< the mask value of pixels to ignore
  bool skip_bad_samples = false;     ///< leave out bad files and count them instead of failing
  std::string dtype = "f32";         ///< one of nn::training_dtypes()
  std::string precision = "fp32";    ///< fp32, or bf16/fp16 (mixed precision: f32 master weights, 16-bit activations)
  std::string loss_scale = "auto";   ///< auto (dynamic for fp16), dynamic, off, or a static scale
  std::string grad_reduce_dtype = "fp32";  ///< what gradient buckets are all-reduced in: fp32, bf16 or fp16
  std::string grad_compression = "none";   ///< none, or topk (top-k with error feedback; topk_ratio of each bucket)
  double topk_ratio = 0.01;                ///< with topk: the fraction of each bucket's elements a rank sends
  std::string backend = "local";     ///< communication backend (training)
  int threads = 0;                   ///< compute threads per rank; 0: cores / ranks
  double timeout_s = 300;            ///< deadline of every communication wait
  bool overlap = true;               ///< overlap halo exchange and gradient all-reduce with compute
  int bucket_mib = 4;                ///< gradient all-reduce bucket size
  int micro_batches = 1;             ///< micro-batches per step (gradient accumulation)
  std::string schedule = "1f1b";     ///< with a mesh dim named pp: 1f1b or gpipe
  std::string stage_starts;          ///< with pp: where stages 1.. begin, "4,9" ("": balanced)
  std::string topology = "dgx-a100"; ///< simulation: a preset, a topology JSON file or inline JSON
  std::string device;                ///< training: cpu (empty), cuda, cuda:N; simulation: device model (empty: the topology's)
  std::string calibration;           ///< simulation: a `tessera calibrate` file; empty: built-in figures
  bool tf32 = false;                 ///< TF32 tensor cores for fp32 convolutions and matmuls (cuda; simulation: their peak)
  std::string all_reduce = "auto";   ///< gradient all-reduce: auto, flat or hier (comm::AllReduceAlgorithm)
  std::string node_dim;               ///< the mesh dimension across hosts ("": one named "node", if any)
  std::string alarm;                  ///< training alarms over the defaults (run::parse_alarms), e.g. "loss=2:stop"
  std::string comm_progress = "auto";  ///< simulation: auto, overlaps or in-calls (sim::CommProgress)
  std::string engine = "fast";         ///< simulation: fast or exact (sim::EngineKind)
  std::string trace;                 ///< write the Chrome trace here (empty: none)
  /// training: metrics JSON lines, checkpoint out, checkpoint in ("auto": the newest complete one
  /// of save's, run/checkpoints.hpp)
  std::string metrics, save, resume;
  /// with save: also write the checkpoint every K steps as SAVE.step<N> (0: off)
  int save_every = 0;
  int keep_checkpoints = 3;          ///< how many SAVE.step<N> files save_every keeps, newest first
  std::string init_from;             ///< training: start from these weights (.safetensors)
  int metrics_port = -1;             ///< training: live Prometheus metrics on 127.0.0.1:PORT (0: any free port; -1: off)
  std::string metrics_textfile;      ///< training: the same, written to this file after every step

  /// The fields set() and from_json() have set: what a front end was given rather than left at
  /// the default (an image folder's class count replaces a `classes` not given). What was given
  /// is not what the run is: equality and the JSON leave it out.
  struct Given {
    std::vector<std::string> names;
    bool has(const std::string& name) const;
    bool operator==(const Given&) const { return true; }
  };
  Given given;

  bool operator==(const RunSpec&) const = default;

  /// The defaults of `tessera sim run` and tessera.sim.simulate: classify over 1000 classes, sp=4,
  /// one step.
  static RunSpec for_simulation();

  /// Sets field `name` from its text ("3x64x256", "true", "0.1"), as a command line or keyword
  /// arguments give it. Throws InvalidArgument naming the field and the value: an unknown field
  /// (listing the known ones), a value of the wrong type or out of range.
  void set(const std::string& name, const std::string& value);

  /// Reads the fields present in the JSON object `text` over `base`. Throws InvalidArgument naming
  /// `origin` and the field for invalid JSON, an unknown field (listing the known ones), a value of
  /// the wrong JSON type or out of range.
  static RunSpec from_json(const std::string& text, const RunSpec& base,
                           const std::string& origin = "run description");
  /// from_json on the contents of `path` (its name as the origin).
  static RunSpec from_json_file(const std::string& path, const RunSpec& base);

  /// Every field, as one JSON object; from_json(to_json()) == *this.
  std::string to_json() const;
  /// Only the fields in `names`, in their order.
  std::string to_json(const std::vector<std::string>& names) const;

  /// Checks every field's value (set and from_json do it per field; this is for a RunSpec filled
  /// member by member). Throws InvalidArgument as set() does.
  void validate() const;

  /// The text of field `name` as set() takes it.
  std::string get(const std::string& name) const;

  /// All field names, in declaration order.
  static const std::vector<std::string>& field_names();
  /// The fields that change a simulated iteration (what the studio edits; `trace` apart).
  static const std::vector<std::string>& simulation_fields();
  /// One line of help for field `name`, for command lines and docs.
  static std::string help(const std::string& name);
  /// What field `name` holds, as a command line's help names it: "TEXT", "INT", "FLOAT", "BOOL".
  static std::string value_kind(const std::string& name);
};

}  // namespace tessera::run
