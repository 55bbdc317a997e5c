// Module basics: parameters with deterministic initialisation, scopes, Sequential.
#include "tessera/nn/module.hpp"

#include <cmath>
#include <random>

#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"

namespace tessera::nn {

ScopeGuard::ScopeGuard(Context& ctx, const std::string& layer) : scope_(ctx.scope) {
  if (scope_) {
    saved_ = std::move(scope_->layer);
    scope_->layer = layer;
  }
}

ScopeGuard::~ScopeGuard() {
  if (scope_) scope_->layer = std::move(saved_);
}

void Module::parameters(std::vector<Parameter*>& out) {
  for (auto& p : params_) out.push_back(p.get());
}

void Module::children(std::vector<Module*>&) {}

std::string_view halo_recompute_name(HaloRecompute h) noexcept {
  return h == HaloRecompute::Keep ? "keep" : "exchange";
}

std::optional<HaloRecompute> parse_halo_recompute(std::string_view s) noexcept {
  if (s == "keep") return HaloRecompute::Keep;
  if (s == "exchange") return HaloRecompute::Exchange;
  return std::nullopt;
}

void Module::buffers(std::vector<std::pair<std::string, core::Tensor*>>& out) {
  std::vector<Module*> kids;
  children(kids);
  for (Module* m : kids) m->buffers(out);
}

namespace {

template <class T>
void init_values(T* p, std::int64_t n, int init, std::uint64_t seed, double fan) {
  std::mt19937_64 gen(seed);
  switch (init) {
    case 0: for (std::int64_t i = 0; i < n; ++i) p[i] = T(0); break;  // Zeros
    case 1: for (std::int64_t i = 0; i < n; ++i) p[i] = T(1); break;  // Ones
    case 2: {  // truncated normal, std 0.02, cut at ±2 std (ConvNeXt)
      std::normal_distribution<double> d(0.0, 0.02);
      for (std::int64_t i = 0; i < n; ++i) {
        double v;
        do v = d(gen);
        while (std::abs(v) > 0.04);
        p[i] = static_cast<T>(v);
      }
      break;
    }
    case 3: {  // Kaiming normal, fan-out mode (RegNet convolutions)
      std::normal_distribution<double> d(0.0, std::sqrt(2.0 / std::max(1.0, fan)));
      for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(d(gen));
      break;
    }
    default: {  // uniform ±1/sqrt(fan) (PyTorch's Linear default)
      const double b = 1.0 / std::sqrt(std::max(1.0, fan));
      std::uniform_real_distribution<double> d(-b, b);
      for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(d(gen));
    }
  }
}

}  // namespace

Parameter& Module::add_parameter(SetupContext& ctx, const std::string& leaf, core::Shape shape, Init init,
                                 bool weight_decay, double fan) {
  auto p = std::make_unique<Parameter>();
  p->name = name_.empty() ? leaf : name_ + "." + leaf;
  p->weight_decay = weight_decay;
  p->value = core::Tensor::empty(shape, ctx.dtype, core::MemCategory::Parameter, ctx.allocator);
  p->grad = core::Tensor::zeros(shape, ctx.dtype, core::MemCategory::Gradient, ctx.allocator);
  if (!p->value.is_meta()) {
    // Drawn on the host (the same values in every memory space), then copied to a device.
    core::Tensor host = p->value.to_host();
    const std::uint64_t seed = core::fnv1a64(p->name, ctx.seed * 0x9e3779b97f4a7c15ull + 1);
    if (ctx.dtype == core::DType::F32)
      init_values(host.data<float>(), host.numel(), static_cast<int>(init), seed, fan);
    else
      init_values(host.data<double>(), host.numel(), static_cast<int>(init), seed, fan);
    if (!host.shares_storage(p->value)) p->value.copy_from(host);
  }
  params_.push_back(std::move(p));
  return *params_.back();
}

SavedState Module::take_saved() {
  SavedState s;
  s.own = take_own_saved();
  std::vector<Module*> kids;
  children(kids);
  for (Module* k : kids) s.children.push_back(k->take_saved());
  return s;
}

void Module::put_saved(SavedState&& state) {
  put_own_saved(std::move(state.own));
  std::vector<Module*> kids;
  children(kids);
  TESSERA_CHECK(kids.size() == state.children.size(), "module '", name_, "': saved state of ",
                state.children.size(), " children put back into ", kids.size());
  for (std::size_t i = 0; i < kids.size(); ++i) kids[i]->put_saved(std::move(state.children[i]));
}

Module& Sequential::add(ModulePtr m) {
  mods_.push_back(std::move(m));
  return *mods_.back();
}

core::Layout Sequential::setup(const core::Layout& in, SetupContext& ctx) {
  core::Layout l = in;
  for (auto& m : mods_) {
    if (ctx.elsewhere && ctx.elsewhere(*m)) {  // another pipeline stage's: shapes only
      SetupContext there = ctx;
      there.allocator = ctx.elsewhere_allocator;
      there.elsewhere = nullptr;
      l = m->setup(l, there);
    } else {
      l = m->setup(l, ctx);
    }
  }
  set_layouts(in, l);
  return l;
}

core::Tensor Sequential::forward(Context& ctx, const core::Tensor& x) {
  core::Tensor h = x;
  for (auto& m : mods_) h = m->forward(ctx, h);
  return h;
}

core::Tensor Sequential::backward(Context& ctx, const core::Tensor& dy) {
  core::Tensor g = dy;
  for (auto it = mods_.rbegin(); it != mods_.rend(); ++it) g = (*it)->backward(ctx, g);
  return g;
}

void Sequential::parameters(std::vector<Parameter*>& out) {
  Module::parameters(out);
  for (auto& m : mods_) m->parameters(out);
}

void Sequential::children(std::vector<Module*>& out) {
  for (auto& m : mods_) out.push_back(m.get());
}

void Sequential::release_saved() {
  for (auto& m : mods_) m->release_saved();
}

std::vector<int> sharded_mesh_dims(const core::Layout& l) {
  std::vector<int> out;
  for (int d = 0; d < l.mesh().ndim(); ++d)
    if (l.placement(d).is_shard()) out.push_back(d);
  return out;
}

std::vector<int> spatial_mesh_dims(const core::Layout& l) {
  std::vector<int> out;
  for (int d = 0; d < l.mesh().ndim(); ++d)
    if (l.placement(d).is_shard(2) || l.placement(d).is_shard(3)) out.push_back(d);
  return out;
}

}  // namespace tessera::nn
