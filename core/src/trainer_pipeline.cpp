// The Trainer's pipeline stages and micro-batches: which units a stage runs, its micro-batches'
// forwards and backwards, and the activations and gradients that travel between stages.
#include <algorithm>
#include <chrono>
#include <set>

#include "tessera/core/error.hpp"
#include "trainer_impl.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

namespace {

void collect_units(Module& m, std::vector<Module*>& out, int depth) {
  std::vector<Module*> kids;
  m.children(kids);
  if (m.kind() == "sequential" && depth < 2) {
    for (Module* k : kids) collect_units(*k, out, depth + 1);
  } else {
    out.push_back(&m);
  }
}

/// Multiply-accumulates of a set-up module per step: each leaf's weights times the pixels (or
/// samples) of its output — convolutions and linear layers dominate; the rest counts little.
double unit_macs(Module& m) {
  std::vector<Module*> kids;
  m.children(kids);
  if (!kids.empty()) {
    double sum = 0;
    for (Module* k : kids) sum += unit_macs(*k);
    return sum;
  }
  std::vector<Parameter*> ps;
  m.parameters(ps);
  const core::Shape& out = m.output_layout().global_shape();
  double positions = out.empty() ? 1.0 : double(out[0]);
  if (out.size() == 4) positions *= double(out[2]) * double(out[3]);
  double w = 0;
  for (Parameter* p : ps) w += double(p->value.numel());
  return w * positions;
}

/// Whether a stage may begin at unit i: the tensor crossing the cut is a 4-d activation (not the
/// pooled features of a classification head, which stay in f32 under mixed precision).
bool cuttable(const std::vector<Module*>& units, int i) {
  return units[std::size_t(i) - 1]->output_layout().global_shape().size() == 4;
}

}  // namespace

std::vector<int> Trainer::default_stage_starts(const core::DeviceMesh& mesh) const {
  (void)mesh;
  // The same model set up on shapes only, for its units' costs.
  auto meta = build_model(opt_.model, opt_.checkpointing);
  SetupContext sctx;
  sctx.allocator = std::make_shared<core::Allocator>("stage cut", /*meta=*/true);
  sctx.seed = opt_.seed;
  sctx.dtype = opt_.dtype;
  meta->setup(in_layout_, sctx);
  std::vector<Module*> units;
  collect_units(*meta, units, 0);
  // Units that cannot begin a stage join the one before them.
  std::vector<double> costs;
  std::vector<int> first;  // the unit each cost group starts at
  for (int i = 0; i < int(units.size()); ++i) {
    const double c = unit_macs(*units[std::size_t(i)]);
    if (i == 0 || cuttable(units, i)) {
      costs.push_back(c);
      first.push_back(i);
    } else {
      costs.back() += c;
    }
  }
  std::vector<int> starts = balanced_stage_starts(costs, stages_);
  for (int& s : starts) s = first[std::size_t(s)];
  return starts;
}

void Trainer::setup_model(const core::DeviceMesh& m) {
  model_ = build_model(opt_.model, opt_.checkpointing);
  collect_units(*model_, units_, 0);
  pp_dim_ = m.find_dim("pp");
  stages_ = pp_dim_ < 0 ? 1 : m.dim_size(pp_dim_);
  stage_ = pp_dim_ < 0 || !mesh_ ? 0 : mesh_->coords()[std::size_t(pp_dim_)];
  const int n = static_cast<int>(units_.size());
  if (stages_ > 1) {
    if (opt_.grad_compression != GradCompression::None)
      throw Unsupported(
          "trainer: top-k gradient compression with pipeline stages (pp) is not supported: its "
          "residuals are saved per world rank; train without --grad-compression or without pp");
    stage_starts_ = opt_.stage_starts.empty() ? default_stage_starts(m) : opt_.stage_starts;
    check_stage_starts(stage_starts_, n, stages_);
  } else {
    TESSERA_CHECK(opt_.stage_starts.empty(), "stage starts (--stage-starts) given but the mesh ",
                  m.to_string(),
                  " has no pipeline dimension; add pp=N to the mesh or drop --stage-starts");
  }
  unit_begin_ = stage_ == 0 ? 0 : stage_starts_[std::size_t(stage_) - 1];
  unit_end_ = stage_ == stages_ - 1 ? n : stage_starts_[std::size_t(stage_)];
  SetupContext sctx;
  sctx.rank = mesh_ ? mesh_->rank() : 0;
  sctx.allocator = alloc_;
  sctx.seed = opt_.seed;
  sctx.dtype = opt_.dtype;
  if (stages_ > 1) {
    sctx.elsewhere = [this](const Module& mod) {
      const auto it = std::find(units_.begin(), units_.end(), &mod);
      if (it == units_.end()) return false;
      const int i = static_cast<int>(it - units_.begin());
      return i < unit_begin_ || i >= unit_end_;
    };
    sctx.elsewhere_allocator =
        std::make_shared<core::Allocator>("other pipeline stages", /*meta=*/true);
  }
  out_layout_ = model_->setup(in_layout_, sctx);
  if (stages_ > 1)
    for (int k = 1; k < stages_; ++k)
      TESSERA_CHECK(cuttable(units_, stage_starts_[std::size_t(k) - 1]), "pipeline: stage ", k,
                    " starts at unit ", stage_starts_[std::size_t(k) - 1], " ('",
                    units_[std::size_t(stage_starts_[std::size_t(k) - 1])]->name(),
                    "'), after the global pool: stages must begin where a 4-d activation crosses; "
                    "cut earlier");
  std::vector<Parameter*> all;
  model_->parameters(all);
  std::set<Parameter*> mine;
  for (int i = unit_begin_; i < unit_end_; ++i) {
    std::vector<Parameter*> ps;
    units_[std::size_t(i)]->parameters(ps);
    mine.insert(ps.begin(), ps.end());
  }
  for (Parameter* p : all)
    if (mine.count(p)) params_.push_back(p);
  micro_.resize(std::size_t(opt_.micro_batches));
}

Tensor Trainer::receive(int from_stage, const core::Layout& layout, StepStats& st) {
  const auto t0 = std::chrono::steady_clock::now();
  const core::DType dt = precision_dtype(opt_.precision, opt_.dtype);
  Tensor t = Tensor::empty(layout.local_shape(mesh_->rank()), dt, MemCategory::Activation, alloc_);
  const int tag = from_stage < stage_ ? kStageActivationTag : kStageGradientTag;
  {
    ScopeGuard scope(ctx_,
                     from_stage < stage_ ? "pipeline.recv_activation" : "pipeline.recv_gradient");
    mesh_->dim(pp_dim_)
        .batch_p2p({{comm::P2POp::Kind::Recv, comm::buffer_of(t), from_stage, tag}})
        ->wait();
  }
  st.pipeline_wait_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

void Trainer::send(int to_stage, Tensor t) {
  const int tag = to_stage > stage_ ? kStageActivationTag : kStageGradientTag;
  ScopeGuard scope(ctx_, to_stage > stage_ ? "pipeline.send_activation" : "pipeline.send_gradient");
  if (!t.is_contiguous()) t = t.clone();
  Pending p;
  p.work =
      mesh_->dim(pp_dim_).batch_p2p({{comm::P2POp::Kind::Send, comm::buffer_of(t), to_stage, tag}});
  p.buffer = std::move(t);
  sends_.push_back(std::move(p));
  // Sends that have left free their buffers now (local and ucx's eager sends leave in the post),
  // not at the end of the step.
  std::erase_if(sends_, [](Pending& q) { return !q.work || q.work->is_completed(); });
}

void Trainer::wait_sends() {
  for (Pending& p : sends_)
    if (p.work) p.work->wait();
  sends_.clear();
}

double Trainer::sum_over_stages(double v) {
  if (stages_ == 1) return v;
  Tensor t = Tensor::empty({1}, core::DType::F64, MemCategory::Workspace, alloc_);
  if (!t.is_meta()) {
    Tensor h = Tensor::empty({1}, core::DType::F64, MemCategory::Workspace, nullptr);
    h.data<double>()[0] = v;
    t.copy_from(h);
  }
  // The stages meet here at the step's end: the time a stage spends in this sum is its wait for
  // the pipeline to drain (the last stage finishes its backwards before the first), so it counts
  // as pipeline wait.
  const auto t0 = std::chrono::steady_clock::now();
  {
    ScopeGuard scope(ctx_, "pipeline.sum_over_stages");
    mesh_->all_reduce(t, {pp_dim_});
  }
  stage_sum_wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t.is_meta() ? 0.0 : t.to_host().data<double>()[0];
}

void Trainer::forward_micro(int m, StepStats& st) {
  const int per = opt_.batch / opt_.micro_batches;
  ctx_.sample_offset = std::int64_t(m) * per;
  if (ctx_.scope) ctx_.scope->micro_batch = opt_.micro_batches > 1 ? m : -1;  // traces' "micro"
  Micro& mb = micro_[std::size_t(m)];
  const bool last = stage_ == stages_ - 1;
  Tensor h;
  auto take = [&](int micro) {
    const auto t0 = std::chrono::steady_clock::now();
    data::Batch b = loader_->take(step_ * opt_.micro_batches + micro);
    st.data_time_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.load_time_s += loader_->last_load_seconds();
    return b;
  };
  if (stage_ == 0) {
    // The test hook's dropped micro-batch: micro-batch 1 trains on micro-batch 0's samples again.
    data::Batch batch = take(opt_.defect == TrainOptions::Defect::DropMicroBatch && m == 1 ? 0 : m);
    // to_precision hands the loader's own tensor on when no conversion is needed. A stage keeps
    // its in-flight micro-batches' inputs (the stem saves its input for the weight gradient)
    // until their backward, past later takes, and a prefetching loader refills the slot of an
    // earlier take once a later one is taken: such an input gets storage of its own (booked
    // alike in the simulator's replay, which runs this code on meta tensors).
    const bool slot = precision_dtype(opt_.precision, opt_.dtype) == batch.images.dtype();
    h = to_precision(std::move(batch.images));
    if (stages_ > 1 && loader_->options().prefetch > 0 && slot) h = h.clone();
    if (last) mb.labels = std::move(batch.labels);
  } else {
    h = receive(stage_ - 1, units_[std::size_t(unit_begin_)]->input_layout(), st);
    if (last) mb.labels = take(m).labels;
  }
  for (int i = unit_begin_; i < unit_end_; ++i) h = units_[std::size_t(i)]->forward(ctx_, h);
  if (last) {
    st.loss += loss_and_grad(h, scene_labels(mb.labels), mb.dloss);
    mb.labels = Tensor();
  } else {
    send(stage_ + 1, std::move(h));
  }
  if (stages_ > 1)
    for (int i = unit_begin_; i < unit_end_; ++i)
      mb.saved.push_back(units_[std::size_t(i)]->take_saved());
}

void Trainer::backward_micro(int m, StepStats& st, std::map<Parameter*, Bucket*>& owner) {
  ctx_.sample_offset = std::int64_t(m) * (opt_.batch / opt_.micro_batches);
  if (ctx_.scope) ctx_.scope->micro_batch = opt_.micro_batches > 1 ? m : -1;  // traces' "micro"
  Micro& mb = micro_[std::size_t(m)];
  if (stages_ > 1) {
    for (int i = unit_begin_; i < unit_end_; ++i)
      units_[std::size_t(i)]->put_saved(std::move(mb.saved[std::size_t(i - unit_begin_)]));
    mb.saved.clear();
  }
  Tensor g = stage_ == stages_ - 1
                 ? std::move(mb.dloss)
                 : receive(stage_ + 1, units_[std::size_t(unit_end_) - 1]->output_layout(), st);
  mb.dloss = Tensor();
  // Buckets are posted during the last micro-batch's backward, once their gradients are final.
  const bool post = m == opt_.micro_batches - 1 && opt_.overlap && mesh_;
  for (int i = unit_end_ - 1; i >= unit_begin_; --i) {
    Module* u = units_[std::size_t(i)];
    g = u->backward(ctx_, g);
    if (!post) continue;
    std::vector<Parameter*> ps;
    u->parameters(ps);
    for (Parameter* p : ps) {
      Bucket* b = owner.at(p);
      if (--b->pending == 0) {
        ScopeGuard scope(ctx_, "grad_bucket");
        b->work = post_bucket(*b);
      }
    }
  }
  if (stage_ > 0) {
    // The test hook's misrouted gradient goes two stages back instead of one.
    const bool wrong = opt_.defect == TrainOptions::Defect::GradToWrongStage && stage_ >= 2;
    send(wrong ? stage_ - 2 : stage_ - 1, std::move(g));
  }
}

Tensor Trainer::scene_labels(const Tensor& labels) {
  const std::int64_t images = in_layout_.global_shape()[0], outputs = out_layout_.global_shape()[0];
  if (images == outputs) return labels;
  // A model that fuses several images into one output (camera views into a scene): its output is
  // replicated over the dims that shard the images, so every rank needs every output's label —
  // gathered over those dims — and an output's label is its first image's.
  TESSERA_CHECK(opt_.model.task == Task::Classify && images % outputs == 0, "model '",
                opt_.model.name, "' turns ", images, " images into ", outputs,
                " outputs: only classification models whose "
                "outputs each fuse a whole number of consecutive images are supported");
  std::vector<int> dims;
  for (int d = 0; d < in_layout_.mesh().ndim(); ++d)
    if (in_layout_.placement(d).is_shard(0) && !out_layout_.placement(d).is_shard(0))
      dims.push_back(d);
  Tensor all = labels;
  if (!dims.empty() && mesh_ && mesh_->group(dims).size() > 1) {
    all = Tensor::empty({images}, labels.dtype(), MemCategory::Activation, alloc_);
    mesh_->group(dims).all_gather(comm::buffer_of(labels), comm::buffer_of(all))->wait();
  }
  const std::int64_t per = images / outputs;
  Tensor out = Tensor::empty({outputs}, labels.dtype(), MemCategory::Activation, alloc_);
  if (out.is_meta()) return out;
  const Tensor src = all.to_host();
  Tensor host = Tensor::empty({outputs}, labels.dtype(), MemCategory::Activation, nullptr);
  for (std::int64_t s = 0; s < outputs; ++s)
    host.data<std::int64_t>()[s] = src.data<std::int64_t>()[s * per];
  out.copy_from(host);
  return out;
}

std::string Trainer::stage_path(const std::string& path, int k) {
  return k == 0 ? path : path + ".stage" + std::to_string(k);
}

}  // namespace tessera::nn
