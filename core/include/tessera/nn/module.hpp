// Module: one layer (or a composition of layers) with forward, backward and layout inference —
// the executable form of a model description. Every rank owns its own instance.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/layout.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/nn/conv2d.hpp"

namespace tessera::nn {

/// A trainable tensor and its gradient.
struct Parameter {
  std::string name;        ///< "stages.1.blocks.0.dwconv.weight"
  core::Tensor value;      ///< MemCategory::Parameter, replicated on every rank
  core::Tensor grad;       ///< MemCategory::Gradient; Partial until reduced
  bool weight_decay = true;
  /// Mesh dims over which this rank's gradient is a Partial sum (the dims that shard the
  /// layer's input); the trainer all-reduces over them.
  std::vector<int> grad_reduce_mesh_dims;
};

/// Tracks the layer currently running, for traces and error messages.
struct Scope {
  std::string layer;
  int micro_batch = -1;  ///< the running micro-batch (Trainer, with M > 1); -1 outside one
};

/// What a rank's modules run on.
/// What a checkpointed block's recompute does for the halos its convolutions need: Keep — its
/// forward keeps the halos it received (booked as MemCategory::HaloBuffer until the recompute)
/// and the recompute reads them, exchanging nothing; Exchange — the recompute exchanges again
/// (no memory kept; one more exchange per sharded convolution of the block). Same bits either way.
enum class HaloRecompute : std::uint8_t { Keep, Exchange };
/// "keep", "exchange".
std::string_view halo_recompute_name(HaloRecompute h) noexcept;
/// Parses "keep" or "exchange"; nullopt otherwise.
std::optional<HaloRecompute> parse_halo_recompute(std::string_view s) noexcept;

struct Context {
  comm::MeshComm* mesh = nullptr;  ///< null: a single rank without communication
  compute::Backend* compute = nullptr;
  core::AllocatorPtr allocator;
  bool training = true;
  std::uint64_t seed = 0;  ///< with `step`, makes stochastic layers (DropPath) deterministic
  std::int64_t step = 0;
  /// Index in the step's global batch of the running micro-batch's first sample (0 without
  /// micro-batches): DropPath draws by the sample's index in the step, so micro-batching does not
  /// change which samples it drops.
  std::int64_t sample_offset = 0;
  Conv2dOptions conv;
  Scope* scope = nullptr;  ///< optional; shared with tracing decorators
  bool recomputing = false;  ///< set by Checkpoint while it re-runs a forward (BN keeps its stats)
  bool checkpointed = false;  ///< set by Checkpoint during its first (training) forward
  HaloRecompute halo_recompute = HaloRecompute::Keep;

  int rank() const noexcept { return mesh ? mesh->rank() : 0; }
  comm::Backend* world() const noexcept { return mesh ? &mesh->world() : nullptr; }
  RankContext rank_context() const { return RankContext{world(), compute, allocator}; }
};

/// Sets ctx.scope->layer for the lifetime of the guard.
class ScopeGuard {
 public:
  ScopeGuard(Context& ctx, const std::string& layer);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Scope* scope_;
  std::string saved_;
};

/// What a module's forward kept for its backward, moved out of the module (Module::take_saved) and
/// back (put_saved): a pipeline stage keeps several micro-batches between their forward and their
/// backward, each one's saved tensors waiting here.
struct SavedState {
  std::any own;
  std::vector<SavedState> children;
};

class Module;

/// What setup() needs besides the input layout.
struct SetupContext {
  int rank = 0;
  core::AllocatorPtr allocator;  ///< parameters and gradients are allocated here
  std::uint64_t seed = 0;        ///< parameter initialisation (same on every rank)
  HaloOptions halo;
  core::DType dtype = core::DType::F32;
  /// With pipeline stages: true for the modules another stage runs; their parameters go to
  /// `elsewhere_allocator` (meta: shapes and layouts, no memory) instead of `allocator`.
  std::function<bool(const Module&)> elsewhere;
  core::AllocatorPtr elsewhere_allocator;
};

/// A layer. setup() runs once per input layout: it validates the layout, plans (halo plans for
/// this rank), allocates parameters and returns the output layout. forward() keeps what
/// backward() needs; backward() consumes it and accumulates into parameter gradients.
class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Path of the module in its model ("stages.1.blocks.0.dwconv").
  const std::string& name() const noexcept { return name_; }
  /// "conv2d", "layernorm", "sequential", ...
  virtual std::string kind() const = 0;

  virtual core::Layout setup(const core::Layout& in, SetupContext& ctx) = 0;
  virtual core::Tensor forward(Context& ctx, const core::Tensor& x) = 0;
  virtual core::Tensor backward(Context& ctx, const core::Tensor& dy) = 0;

  /// Appends this module's parameters (and its children's) in definition order.
  virtual void parameters(std::vector<Parameter*>& out);
  /// Appends the direct children (composite modules only).
  virtual void children(std::vector<Module*>& out);
  /// Appends state that is not trained but must be checkpointed (BatchNorm running statistics);
  /// the default collects the children's.
  virtual void buffers(std::vector<std::pair<std::string, core::Tensor*>>& out);
  /// Whether the gradient of the input is needed (false for a model's first layer).
  void set_input_grad(bool on) noexcept { input_grad_ = on; }
  bool input_grad() const noexcept { return input_grad_; }
  /// Frees every tensor kept for backward (used by activation checkpointing).
  virtual void release_saved() {}
  /// Moves out everything its forward (and its children's) kept for backward, leaving the module
  /// as before any forward; put_saved() moves it back before that micro-batch's backward.
  SavedState take_saved();
  void put_saved(SavedState&& state);
  /// The input and output layouts of the last setup().
  const core::Layout& input_layout() const noexcept { return in_layout_; }
  const core::Layout& output_layout() const noexcept { return out_layout_; }

 protected:
  /// This module's own saved state (not its children's); modules that keep any override both.
  virtual std::any take_own_saved() { return {}; }
  virtual void put_own_saved(std::any&&) {}
  template <class... T>
  static std::any stash(T&... members) {
    return std::tuple<T...>(std::exchange(members, T{})...);
  }
  template <class... T>
  static void unstash(std::any&& a, T&... members) {
    if (a.has_value()) std::tie(members...) = std::any_cast<std::tuple<T...>&&>(std::move(a));
  }
  /// Allocates a parameter (and its zeroed gradient) initialised from `init` seeded by
  /// (ctx.seed, full parameter name); meta allocators skip the initialisation.
  enum class Init { Zeros, Ones, TruncNormal002, KaimingFanOut, Uniform };
  Parameter& add_parameter(SetupContext& ctx, const std::string& leaf, core::Shape shape, Init init,
                           bool weight_decay = true, double fan = 0);
  void set_layouts(const core::Layout& in, const core::Layout& out) {
    in_layout_ = in;
    out_layout_ = out;
  }
  std::vector<std::unique_ptr<Parameter>> params_;

 private:
  bool input_grad_ = true;
  std::string name_;
  core::Layout in_layout_, out_layout_;
};

using ModulePtr = std::unique_ptr<Module>;

/// Children run one after another.
class Sequential : public Module {
 public:
  explicit Sequential(std::string name) : Module(std::move(name)) {}
  Module& add(ModulePtr m);
  std::string kind() const override { return "sequential"; }
  core::Layout setup(const core::Layout& in, SetupContext& ctx) override;
  core::Tensor forward(Context& ctx, const core::Tensor& x) override;
  core::Tensor backward(Context& ctx, const core::Tensor& dy) override;
  void parameters(std::vector<Parameter*>& out) override;
  void children(std::vector<Module*>& out) override;
  void release_saved() override;
  std::size_t size() const noexcept { return mods_.size(); }
  Module& at(std::size_t i) { return *mods_.at(i); }

 private:
  std::vector<ModulePtr> mods_;
};

/// The mesh dims that shard any dimension of `l` (a layer's parameter gradients are Partial over
/// these).
std::vector<int> sharded_mesh_dims(const core::Layout& l);
/// The mesh dims that shard dims 2 or 3 (H, W) of `l`.
std::vector<int> spatial_mesh_dims(const core::Layout& l);

}  // namespace tessera::nn
