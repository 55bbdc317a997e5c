// Trainer: one rank's training loop — sharded forward and backward, bucketed gradient
// all-reduce, clipping, optimizer, learning-rate schedule, checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/allocator.hpp"
#include "tessera/data/dataset.hpp"
#include "tessera/data/loader.hpp"
#include "tessera/nn/grad_compression.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/nn/optimizer.hpp"
#include "tessera/nn/pipeline.hpp"
#include "tessera/nn/precision.hpp"
#include "tessera/nn/weights.hpp"

namespace tessera::nn {

struct TrainOptions {
  ModelSpec model = model_preset("convnext-atto");
  core::Shape input{3, 256, 1024};  ///< C, H, W of one image
  int batch = 2;                    ///< global batch
  std::string shard = "W";          ///< spatial split for a mesh dim named "sp": W or H
  std::string checkpointing = "none";
  /// With checkpointing: whether a block's recompute reuses the halos its forward received
  /// (keep, the default) or exchanges them again (exchange); see nn::HaloRecompute.
  HaloRecompute halo_recompute = HaloRecompute::Keep;
  OptimizerOptions optimizer;
  int steps = 10;
  int warmup_steps = 0;
  double final_lr_fraction = 0.0;
  double clip_norm = 0.0;  ///< 0 = no clipping
  std::uint64_t seed = 0;
  std::size_t bucket_bytes = std::size_t(4) << 20;  ///< gradient all-reduce bucket size
  bool overlap = true;  ///< halo/interior overlap and bucket all-reduce during backward
  core::DType dtype = core::DType::F32;  ///< parameters, gradients, optimizer state (the master weights)
  /// What layers compute and store activations in: fp32 (the dtype itself), or bf16/fp16 with f32
  /// master weights (mixed precision; needs dtype f32).
  Precision precision = Precision::FP32;
  /// Loss scaling: auto is dynamic for fp16, off otherwise.
  LossScaleOptions loss_scale;
  /// What gradient buckets travel in for their all-reduce: fp32 (the gradients' own dtype), or
  /// bf16/fp16 (half the bytes; each bucket is rounded, reduced, and widened back).
  Precision grad_reduce = Precision::FP32;
  /// How gradient buckets travel: none (the dense all-reduce) or topk (each rank sends the
  /// topk_ratio largest entries of its bucket plus what earlier steps left unsent, the rest stays
  /// in a per-parameter residual; grad_compression.hpp). Needs grad_reduce fp32 and host memory;
  /// buckets that are not reduced (one rank, no mesh) are not compressed.
  GradCompression grad_compression = GradCompression::None;
  /// With topk: the fraction of each bucket's elements a rank sends per step, 0 < ratio <= 1.
  double topk_ratio = 0.01;
  /// The input pipeline: batches loaded ahead by loader threads (by default on a device only),
  /// the per-epoch shuffle (data/loader.hpp). Its seed is ignored: the run's seed draws the order.
  data::LoaderOptions loader;
  /// Micro-batches per step (gradient accumulation): the global batch is cut into M micro-batches
  /// of batch/M samples (M must divide the batch, and batch/M must still cover dp); micro-batch m
  /// of step s holds the samples the loader puts at positions s·batch + m·batch/M …, so the
  /// step's samples are those of an M = 1 run. Each micro-batch's forward and backward run in
  /// turn, their gradients accumulate into the buckets (f32 master gradients), the buckets'
  /// all-reduce overlaps the last micro-batch's backward, and the optimizer steps once. The loss
  /// is the mean over the whole batch; BatchNorm normalises each micro-batch by its own
  /// statistics (as PyTorch does under accumulation); the loss scale is the step's, one for all.
  int micro_batches = 1;
  /// With a mesh dim named "pp" (pipeline stages): the order each stage runs its micro-batches.
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// With "pp": where each stage after the first begins, as indices into units() (pp − 1
  /// strictly increasing). Empty: balanced by each unit's multiply-accumulates (its convolution
  /// and linear weights times their output pixels); the run layer passes the simulator's
  /// per-unit cost instead (sim::balanced_stage_starts).
  std::vector<int> stage_starts;
  /// Test hook: a deliberately wrong pipeline, to show the equivalence tests catch one. Never set
  /// outside tests.
  enum class Defect : std::uint8_t { None, DropMicroBatch, GradToWrongStage } defect = Defect::None;
};

/// The dtypes a Trainer trains in (TrainOptions::dtype), reference first: f32, and f64, to which
/// step() widens the loaders' float32 images (to tell rounding from bugs). The Trainer refuses any
/// other dtype at construction with this list; front ends offer exactly these.
std::vector<core::DType> training_dtypes();
/// training_dtypes() as their names joined by ", " ("f32, f64"), for messages.
std::string training_dtype_names();
/// The training dtype spelled `name` (as core::dtype_name spells it), or nullopt when the trainer
/// cannot train in it.
std::optional<core::DType> training_dtype(std::string_view name);

/// The layout of the input batch (N,C,H,W) on `mesh`: a dim named "dp" shards the batch, "sp"
/// shards W (or H with shard == "H"), "sp_h"/"sp_w" shard H/W (2-D tiles). Spatial shards are
/// aligned to the model's total stride. Throws InvalidArgument for other names or a batch or
/// image too small for the mesh.
core::Layout input_layout(const core::DeviceMesh& mesh, const std::string& shard, int batch,
                          const core::Shape& image, int total_stride);

/// One step's figures (identical on every rank except the memory and timing figures).
struct StepStats {
  std::int64_t step = 0;    ///< 0-based index of the step just taken
  double loss = 0;          ///< mean over the global batch (or pixels)
  double grad_norm = 0;     ///< global L2 norm before clipping
  double lr = 0;
  double step_time_s = 0;   ///< wall clock of this rank's step
  double data_time_s = 0;   ///< of which waiting for the batch (all of its load without prefetch)
  double load_time_s = 0;   ///< what loading this batch took the loader (its thread's time with prefetch)
  double loss_scale = 1;    ///< the loss scale this step ran with (1 without loss scaling)
  /// Bytes of the buffers this rank's gradient collectives carried this step: the buckets'
  /// all-reduce buffers (f32, or 16-bit with grad_reduce), or with top-k the all_gathers' receive
  /// buffers (group·k pairs). Buckets that are not reduced count nothing.
  std::int64_t grad_comm_bytes = 0;
  /// What the same buckets' dense all-reduce buffers hold (their elements times the dtype's size):
  /// grad_dense_bytes / grad_comm_bytes is the compression factor.
  std::int64_t grad_dense_bytes = 0;
  /// Seconds this rank waited for another pipeline stage (0 without pp): for its activations or
  /// gradients, and at the step's end in the sums of the loss and gradient norm over the stages
  /// (where a stage that finished early waits for the pipeline to drain). Its share of the
  /// pipeline's bubble.
  double pipeline_wait_s = 0;
  bool skipped = false;     ///< the gradients overflowed and dynamic loss scaling skipped the update
  std::int64_t skipped_steps = 0;  ///< steps skipped so far in this run (resumes included)
  core::MemStats memory;    ///< this rank's allocator: current and peak of this step
};

/// One rank's trainer. Construction is collective (every rank of the mesh builds one); so is
/// every step, save and load.
class Trainer {
 public:
  /// `mesh` may be null for a single rank. The dataset must match the model (channels, classes).
  Trainer(TrainOptions options, comm::MeshComm* mesh, compute::Backend& compute,
          core::AllocatorPtr allocator, std::shared_ptr<const data::Dataset> dataset);
  ~Trainer();

  /// One training step (collective). Under dynamic loss scaling (fp16), a step whose gradients
  /// overflow is skipped on every rank (StepStats::skipped; parameters and optimizer state are
  /// left as they were, the step index advances) and the scale backs off. Otherwise, when the
  /// step's loss or global gradient norm is not finite,
  /// throws NonFiniteError on every rank at the same step with the same message: the step, the
  /// first parameter whose gradient is not finite in the order backward produces gradients (from
  /// the loss back to the stem, i.e. the reverse of parameters()), and what to try. That step's
  /// optimizer update is not applied and next_step() does not advance: parameters, optimizer
  /// state and step are those before it (BatchNorm running statistics were updated by its
  /// forward). The decision costs no communication: the loss is all-reduced and the norm is
  /// computed from the reduced, replicated gradients.
  StepStats step();
  /// Index of the next step (0 for a fresh run).
  std::int64_t next_step() const noexcept { return step_; }

  /// Writes a checkpoint (rank 0 writes, atomically; all ranks wait for it). With pipeline stages
  /// each stage's first rank writes its stage's tensors: stage 0 to `path`, stage k to
  /// path.stage<k> (the later stages first).
  void save(const std::string& path);
  /// Restores a checkpoint written for the same model and input; resuming continues the run
  /// bit for bit. A checkpoint written by stages is read with all its stage files (refused when
  /// one is missing or of another step); each rank takes its own stage's tensors, so a run
  /// resumes on any pipeline cut, or none.
  void load(const std::string& path);
  /// Starts from pretrained weights: copies the safetensors file `path` into this rank's
  /// parameters and running statistics (load_weights: timm's or tessera's names, a classifier of
  /// another class count re-initialised). Every rank reads the file and gets the same report;
  /// call it before the first step. The optimizer state stays fresh.
  WeightReport init_from(const std::string& path);

  Sequential& model() noexcept { return *model_; }
  const std::vector<Parameter*>& parameters() const noexcept { return params_; }
  const core::Layout& input_layout() const noexcept { return in_layout_; }
  const TrainOptions& options() const noexcept { return opt_; }
  /// The modules forward and backward walk, in order (stages expanded into blocks).
  const std::vector<Module*>& units() const noexcept { return units_; }
  /// With top-k gradient compression: each parameter's residual (what its gradients left unsent,
  /// in the loss's units), in the order of parameters(); an undefined tensor for a parameter whose
  /// bucket is not compressed. Empty without compression.
  const std::vector<core::Tensor>& grad_residuals() const noexcept { return residuals_; }
  /// This rank's pipeline stage (its coordinate on the mesh dim "pp"; 0 without one) and the
  /// number of stages.
  int stage() const noexcept { return stage_; }
  int stages() const noexcept { return stages_; }
  /// The units (indices into units()) this rank's stage runs: [first, last).
  std::pair<int, int> stage_units() const noexcept { return {unit_begin_, unit_end_}; }
  /// Where each stage after the first begins in units() (empty with one stage).
  const std::vector<int>& stage_starts() const noexcept { return stage_starts_; }
  /// The context the modules run with (scope, conv options, ...); tracing hooks in here.
  Context& context() noexcept { return ctx_; }

 private:
  struct Bucket;
  void build_buckets();
  comm::WorkPtr post_bucket(Bucket& b);
  void finish_bucket(Bucket& b);
  core::Tensor to_precision(core::Tensor images);
  /// Elements of this rank's top-k residuals (the compressed buckets'), 0 without top-k.
  std::int64_t residual_elems() const;
  /// Per world rank and parameter, named views ("grad_residual.rank<q>.<name>") into `all`, which
  /// holds every rank's residuals one after another (how checkpoints carry them).
  std::vector<std::pair<std::string, core::Tensor>> residual_views(core::Tensor& all) const;
  double loss_and_grad(const core::Tensor& logits, const core::Tensor& labels, core::Tensor& dlogits);
  // Pipeline stages and micro-batches (trainer_pipeline.cpp).
  struct Micro;
  struct Pending;
  void setup_model(const core::DeviceMesh& mesh);
  std::vector<int> default_stage_starts(const core::DeviceMesh& mesh) const;
  void forward_micro(int m, StepStats& st);
  void backward_micro(int m, StepStats& st, std::map<Parameter*, Bucket*>& owner);
  core::Tensor receive(int from_stage, const core::Layout& layout, StepStats& st);
  void send(int to_stage, core::Tensor t);
  void wait_sends();
  /// The labels of the model's outputs: `labels` itself, or for a model that fuses several
  /// consecutive images into one output (camera views), each output's first image's label,
  /// gathered over the dims that shard the images but not the outputs.
  core::Tensor scene_labels(const core::Tensor& labels);
  /// Sums `v` over the pipeline's stages (every rank gets it); `v` itself without stages.
  double sum_over_stages(double v);
  /// The checkpoint meta of the data's position: seed, shuffle, data_size, data_position,
  /// data_epoch, data_next_index (the size and what derives from it only with a dataset).
  void add_data_meta(std::map<std::string, std::string>& meta) const;
  /// Refuses (InvalidArgument) a checkpoint whose seed, shuffle or data_size differ from this
  /// run's: the sample order would differ. A checkpoint without these keys passes.
  void check_data_meta(const std::string& path,
                       const std::map<std::string, std::string>& meta) const;
  /// The checkpoint file of stage k: `path` for stage 0, path + ".stage<k>" for the others.
  static std::string stage_path(const std::string& path, int k);

  TrainOptions opt_;
  comm::MeshComm* mesh_;
  compute::Backend& compute_;
  core::AllocatorPtr alloc_;
  std::shared_ptr<const data::Dataset> data_;
  std::unique_ptr<data::Loader> loader_;
  std::unique_ptr<Sequential> model_;
  core::Layout in_layout_, out_layout_;
  std::vector<Module*> units_;
  std::vector<Parameter*> params_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<core::Tensor> residuals_;  ///< per parameter, views into the buckets' residuals
  std::unique_ptr<Optimizer> optim_;
  std::unique_ptr<LossScaler> scaler_;
  Context ctx_;
  Scope scope_;
  std::int64_t step_ = 0;
  int stage_ = 0, stages_ = 1, pp_dim_ = -1, unit_begin_ = 0, unit_end_ = 0;
  std::vector<int> stage_starts_;
  std::vector<Micro> micro_;
  std::vector<Pending> sends_;
  double stage_sum_wait_s_ = 0;  ///< this step's time in sum_over_stages (pipeline drain)
};

}  // namespace tessera::nn
