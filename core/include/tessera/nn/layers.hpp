// The layers of ConvNeXt and RegNet, each sharded where its input is sharded.
// Layout conventions: images are NCHW with placements S(0) (data parallel), S(2)/S(3) (spatial)
// or R per mesh dimension; pooled features are (N,C), replicated over the spatial mesh dims.
#pragma once

#include <optional>

#include "tessera/compute/ops.hpp"
#include "tessera/nn/module.hpp"

namespace tessera::nn {

/// How a convolution's weights start.
enum class ConvInit { TruncNormal, KaimingFanOut };

/// Sharded 2-D convolution (halo exchange per HaloPlan). Weight gradients are Partial over the
/// input's sharded mesh dims.
class Conv2d : public Module {
 public:
  Conv2d(std::string name, ConvSpec spec, ConvInit init = ConvInit::TruncNormal);
  std::string kind() const override { return "conv2d"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  /// Drops what backward needs, not the halos kept for a checkpointed recompute (Context::
  /// halo_recompute): the recompute, or the next forward, drops those.
  void release_saved() override { saved_ = {}; }

 protected:
  std::any take_own_saved() override { return stash(saved_, kept_, have_kept_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), saved_, kept_, have_kept_); }

 public:
  const ConvSpec& spec() const noexcept { return spec_; }
  /// This rank's plan (valid after setup).
  const HaloPlan& plan() const { return *plan_; }

 private:
  ConvSpec spec_;
  ConvInit init_;
  std::optional<HaloPlan> plan_;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  Conv2dSaved saved_;
  Conv2dHalos kept_;         // the halos of a checkpointed forward, for its recompute
  bool have_kept_ = false;   // on every rank alike: replay instead of exchanging
};

/// LayerNorm over channels (dim 1) of (N,C,H,W) or (N,C): local per pixel, no communication.
class LayerNorm : public Module {
 public:
  LayerNorm(std::string name, std::int64_t channels, double eps = 1e-6);
  std::string kind() const override { return "layernorm"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void release_saved() override { x_ = mean_ = rstd_ = {}; }

 protected:
  std::any take_own_saved() override { return stash(x_, mean_, rstd_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), x_, mean_, rstd_); }

 public:
 private:
  std::int64_t channels_;
  double eps_;
  Parameter* gamma_ = nullptr;
  Parameter* beta_ = nullptr;
  core::Tensor x_, mean_, rstd_;
};

/// ReLU, GELU (exact, erf) or sigmoid, elementwise.
class ActivationLayer : public Module {
 public:
  ActivationLayer(std::string name, compute::Activation a) : Module(std::move(name)), act_(a) {}
  std::string kind() const override { return std::string(compute::activation_name(act_)); }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void release_saved() override { saved_ = {}; }

 protected:
  std::any take_own_saved() override { return stash(saved_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), saved_); }

 public:
 private:
  compute::Activation act_;
  core::Tensor saved_;  // x for GELU, y for ReLU/sigmoid
};

/// y = x·gamma per channel (ConvNeXt's LayerScale, gamma initialised to `init`).
class LayerScale : public Module {
 public:
  LayerScale(std::string name, std::int64_t channels, double init = 1e-6);
  std::string kind() const override { return "layerscale"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void release_saved() override { x_ = {}; }

 protected:
  std::any take_own_saved() override { return stash(x_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), x_); }

 public:
 private:
  std::int64_t channels_;
  double init_;
  Parameter* gamma_ = nullptr;
  core::Tensor x_;
};

/// Stochastic depth: in training, sample n of the global batch is kept with probability 1−p
/// (then scaled by 1/(1−p)) or zeroed; the decision is a hash of (seed, step, layer name, global
/// sample index) — never of the rank — so every spatial shard of a sample agrees.
class DropPath : public Module {
 public:
  DropPath(std::string name, double prob) : Module(std::move(name)), prob_(prob) {}
  std::string kind() const override { return "droppath"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void release_saved() override { scale_ = {}; }

 protected:
  std::any take_own_saved() override { return stash(scale_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), scale_); }

 public:
  /// The keep decision for a global sample (exposed for tests).
  static bool keep(std::uint64_t seed, std::int64_t step, const std::string& layer, std::int64_t sample,
                   double prob);

 private:
  double prob_;
  std::int64_t batch_offset_ = 0;  // global index of this rank's first sample
  core::Tensor scale_;             // (N) per local sample; undefined = identity
};

/// BatchNorm over (N,H,W) per channel. With a sharded input it is SyncBN: the per-channel sums
/// are all-reduced over every sharded mesh dim, so it equals plain BN over the whole batch.
class BatchNorm : public Module {
 public:
  BatchNorm(std::string name, std::int64_t channels, double eps = 1e-5, double momentum = 0.1,
            bool zero_gamma = false);
  std::string kind() const override { return "batchnorm"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void release_saved() override { x_ = mean_ = rstd_ = {}; }

 protected:
  std::any take_own_saved() override { return stash(x_, mean_, rstd_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), x_, mean_, rstd_); }

 public:
  const core::Tensor& running_mean() const noexcept { return running_mean_; }
  const core::Tensor& running_var() const noexcept { return running_var_; }
  /// Running statistics are buffers, not parameters: checkpoints save them through this.
  void buffers(std::vector<std::pair<std::string, core::Tensor*>>& out) override;

 private:
  std::int64_t channels_;
  double eps_, momentum_;
  bool zero_gamma_;
  std::vector<int> reduce_dims_;
  double count_ = 0;  // global elements per channel
  Parameter* gamma_ = nullptr;
  Parameter* beta_ = nullptr;
  core::Tensor running_mean_, running_var_;
  core::Tensor x_, mean_, rstd_;
};

/// (N,C,H,W) → (N,C): mean over H and W. A local sum, all-reduced over the spatial mesh dims
/// (Partial → Replicate); the output is replicated over them.
class GlobalAvgPool : public Module {
 public:
  explicit GlobalAvgPool(std::string name) : Module(std::move(name)) {}
  std::string kind() const override { return "global_avg_pool"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;

 private:
  std::vector<int> spatial_dims_;
  double hw_ = 1;
  core::Shape local_in_shape_;
  core::DType in_dtype_ = core::DType::F32;
};

/// y (N,out) = x (N,in) · Wᵀ + b.
class Linear : public Module {
 public:
  Linear(std::string name, std::int64_t in, std::int64_t out, bool bias = true,
         bool trunc_normal_init = true);
  std::string kind() const override { return "linear"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void release_saved() override { x_ = {}; }

 protected:
  std::any take_own_saved() override { return stash(x_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), x_); }

 public:
 private:
  std::int64_t in_, out_;
  bool bias_on_, trunc_normal_;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  core::Tensor x_;
};

/// Squeeze-and-excitation (RegNetY): s = sigmoid(fc2(relu(fc1(pool(x))))), y = x·s per sample
/// and channel. The gradient of s is a Partial sum over the spatial shards and is all-reduced
/// before it flows back through the (replicated) fully connected layers.
class SqueezeExcite : public Module {
 public:
  SqueezeExcite(std::string name, std::int64_t channels, std::int64_t squeeze);
  std::string kind() const override { return "squeeze_excite"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void parameters(std::vector<Parameter*>& out) override;
  void children(std::vector<Module*>& out) override;
  void release_saved() override;

 protected:
  std::any take_own_saved() override { return stash(x_, s_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), x_, s_); }

 public:
 private:
  GlobalAvgPool pool_;
  Sequential fc_;  // fc1, relu, fc2, sigmoid
  std::vector<int> spatial_dims_;
  core::Tensor x_, s_;
};

/// Nearest-neighbour upsampling by an integer factor (local: shards stay aligned).
class UpsampleNearest : public Module {
 public:
  UpsampleNearest(std::string name, int factor) : Module(std::move(name)), factor_(factor) {}
  std::string kind() const override { return "upsample_nearest"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;

 private:
  int factor_;
  core::Shape local_in_shape_;
};

/// The camera views of each scene side by side in channels: (N·V, C, h, w), images s·V … s·V+V−1
/// being scene s's views, dim 0 sharded over the mesh dim "dp" (in equal shards), becomes
/// (N, V·C, h, w) replicated over dp (spatial shards unchanged). Forward all-gathers the views
/// over dp; backward takes this rank's images out of the (replicated) gradient, with no
/// communication. What follows it computes the same on every dp rank, so its parameters'
/// gradients are not reduced over dp.
class GatherViews : public Module {
 public:
  GatherViews(std::string name, int views) : Module(std::move(name)), views_(views) {}
  std::string kind() const override { return "gather_views"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  int views() const noexcept { return views_; }

 private:
  int views_;
  int dp_dim_ = -1;          // the mesh dim "dp" when it shards the images, else -1
  std::int64_t first_ = 0;   // this rank's first image in the gathered batch
  std::int64_t images_ = 0;  // N·V, the images of the (micro-)batch
};

/// y = body(x) + shortcut(x) (identity when shortcut is null), then ReLU when `post_relu`.
class Residual : public Module {
 public:
  Residual(std::string name, ModulePtr body, ModulePtr shortcut = nullptr, bool post_relu = false);
  std::string kind() const override { return "residual"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void parameters(std::vector<Parameter*>& out) override;
  void children(std::vector<Module*>& out) override;
  void release_saved() override;

 protected:
  std::any take_own_saved() override { return stash(y_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), y_); }

 public:
 private:
  ModulePtr body_, shortcut_;
  bool post_relu_;
  core::Tensor y_;  // output after ReLU, for its backward
};

/// Activation checkpointing: forward keeps only the input and drops everything the inner
/// module saved; backward recomputes the inner forward, then runs its backward.
class Checkpoint : public Module {
 public:
  explicit Checkpoint(ModulePtr inner);
  std::string kind() const override { return "checkpoint"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void parameters(std::vector<Parameter*>& out) override;
  void children(std::vector<Module*>& out) override;
  void release_saved() override;

 protected:
  std::any take_own_saved() override { return stash(x_); }
  void put_own_saved(std::any&& a) override { unstash(std::move(a), x_); }

 public:
  Module& inner() noexcept { return *inner_; }

 private:
  ModulePtr inner_;
  core::Tensor x_;
};

}  // namespace tessera::nn
