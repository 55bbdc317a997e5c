// Trainer: forward over the model's units, loss, backward with gradient buckets reduced as soon
// as their layers are done, clipping, optimizer step.
#include "tessera/nn/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/checkpoint.hpp"
#include "trainer_impl.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

std::vector<core::DType> training_dtypes() { return {core::DType::F32, core::DType::F64}; }

std::string training_dtype_names() {
  std::string list;
  for (core::DType t : training_dtypes()) list += (list.empty() ? "" : ", ") + std::string(core::dtype_name(t));
  return list;
}

std::optional<core::DType> training_dtype(std::string_view name) {
  for (core::DType t : training_dtypes())
    if (core::dtype_name(t) == name) return t;
  return std::nullopt;
}

core::Layout input_layout(const core::DeviceMesh& mesh, const std::string& shard, int batch,
                          const core::Shape& image, int total_stride) {
  TESSERA_CHECK(image.size() == 3, "input ", core::shape_str(image), ": expected C x H x W");
  TESSERA_CHECK(shard == "W" || shard == "H" || shard == "HW", "--shard '", shard, "': expected W, H or HW");
  std::vector<core::Placement> pl;
  int spatial = 0;
  for (int d = 0; d < mesh.ndim(); ++d) {
    const std::string& n = mesh.dim_name(d);
    if (n == "dp") {
      pl.push_back(core::Shard(0));
      TESSERA_CHECK(batch >= mesh.dim_size(d), "batch ", batch, " over dp=", mesh.dim_size(d),
                    " leaves ranks without samples; use a batch of at least ", mesh.dim_size(d));
    } else if (n == "pp") {
      pl.push_back(core::Placement::replicate());  // every stage sees the whole batch layout
    } else if (n == "sp") {
      TESSERA_CHECK(shard != "HW", "--shard HW needs two spatial mesh dims: use --mesh sp_h=A,sp_w=B");
      pl.push_back(core::Shard(shard == "W" ? 3 : 2));
      ++spatial;
    } else if (n == "sp_h") {
      pl.push_back(core::Shard(2));
      ++spatial;
    } else if (n == "sp_w") {
      pl.push_back(core::Shard(3));
      ++spatial;
    } else {
      throw InvalidArgument(
          "mesh dimension '" + n +
          "': tessera names mesh dims dp (data parallel), pp "
          "(pipeline stages), sp (spatial, along --shard) or sp_h/sp_w (2-D tiles)");
    }
  }
  const core::Shape global{batch, image[0], image[1], image[2]};
  for (int d : {1, 2})
    TESSERA_CHECK(image[d] % total_stride == 0, "input ", core::shape_str(image), ": ", d == 1 ? "height " : "width ",
                  image[d], " is not a multiple of the model's total stride ", total_stride);
  const core::Layout l(mesh, global, pl, {1, 1, total_stride, total_stride});
  for (int d = 0; d < mesh.ndim(); ++d) {
    if (!pl[d].is_shard(2) && !pl[d].is_shard(3)) continue;
    const int td = pl[d].dim();
    const std::int64_t units = global[td] / total_stride;
    TESSERA_CHECK(units >= mesh.dim_size(d), "input ", td == 3 ? "width " : "height ", global[td], " has ",
                  units, " blocks of ", total_stride, " pixels (the model's total stride) but mesh dimension '",
                  mesh.dim_name(d), "' has ", mesh.dim_size(d), " ranks; use fewer ranks or a larger input");
  }
  (void)spatial;
  return l;
}

Trainer::Trainer(TrainOptions options, comm::MeshComm* mesh, compute::Backend& compute,
                 core::AllocatorPtr allocator, std::shared_ptr<const data::Dataset> dataset)
    : opt_(std::move(options)), mesh_(mesh), compute_(compute), alloc_(std::move(allocator)),
      data_(std::move(dataset)) {
  opt_.model.validate();
  TESSERA_CHECK(opt_.batch > 0 && opt_.steps >= 0, "batch ", opt_.batch, " and steps ", opt_.steps,
                " must be positive");
  TESSERA_CHECK(data_ != nullptr, "the trainer needs a dataset");
  if (!training_dtype(core::dtype_name(opt_.dtype)))
    throw Unsupported(detail::cat("trainer: TrainOptions::dtype ", core::dtype_name(opt_.dtype),
                                  " cannot be trained in yet; use one of ", training_dtype_names()));
  if (opt_.precision != Precision::FP32 || opt_.grad_reduce != Precision::FP32)
    TESSERA_CHECK(opt_.dtype == core::DType::F32, "mixed precision (precision ", precision_name(opt_.precision),
                  ", gradient reduction in ", precision_name(opt_.grad_reduce), ") keeps f32 master weights: use "
                  "dtype f32, not ", core::dtype_name(opt_.dtype), " (f64 runs are the exact reference of f32 runs)");
  if (opt_.grad_compression == GradCompression::TopK) {
    check_topk_ratio(opt_.topk_ratio, "trainer: TrainOptions::topk_ratio (--topk-ratio)");
    TESSERA_CHECK(opt_.grad_reduce == Precision::FP32, "trainer: top-k gradient compression sends f32 values and "
                  "cannot also round the buckets to ", precision_name(opt_.grad_reduce),
                  "; use --grad-compression topk or --grad-reduce-dtype ", precision_name(opt_.grad_reduce), ", not both");
    if (alloc_->space() != core::MemorySpace::Host)
      throw Unsupported("trainer: top-k gradient compression selects on the host and the gradients are in device "
                        "memory; train on the cpu backend or without --grad-compression");
  }
  scaler_ = std::make_unique<LossScaler>(opt_.loss_scale, opt_.precision);
  const core::Shape img = data_->image_shape();
  TESSERA_CHECK(img == opt_.input, "the dataset's images are ", core::shape_str(img), " but the run's input is ",
                core::shape_str(opt_.input));
  TESSERA_CHECK(img[0] == opt_.model.in_channels, "model '", opt_.model.name, "' takes ", opt_.model.in_channels,
                " input channels but the images have ", img[0]);
  TESSERA_CHECK(data_->num_classes() == opt_.model.num_classes, "model '", opt_.model.name, "' predicts ",
                opt_.model.num_classes, " classes but the dataset has ", data_->num_classes());
  TESSERA_CHECK((data_->task() == data::Task::Classify) == (opt_.model.task == Task::Classify),
                "the dataset's task (classify/segment) differs from the model's");

  const core::DeviceMesh m = mesh_ ? mesh_->mesh() : core::DeviceMesh({1}, {"sp"});
  const int mb = opt_.micro_batches;
  TESSERA_CHECK(mb >= 1, "micro-batches ", mb, ": use 1 (no gradient accumulation) or more");
  TESSERA_CHECK(
      opt_.batch % mb == 0, "batch ", opt_.batch, " is not a multiple of ", mb,
      " micro-batches: each micro-batch takes batch/M samples; use a batch that M divides");
  const int dp = m.find_dim("dp") < 0 ? 1 : m.dim_size(m.find_dim("dp"));
  TESSERA_CHECK(opt_.batch / mb >= dp, "batch ", opt_.batch, " in ", mb, " micro-batches of ",
                opt_.batch / mb, " leaves dp=", dp, " ranks without samples; use at most ",
                opt_.batch / dp,
                " micro-batches or a "
                "larger batch");
  in_layout_ =
      nn::input_layout(m, opt_.shard, opt_.batch / mb, opt_.input, opt_.model.total_stride());
  setup_model(m);
  if (stage_ == 0 ||
      stage_ == stages_ - 1) {  // the first stage needs the images, the last the labels
    data::LoaderOptions lo = opt_.loader;
    lo.seed = opt_.seed;
    const bool host = alloc_->space() == core::MemorySpace::Host;
    loader_ = std::make_unique<data::Loader>(data_, in_layout_, mesh_ ? mesh_->rank() : 0,
                                             host ? alloc_ : nullptr, host ? nullptr : alloc_, lo);
  }
  build_buckets();
  optim_ = make_optimizer(opt_.optimizer, params_, alloc_);

  ctx_.mesh = mesh_;
  ctx_.compute = &compute_;
  ctx_.allocator = alloc_;
  ctx_.training = true;
  ctx_.seed = opt_.seed;
  ctx_.conv.overlap = opt_.overlap;
  ctx_.halo_recompute = opt_.halo_recompute;
  ctx_.scope = &scope_;
}

Trainer::~Trainer() = default;

void Trainer::build_buckets() {
  // Parameters finish their gradients in reverse order; fill buckets that way, one bucket list per
  // set of reduction dims, and make each gradient a view into its bucket (no copies to reduce).
  std::map<std::vector<int>, Bucket*> open;
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
    Parameter* p = *it;
    Bucket*& b = open[p->grad_reduce_mesh_dims];
    const std::size_t bytes = p->grad.nbytes();
    const std::size_t esize = core::dtype_size(opt_.dtype);
    if (b == nullptr || (!b->params.empty() && std::size_t(b->elems) * esize + bytes > opt_.bucket_bytes)) {
      buckets_.push_back(std::make_unique<Bucket>());
      b = buckets_.back().get();
      b->dims = p->grad_reduce_mesh_dims;
    }
    b->params.push_back(p);
    b->elems += p->grad.numel();
  }
  for (auto& b : buckets_) {
    b->flat = Tensor::zeros({b->elems}, opt_.dtype, MemCategory::Gradient, alloc_);
    std::int64_t off = 0;
    for (Parameter* p : b->params) {
      const core::Shape shape = p->grad.shape();
      const std::int64_t n = p->grad.numel();
      p->grad = b->flat.narrow(0, off, n).reshape(shape);
      off += n;
    }
    b->reduced = mesh_ && !b->dims.empty() && mesh_->group(b->dims).size() > 1;
    if (b->reduced && opt_.grad_compression == GradCompression::TopK)
      b->topk = std::make_unique<TopKCompressor>(compute_, b->elems, opt_.dtype, opt_.topk_ratio,
                                                 mesh_->group(b->dims).size(), alloc_);
  }
  if (opt_.grad_compression != GradCompression::TopK) return;
  // Each parameter's residual is a view into its bucket's, at the offset of its gradient.
  std::map<Parameter*, Tensor> views;
  for (auto& b : buckets_) {
    if (!b->topk) continue;
    std::int64_t off = 0;
    for (Parameter* p : b->params) {
      views[p] = b->topk->residual().narrow(0, off, p->grad.numel()).reshape(p->grad.shape());
      off += p->grad.numel();
    }
  }
  for (Parameter* p : params_) residuals_.push_back(views.count(p) ? views[p] : Tensor());
}

comm::WorkPtr Trainer::post_bucket(Bucket& b) {
  // Top-k: this rank's largest entries (plus what earlier steps left unsent) are all-gathered and
  // summed back into the bucket by finish_bucket; the rest waits in the residual.
  if (b.topk) return b.topk->post(mesh_->group(b.dims), b.flat, scaler_->scale());
  if (opt_.grad_reduce == Precision::FP32) return mesh_->all_reduce_async(b.flat, b.dims);
  // Compressed reduction: the bucket is rounded to 16 bits (half the bytes on the wire), reduced
  // (the backends sum 16-bit buffers in f32), and widened back by finish_bucket.
  b.wire = Tensor::empty({b.elems}, precision_dtype(opt_.grad_reduce, opt_.dtype), MemCategory::Gradient, alloc_);
  compute::copy(compute_, b.flat, b.wire);
  return mesh_->all_reduce_async(b.wire, b.dims);
}

void Trainer::finish_bucket(Bucket& b) {
  if (b.topk) return b.topk->finish(b.flat);
  if (!b.wire.defined()) return;
  compute::copy(compute_, b.wire, b.flat);
  b.wire = Tensor();
}

Tensor Trainer::to_precision(Tensor h) {
  const core::DType want = precision_dtype(opt_.precision, opt_.dtype);
  if (h.dtype() == want) return h;
  // The loaders produce float32: a float64 run (used to tell rounding from bugs) widens it, a
  // mixed-precision run rounds it to 16 bits.
  TESSERA_CHECK(h.dtype() == core::DType::F32, "training in ", core::dtype_name(want), " from ",
                core::dtype_name(h.dtype()), " images is not supported: the data loaders produce float32");
  Tensor out = Tensor::empty(h.shape(), want, MemCategory::Activation, alloc_);
  if (want == core::DType::F64 && h.is_host()) {
    if (h.is_meta()) return out;
    const Tensor src = h.is_contiguous() ? h : h.clone();
    const float* a = src.data<float>();
    double* b = out.data<double>();
    for (std::int64_t i = 0; i < src.numel(); ++i) b[i] = a[i];
  } else {
    compute::copy(compute_, h, out);
  }
  return out;
}

double Trainer::loss_and_grad(const Tensor& logits, const Tensor& labels, Tensor& dlogits) {
  const auto& g = out_layout_.global_shape();
  // The mean over the step's whole batch: each of its M micro-batches counts 1/M.
  double count = double(g[0]) * double(opt_.micro_batches);
  if (opt_.model.task == Task::Segment) count *= double(g[2]) * double(g[3]);
  Tensor loss = Tensor::empty({1}, core::DType::F64, MemCategory::Workspace, alloc_);
  dlogits = Tensor::empty(logits.shape(), logits.dtype(), MemCategory::Activation, alloc_);
  {
    ScopeGuard scope(ctx_, "loss");
    // The loss gradient carries the loss scale (1 without scaling); step() divides it out of the
    // reduced gradients before clipping and the optimizer.
    compute::softmax_cross_entropy(compute_, logits, labels, scaler_->scale() / count, loss, dlogits);
  }
  if (mesh_) mesh_->all_reduce(loss, sharded_mesh_dims(out_layout_));
  return loss.is_meta() ? 0.0 : loss.to_host().data<double>()[0] / count;
}

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "nan";  // not "-nan": the sign of a NaN says nothing
  std::ostringstream os;
  os.precision(4);
  os << v;
  return os.str();
}

/// The error of a step whose loss or gradient norm is not finite. Names the first parameter whose
/// gradient is not finite in the order backward produces gradients (the reverse of the model's
/// parameter order: head first, stem last), found from each gradient's sum of squares. Built only
/// from replicated values, so every rank words it identically.
NonFiniteError non_finite_error(compute::Backend& compute, const std::vector<Parameter*>& params,
                                const TrainOptions& o, const StepStats& st) {
  std::string culprit, what;
  for (auto it = params.rbegin(); it != params.rend() && culprit.empty(); ++it) {
    const Tensor& grad = (*it)->grad;
    Tensor s = Tensor::empty({1}, core::DType::F64, MemCategory::Workspace, grad.allocator());
    compute::sum_squares(compute, grad, s);
    const double ss = s.to_host().data<double>()[0];
    if (std::isfinite(ss)) continue;
    culprit = (*it)->name;
    what = detail::cat("the gradient of '", culprit, "' is ", std::isnan(ss) ? "NaN" : "infinite",
                       " (its sum of squares is ", number(ss), "), the first non-finite gradient in the order backward "
                       "produces them (from the loss back to the stem)");
  }
  if (culprit.empty())
    what = std::isfinite(st.loss) ? "every gradient is finite but their global norm overflows"
                                  : "the loss is not finite although every gradient is";
  std::string fix = detail::cat("lower the learning rate (--lr, now ", number(o.optimizer.lr), ")");
  if (o.clip_norm > 0)
    fix += detail::cat(" or clip harder (--clip, now ", number(o.clip_norm), ")");
  else
    fix += " or enable gradient clipping (--clip 1; now off)";
  if (o.warmup_steps == 0) fix += ", or warm up (--warmup 5)";
  if (o.precision == Precision::FP16) fix += ", or train in bf16 (--precision bf16: f32's exponent range)";
  return NonFiniteError(
      detail::cat("training diverged at step ", st.step + 1, "/", o.steps, " (0-based step ", st.step, "): ", what,
                  "; loss ", number(st.loss), ", gradient norm ", number(st.grad_norm), ", lr ", number(st.lr),
                  ". Every rank stopped at this step and its update was not applied. To fix: ", fix, "."),
      st.step, culprit);
}

}  // namespace

StepStats Trainer::step() {
  const auto t0 = std::chrono::steady_clock::now();
  alloc_->reset_peaks();
  ctx_.step = step_;
  StepStats st;
  st.step = step_;
  sends_.clear();  // a step that threw may have left some
  stage_sum_wait_s_ = 0;
  for (Micro& mb : micro_) mb = Micro();
  for (auto& b : buckets_) {
    b->flat.zero();
    if (b->topk) b->topk->discard();  // a step that threw may have left one posted
  }
  // Which buckets each unit's parameters live in, to post a bucket's all-reduce once complete.
  std::map<Parameter*, Bucket*> owner;
  for (auto& b : buckets_) {
    b->pending = static_cast<int>(b->params.size());
    for (Parameter* p : b->params) owner[p] = b.get();
  }
  // Each micro-batch's forward and backward in the schedule's order; with one stage F0 B0 F1 B1 …
  // Gradients accumulate into the buckets; the last backward posts them.
  for (const PipelineAction& a :
       pipeline_actions(opt_.schedule, stages_, stage_, opt_.micro_batches))
    a.forward ? forward_micro(a.micro, st) : backward_micro(a.micro, st, owner);
  if (ctx_.scope) ctx_.scope->micro_batch = -1;  // what follows is the whole step's
  wait_sends();
  st.loss = sum_over_stages(st.loss);  // the last stage's, on every rank
  if (mesh_) {
    ScopeGuard scope(ctx_, "grad_bucket");
    for (auto& b : buckets_) {
      if (!opt_.overlap) b->work = post_bucket(*b);
      if (b->work) b->work->wait();
      b->work.reset();
      finish_bucket(*b);
      if (!b->reduced) continue;
      const auto dense = static_cast<std::int64_t>(b->flat.nbytes());
      st.grad_dense_bytes += dense;
      st.grad_comm_bytes += b->topk ? static_cast<std::int64_t>(b->topk->wire_bytes())
                                    : (opt_.grad_reduce == Precision::FP32 ? dense : b->elems * 2);
    }
  }
  {
    ScopeGuard scope(ctx_, "optimizer");
    st.loss_scale = scaler_->scale();
    if (scaler_->enabled())  // the gradients of the scaled loss, back to those of the loss
      for (auto& b : buckets_) compute::scale(compute_, 1.0 / scaler_->scale(), b->flat);
    // With stages, the norm is over every stage's gradients: each stage's sum of squares, summed.
    st.grad_norm = clip_grad_norm(compute_, params_, opt_.clip_norm,
                                  [this](double s) { return sum_over_stages(s); });
    st.lr = warmup_cosine_lr(step_, opt_.optimizer.lr, opt_.warmup_steps, opt_.steps, opt_.final_lr_fraction);
    // The loss is all-reduced and the norm is computed from the reduced, replicated gradients, so
    // every rank holds the same bits of both and takes this branch at the same step: no extra
    // communication. The culprit is looked for only here, after the run has already failed.
    // Dynamic loss scaling skips a step whose gradients overflowed (the loss itself is finite) and
    // backs off, on every rank alike for the same reason; a finite loss with gradients that
    // overflow at the smallest scale, or any non-finite loss, stops the run.
    const bool finite = std::isfinite(st.grad_norm);
    // Top-k's residuals take in this step's unsent entries only when its update is applied: a
    // skipped or failed step leaves them as they were (no non-finite value is kept for later).
    auto settle_residuals = [&](bool applied) {
      for (auto& b : buckets_)
        if (b->topk) applied ? b->topk->commit() : b->topk->discard();
    };
    if (!std::isfinite(st.loss) || (!finite && (!scaler_->dynamic() || scaler_->at_floor()))) {
      settle_residuals(false);
      throw non_finite_error(compute_, params_, opt_, st);
    }
    st.skipped = !scaler_->update(finite);
    if (!st.skipped) optim_->step(compute_, st.lr);
    settle_residuals(!st.skipped);
    st.skipped_steps = scaler_->skipped();
  }
  ++step_;
  st.pipeline_wait_s += stage_sum_wait_s_;
  st.step_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.memory = alloc_->stats();
  return st;
}

namespace {
std::string shape_key(const core::Shape& s) { return core::shape_str(s); }
}  // namespace

std::int64_t Trainer::residual_elems() const {
  std::int64_t n = 0;
  for (const auto& b : buckets_)
    if (b->topk) n += b->elems;
  return n;
}

std::vector<std::pair<std::string, Tensor>> Trainer::residual_views(Tensor& all) const {
  // `all` holds every world rank's residuals, rank by rank, each in bucket order.
  std::vector<std::pair<std::string, Tensor>> out;
  const std::int64_t per_rank = residual_elems();
  for (std::int64_t q = 0; q * per_rank < all.numel(); ++q) {
    std::int64_t off = q * per_rank;
    for (const auto& b : buckets_) {
      if (!b->topk) continue;
      for (Parameter* p : b->params) {
        out.emplace_back(detail::cat("grad_residual.rank", q, ".", p->name),
                         all.narrow(0, off, p->grad.numel()).reshape(p->grad.shape()));
        off += p->grad.numel();
      }
    }
  }
  return out;
}

void Trainer::add_data_meta(std::map<std::string, std::string>& meta) const {
  // The sample order is drawn from (seed, shuffle, data size) alone and step s reads positions
  // s·batch ...: these keys say where the data stands, and let load refuse a different order.
  meta["seed"] = std::to_string(opt_.seed);
  meta["shuffle"] = opt_.loader.shuffle ? "true" : "false";
  const std::int64_t position = step_ * opt_.batch;
  meta["data_position"] = std::to_string(position);
  if (!data_ || data_->size() < 1) return;
  const std::int64_t size = data_->size();
  meta["data_size"] = std::to_string(size);
  meta["data_epoch"] = std::to_string(position / size);
  meta["data_next_index"] = std::to_string(position % size);
}

void Trainer::check_data_meta(const std::string& path,
                              const std::map<std::string, std::string>& meta) const {
  // Checkpoints written before these keys existed load as before.
  const auto differs = [&](const char* key, const std::string& mine) {
    const auto it = meta.find(key);
    return it != meta.end() && it->second != mine ? it->second : std::string();
  };
  const std::string why =
      "; resuming would visit the samples in another order than the run that wrote it";
  const std::string seed = differs("seed", std::to_string(opt_.seed));
  TESSERA_CHECK(seed.empty(), "checkpoint '", path, "' was written with seed ", seed,
                " but this run uses seed ", opt_.seed, why, ": resume with --seed ", seed);
  const std::string shuffle = differs("shuffle", opt_.loader.shuffle ? "true" : "false");
  TESSERA_CHECK(shuffle.empty(), "checkpoint '", path, "' was written with shuffle ", shuffle,
                " but this run uses shuffle ", opt_.loader.shuffle ? "true" : "false", why,
                ": resume ", shuffle == "true" ? "without --no-shuffle" : "with --no-shuffle");
  const std::string size =
      data_ ? differs("data_size", std::to_string(data_->size())) : std::string();
  TESSERA_CHECK(size.empty(), "checkpoint '", path, "' was written over a dataset of ", size,
                " samples but this run's has ", data_ ? data_->size() : 0, why,
                ": resume with the same --data");
}

void Trainer::save(const std::string& path) {
  // Top-k residuals differ from rank to rank: every rank's travel to rank 0 (collective, before
  // rank 0 writes) and are saved under their rank.
  const std::int64_t res_n = residual_elems();
  Tensor all_res;
  std::vector<std::pair<std::string, Tensor>> res_views;
  if (res_n > 0) {
    Tensor mine = Tensor::empty({res_n}, opt_.dtype, MemCategory::Workspace, alloc_);
    std::int64_t off = 0;
    for (auto& b : buckets_)
      if (b->topk) mine.narrow(0, off, b->elems).copy_from(b->topk->residual()), off += b->elems;
    all_res = Tensor::empty({res_n * mesh_->world().size()}, opt_.dtype, MemCategory::Workspace, alloc_);
    mesh_->world().all_gather(comm::buffer_of(mine), comm::buffer_of(all_res))->wait();
    res_views = residual_views(all_res);
  }
  // With pipeline stages each stage's first rank (every other coordinate 0) writes its own
  // tensors: stage 0 to `path`, stage k to path.stage<k>; the others first, so a `path` on disk
  // always comes with stage files at least as new (load checks that they agree on the step).
  bool lead = !mesh_ || mesh_->rank() == 0;
  if (stages_ > 1) {
    lead = true;
    for (int d = 0; d < mesh_->mesh().ndim(); ++d)
      if (d != pp_dim_ && mesh_->coords()[std::size_t(d)] != 0) lead = false;
  }
  for (int phase : {1, 0}) {
    if (stages_ > 1) mesh_->world().barrier();
    if (!lead || (phase == 0) != (stage_ == 0)) continue;
    std::map<std::string, std::string> meta;
    meta["format"] = "tessera-checkpoint-1";
    meta["model"] = opt_.model.to_json();
    meta["input"] = shape_key(opt_.input);
    meta["batch"] = std::to_string(opt_.batch);
    meta["optimizer"] = opt_.optimizer.kind;
    meta["step"] = std::to_string(step_);
    add_data_meta(meta);
    if (opt_.grad_compression != GradCompression::None) {  // its residuals are among the tensors
      meta["grad_compression"] = std::string(grad_compression_name(opt_.grad_compression));
      meta["grad_compression_ranks"] = std::to_string(mesh_ ? mesh_->world().size() : 1);
    }
    if (scaler_->enabled()) {  // resuming continues the loss scale's schedule bit for bit
      std::ostringstream ls;
      ls.precision(17);
      ls << scaler_->scale();
      meta["loss_scale"] = ls.str();
      meta["loss_scale_good_steps"] = std::to_string(scaler_->good_steps());
      meta["loss_scale_skipped"] = std::to_string(scaler_->skipped());
    }
    if (stages_ > 1) {
      meta["pipeline_stages"] = std::to_string(stages_);
      meta["pipeline_stage"] = std::to_string(stage_);
    }
    std::vector<std::pair<std::string, const Tensor*>> ts;
    for (Parameter* p : params_) ts.emplace_back(p->name, &p->value);
    std::vector<std::pair<std::string, Tensor*>> bufs;
    for (int i = unit_begin_; i < unit_end_; ++i) units_[std::size_t(i)]->buffers(bufs);
    for (auto& [n, t] : bufs) ts.emplace_back(n, t);
    auto state = optim_->state();
    for (auto& [n, t] : state) ts.emplace_back("optimizer." + n, &t);
    for (auto& [n, t] : res_views) ts.emplace_back(n, &t);  // top-k: resuming continues bit for bit
    save_checkpoint(stage_path(path, stage_), meta, ts);
  }
  if (mesh_) mesh_->world().barrier();
}

void Trainer::load(const std::string& path) {
  const CheckpointData data = load_checkpoint_stages(path);
  auto get = [&](const std::string& k) {
    auto it = data.meta.find(k);
    TESSERA_CHECK(it != data.meta.end(), "checkpoint '", path, "' lacks the '", k, "' entry; it was not written by tessera's trainer");
    return it->second;
  };
  TESSERA_CHECK(get("model") == opt_.model.to_json(), "checkpoint '", path, "' was written for another model:\n",
                get("model"), "\nthis run uses:\n", opt_.model.to_json());
  TESSERA_CHECK(get("input") == shape_key(opt_.input) && get("batch") == std::to_string(opt_.batch), "checkpoint '",
                path, "' was written for input ", get("input"), " batch ", get("batch"), "; this run uses ",
                shape_key(opt_.input), " batch ", opt_.batch);
  TESSERA_CHECK(get("optimizer") == opt_.optimizer.kind, "checkpoint '", path, "' holds ", get("optimizer"),
                " state; this run uses ", opt_.optimizer.kind);
  check_data_meta(path, data.meta);
  const auto gc = data.meta.find("grad_compression");
  const std::string saved_gc = gc == data.meta.end() ? "none" : gc->second;
  const std::string_view run_gc = grad_compression_name(opt_.grad_compression);
  TESSERA_CHECK(saved_gc == run_gc, "checkpoint '", path, "' was written with gradient compression ", saved_gc,
                " but this run uses ", run_gc, ": the top-k residuals (what the gradients have not sent yet) would be ",
                saved_gc == "none" ? "missing" : "dropped", "; resume with --grad-compression ", saved_gc);
  std::vector<std::pair<std::string, Tensor*>> targets;
  for (Parameter* p : params_) targets.emplace_back(p->name, &p->value);
  for (int i = unit_begin_; i < unit_end_; ++i) units_[std::size_t(i)]->buffers(targets);
  auto state = optim_->state();
  for (auto& [n, t] : state) targets.emplace_back("optimizer." + n, &t);
  // Top-k: every rank reads every rank's residuals (the checkpoint must hold exactly its targets)
  // and keeps its own.
  const std::int64_t res_n = residual_elems();
  Tensor all_res;
  std::vector<std::pair<std::string, Tensor>> res_views;
  if (res_n > 0) {
    const int ranks = mesh_->world().size();
    TESSERA_CHECK(get("grad_compression_ranks") == std::to_string(ranks), "checkpoint '", path, "' holds the top-k "
                  "residuals of ", get("grad_compression_ranks"), " ranks but this run has ", ranks, "; a top-k run "
                  "resumes on as many ranks as it was saved from");
    all_res = Tensor::empty({res_n * ranks}, opt_.dtype, MemCategory::Workspace, alloc_);
    res_views = residual_views(all_res);
    for (auto& [n, t] : res_views) targets.emplace_back(n, &t);
  }
  if (stages_ == 1) {
    restore_tensors(data, targets);
  } else {  // a stage restores its own tensors, whatever pipeline the checkpoint came from
    CheckpointData own;
    own.meta = data.meta;
    std::set<std::string> names;
    for (auto& [n, t] : targets) names.insert(n);
    for (const auto& [n, t] : data.tensors)
      if (names.count(n)) own.tensors.emplace_back(n, t);
    restore_tensors(own, targets);
  }
  if (res_n > 0) {
    std::int64_t off = res_n * mesh_->world().rank();
    for (auto& b : buckets_)
      if (b->topk) b->topk->residual().copy_from(all_res.narrow(0, off, b->elems)), off += b->elems;
  }
  step_ = std::stoll(get("step"));
  if (scaler_->enabled() && data.meta.count("loss_scale"))
    scaler_->restore(std::stod(get("loss_scale")), std::stoi(get("loss_scale_good_steps")),
                     std::stoll(get("loss_scale_skipped")));
  // The optimizer counts the updates it applied: steps a dynamic loss scale skipped are not among them.
  optim_->set_steps(step_ - scaler_->skipped());
}

}  // namespace tessera::nn
