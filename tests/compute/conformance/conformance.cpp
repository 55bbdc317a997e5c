// The conformance suite's machinery: variants, the per-variant context (tensors, comparisons,
// guard checks), check_op and its report, and which backends must support what.
#include "compute/conformance/conformance.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "tessera/builtin_backends.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/core/error.hpp"

namespace tessera::test::compute_conformance {

std::unique_ptr<compute::Backend> create_cpu_backend() {
  compute::Registry r;
  register_builtin_backends(r);
  compute::BackendOptions o;
  o.num_threads = kThreads;
  return r.create("cpu", o);
}

const char* size_name(Size s) {
  switch (s) {
    case Size::Odd:
      return "odd sizes";
    case Size::Unit:
      return "unit sizes";
    case Size::EmptyBatch:
      return "empty batch";
    case Size::EmptyWidth:
      return "empty width";
  }
  return "?";
}

std::string Variant::name() const {
  return std::string(layout_name(layout)) + ", " + size_name(size) +
         (accumulate ? ", accumulate" : "") +
         (master_in_call_dtype ? ", master slots in the call's dtype" : "");
}

std::vector<Variant> variants_of(const Traits& t) {
  std::vector<Variant> base;
  if (t.strided) {
    for (Layout l :
         {Layout::Contiguous, Layout::NarrowLast, Layout::NarrowChannels, Layout::StrideTwo})
      base.push_back({l, Size::Odd});
  } else {
    base.push_back({Layout::Contiguous, Size::Odd});
  }
  base.push_back({Layout::Contiguous, Size::Unit});
  if (t.strided) base.push_back({Layout::StrideTwo, Size::Unit});
  if (t.empty_batch) base.push_back({Layout::Contiguous, Size::EmptyBatch});
  if (t.empty_width) base.push_back({Layout::Contiguous, Size::EmptyWidth});
  if (!t.accumulate) return base;
  std::vector<Variant> out;
  for (Variant v : base) {
    out.push_back(v);
    v.accumulate = true;
    out.push_back(v);
  }
  return out;
}

namespace {

/// An op with an Index slot (top-k's pairs) is defined for f32 and f64 calls only (the op table
/// has no 16-bit index width).
bool has_index_slot(compute::OpKind op) {
  const compute::OpSpec& spec = compute::op_spec(op);
  for (const compute::Slot& s : spec.inputs)
    if (s.type == compute::SlotType::Index) return true;
  for (const compute::Slot& s : spec.outputs)
    if (s.type == compute::SlotType::Index) return true;
  return false;
}

}  // namespace

bool op_has_dtype(compute::OpKind op, DType dtype) { return !(core::dtype_is_half(dtype) && has_index_slot(op)); }

std::vector<Variant> variants_of(const Traits& t, compute::OpKind op, DType dtype) {
  std::vector<Variant> all = variants_of(t);
  if (!core::dtype_is_half(dtype)) return all;
  if (has_index_slot(op)) return {};  // no bf16/f16 call exists: nothing to run
  // The narrowed layouts differ from stride 2 only in which runs are contiguous, which the one
  // widening of every tensor (convert_tensor) does not care about: half the CI time.
  std::vector<Variant> out;
  for (const Variant& v : all)
    if (v.layout == Layout::Contiguous || v.layout == Layout::StrideTwo) out.push_back(v);
  const compute::OpSpec& spec = compute::op_spec(op);
  bool has_master = false;
  for (const compute::Slot& s : spec.inputs) has_master = has_master || s.type == compute::SlotType::Master;
  for (const compute::Slot& s : spec.outputs) has_master = has_master || s.type == compute::SlotType::Master;
  if (has_master) {
    Variant v{Layout::Contiguous, Size::Odd, t.accumulate};
    v.master_in_call_dtype = true;
    out.push_back(v);
  }
  return out;
}

// ---- Ctx -------------------------------------------------------------------------------------

namespace {

std::vector<unsigned char> bytes_of(const Tensor& contiguous) {
  std::vector<unsigned char> b(contiguous.nbytes());
  if (!b.empty()) std::memcpy(b.data(), contiguous.raw_data(), b.size());
  return b;
}

/// Byte offsets (from `first`) of every element of a view with `shape` and `strides`, row-major.
std::vector<std::size_t> element_offsets(const Shape& shape, const Shape& strides,
                                         std::size_t first, std::size_t elem) {
  std::vector<std::size_t> out;
  const std::size_t n = numel(shape);
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::size_t k = 0; k < n; ++k) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    out.push_back(first + std::size_t(off) * elem);
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      if (++idx[std::size_t(d)] < shape[std::size_t(d)]) break;
      idx[std::size_t(d)] = 0;
    }
  }
  return out;
}

/// The view of `host_window`'s place in `host_base`, made on `base` (a copy of host_base
/// elsewhere).
Tensor same_view(const Tensor& base, const Tensor& host_window, const Tensor& host_base) {
  if (host_window.raw_data() == host_base.raw_data() && host_window.is_contiguous() &&
      host_window.numel() == host_base.numel())
    return base;
  const auto off = static_cast<const char*>(host_window.raw_data()) -
                   static_cast<const char*>(host_base.raw_data());
  // A view of the backend's copy (host or device memory alike), at the same offset and strides.
  return base.as_strided(host_window.shape(), host_window.strides(),
                         off / static_cast<std::ptrdiff_t>(core::dtype_size(host_window.dtype())));
}

}  // namespace

Tensor Ctx::track(const View& host, bool is_output) {
  Tracked t;
  t.before = bytes_of(host.base);
  if (is_output) {
    const auto first = std::size_t(static_cast<const char*>(host.t.raw_data()) -
                                   static_cast<const char*>(host.base.raw_data()));
    t.offsets =
        element_offsets(host.t.shape(), host.t.strides(), first, core::dtype_size(host.t.dtype()));
  }
  t.base = to_backend(backend, host.base);
  t.window = same_view(t.base, host.t, host.base);
  t.is_output = is_output;
  tracked_.push_back(t);
  return t.window;
}

Tensor Ctx::input(const Vec& v, const Shape& shape, DType dt, Layout layout) {
  return track(make_view(v, shape, dt, layout), false);
}

Tensor Ctx::input_i64(const std::vector<std::int64_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::I64, core::MemCategory::Workspace);
  REQUIRE(v.size() == numel(shape));
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(std::int64_t));
  return track({t, t}, false);
}

Tensor Ctx::index_input(const std::vector<std::int64_t>& v) {
  Tensor t = Tensor::empty({std::int64_t(v.size())}, index_dtype(), core::MemCategory::Workspace);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (index_dtype() == DType::I32) t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
    else t.data<std::int64_t>()[i] = v[i];
  return track({t, t}, false);
}

Tensor Ctx::index_output(std::int64_t n) {
  Tensor t = Tensor::empty({n}, index_dtype(), core::MemCategory::Workspace);
  if (n > 0) std::memset(t.raw_data(), 0x5a, t.nbytes());  // garbage the op must overwrite
  return track({t, t}, true);
}

std::vector<std::int64_t> Ctx::read_slots(const Tensor& t) const {
  const Tensor h = t.is_host() ? t : t.to_host();
  std::vector<std::int64_t> out(std::size_t(h.numel()));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = h.dtype() == DType::I32 ? std::int64_t(h.data<std::int32_t>()[i]) : h.data<std::int64_t>()[i];
  return out;
}

Tensor Ctx::output(const Shape& shape, DType dt, Layout layout, const Vec& init) {
  REQUIRE((init.empty() || init.size() == numel(shape)));
  const Vec v = init.empty() && numel(shape) > 0 ? random_doubles(numel(shape), 779, 70, 80) : init;
  return track(make_view(v.empty() ? Vec(numel(shape)) : v, shape, dt, layout), true);
}

const Ctx::Tracked& Ctx::find(const Tensor& t) const {
  for (const Tracked& tr : tracked_)
    if (tr.window.raw_data() == t.raw_data() && tr.window.shape() == t.shape() &&
        tr.window.strides() == t.strides())
      return tr;
  throw InvalidArgument("compute conformance: " + t.describe() + " was not made by this Ctx");
}

namespace {

/// The absolute error of rounding to a 16-bit dtype near zero (see Ctx::expect_within).
double half_eta(DType dt) { return dt == DType::F16 ? 0x1p-25 : 0x1p-126; }

/// `bound` plus the one rounding of a bf16/f16 output (unchanged for other dtypes, and where 0).
Vec with_output_rounding(DType out, const Vec& ref, Vec bound) {
  if (!core::dtype_is_half(out)) return bound;
  const double u = core::unit_roundoff(out);
  for (std::size_t i = 0; i < bound.size() && i < ref.size(); ++i)
    if (bound[i] > 0) bound[i] += u * (std::abs(ref[i]) + bound[i]) + half_eta(out);
  return bound;
}

}  // namespace

void Ctx::expect_within(const char* what, const Tensor& out, const Vec& ref, const Vec& bound) {
  const Tracked& tr = find(out);
  const Tensor host_base = to_host(backend, tr.base);
  const Closeness c = compare_within(to_doubles(same_view(host_base, tr.window, tr.base)), ref,
                                     with_output_rounding(out.dtype(), ref, bound));
  worst_share_ = std::max(worst_share_, c.rel_err);
  if (!c.ok) throw CheckFailure(std::string(what) + " " + out.describe() + ": " + c.report);
}

void Ctx::expect_close(const char* what, const Tensor& out, const Vec& ref, double rtol) {
  if (core::dtype_is_half(out.dtype())) {
    double scale = 0;
    for (double r : ref) scale = std::max(scale, std::abs(r));
    rtol += core::unit_roundoff(out.dtype()) * (1 + rtol) + (scale > 0 ? half_eta(out.dtype()) / scale : 0);
  }
  const Tracked& tr = find(out);
  const Tensor host_base = to_host(backend, tr.base);
  const Closeness c = compare(to_doubles(same_view(host_base, tr.window, tr.base)), ref, rtol);
  worst_share_ = std::max(worst_share_, c.rel_err / rtol);
  if (!c.ok) throw CheckFailure(std::string(what) + " " + out.describe() + ": " + c.report);
}

void Ctx::check_guards() {
  for (std::size_t k = 0; k < tracked_.size(); ++k) {
    const Tracked& tr = tracked_[k];
    std::vector<unsigned char> now = bytes_of(to_host(backend, tr.base).contiguous());
    std::vector<bool> inside(now.size(), false);
    const std::size_t elem = core::dtype_size(tr.window.dtype());
    for (std::size_t off : tr.offsets)
      for (std::size_t b = 0; b < elem; ++b) inside[off + b] = true;
    for (std::size_t i = 0; i < now.size(); ++i)
      if (!inside[i] && now[i] != tr.before[i])
        throw CheckFailure(detail::cat(tr.is_output ? "output " : "input ", tr.window.describe(),
                                       " (tensor #", k, " of the call): byte ", i,
                                       " of its buffer ", tr.is_output ? "outside the window " : "",
                                       "was overwritten"));
  }
}

double Ctx::gamma(std::int64_t m) const {
  return gamma_bound(core::accumulate_dtype(dtype), m) + gamma_bound(DType::F64, m);
}

double Ctx::unit_roundoff() const { return core::unit_roundoff(core::accumulate_dtype(dtype)); }

double Ctx::master_rounding() const {
  const bool declared = backend.capabilities().rounds_master_to_call_dtype;
  const bool rounds = declared && core::dtype_is_half(dtype) && master() == DType::F32;
  return rounds ? core::unit_roundoff(dtype) : 0.0;
}

Vec Ctx::with_master_rounding(const Vec& ref, Vec bound) const {
  return master_rounding() == 0 ? bound : with_output_rounding(dtype, ref, std::move(bound));
}

// ---- the case list, check_op, reports ----------------------------------------------------------

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    for (auto part : {conv_cases, linear_norm_cases, pointwise_cases, loss_optim_cases, topk_cases})
      for (OpCase& c : part()) all.push_back(std::move(c));
    return all;
  }();
  return cases;
}

const OpCase* find_case(compute::OpKind op) {
  for (const OpCase& c : all_cases())
    if (c.op == op) return &c;
  return nullptr;
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::Pass:
      return "pass";
    case Outcome::Unsupported:
      return "unsupported";
    case Outcome::Fail:
      return "FAIL";
  }
  return "?";
}

Report check_op(compute::Backend& backend, compute::OpKind op, DType dtype,
                const std::function<void(std::size_t)>& on_variant) {
  Report r;
  r.backend = std::string(backend.name());
  r.op = op;
  r.dtype = dtype;
  const OpCase* c = find_case(op);
  if (!c) {
    r.missing_case =
        detail::cat("op ", compute::op_name(op), " (OpKind ", int(op),
                    ") has no conformance case: add one to tests/compute/conformance/cases_*.cpp");
    return r;
  }
  const std::vector<Variant> variants = variants_of(c->traits, op, dtype);
  for (std::size_t i = 0; i < variants.size(); ++i) {
    if (on_variant) on_variant(i);
    VariantResult res;
    res.variant = variants[i];
    try {
      Ctx ctx(backend, dtype, variants[i]);
      c->run(ctx);
      ctx.check_guards();
      res.worst_share = ctx.worst_share();
    } catch (const Unsupported& e) {
      res.outcome = Outcome::Unsupported;
      res.message = e.what();
    } catch (const CheckFailure& e) {
      res.outcome = Outcome::Fail;
      res.message = e.what();
    } catch (const std::exception& e) {
      res.outcome = Outcome::Fail;
      res.message = std::string("unexpected exception: ") + e.what();
    } catch (...) {
      res.outcome = Outcome::Fail;
      res.message = "a failed check of the suite itself (see the Catch2 output above)";
    }
    r.results.push_back(std::move(res));
  }
  return r;
}

int Report::count(Outcome o) const {
  return int(std::count_if(results.begin(), results.end(),
                           [o](const VariantResult& v) { return v.outcome == o; }));
}

double Report::worst_share() const {
  double w = 0;
  for (const VariantResult& v : results)
    if (v.outcome == Outcome::Pass) w = std::max(w, v.worst_share);
  return w;
}

Outcome Report::overall() const {
  if (!missing_case.empty() || count(Outcome::Fail) > 0) return Outcome::Fail;
  return count(Outcome::Pass) == 0 ? Outcome::Unsupported : Outcome::Pass;
}

std::string Report::title() const {
  return detail::cat(backend, " ", compute::op_name(op), " ", core::dtype_name(dtype));
}

std::string Report::details() const {
  std::ostringstream os;
  os << title() << ": " << count(Outcome::Pass) << " passed, " << count(Outcome::Unsupported)
     << " unsupported, " << count(Outcome::Fail) << " failed of " << results.size() << " variants";
  if (!missing_case.empty()) os << "\n  " << missing_case;
  for (const VariantResult& v : results)
    if (v.outcome != Outcome::Pass)
      os << "\n  " << outcome_name(v.outcome) << " [" << v.variant.name() << "]: " << v.message;
  return os.str();
}

namespace {

/// The backends that must support `op` in bf16 and f16: one line per backend whose half path is
/// complete (the others may report Unsupported for now).
bool must_support_half(std::string_view backend, compute::OpKind op) {
  if (has_index_slot(op)) return false;  // f32/f64 only, by the op table
  if (backend == "cpu") return true;  // every op: widened to f32 (backends/compute/cpu/README.md)
  // Every op but the library calls (16-bit bodies or widened: backends/compute/cuda/README.md).
  if (backend == "cuda-kernels@host")
    return !compute::is_conv(op) && op != compute::OpKind::LinearForward &&
           op != compute::OpKind::LinearBackward;
  return false;
}

}  // namespace

bool must_support(std::string_view backend, compute::OpKind op, DType dtype) {
  if (op >= compute::OpKind::kCount) return false;
  if (core::dtype_is_half(dtype)) return must_support_half(backend, op);
  const bool float_dtype = dtype == DType::F32 || dtype == DType::F64;
  if (!float_dtype) return false;
  if (backend == "cpu") return true;
  // The cuda backend's own kernels: every op but the library calls (cuDNN, cuBLAS).
  const bool library_op = compute::is_conv(op) || op == compute::OpKind::LinearForward ||
                          op == compute::OpKind::LinearBackward;
  if (backend == "cuda-kernels@host") return !library_op;
  // The cuda backend: everything in f32; in f64 all but the convolutions (cuDNN's double
  // algorithms are not guaranteed for every geometry; where one is missing it is reported).
  if (backend == "cuda") return dtype == DType::F32 || !compute::is_conv(op);
  return false;
}

// ---- the host ↔ backend transfer ---------------------------------------------------------------
// A backend that computes on host memory gets the tensors as they are; one with device memory
// (compute::Backend::device_memory, the cuda backend) gets a contiguous copy in that memory, and
// its results come back the same way. Nothing else in the suite touches memory.

Tensor to_backend(compute::Backend& backend, const Tensor& host) {
  const auto memory = backend.device_memory();
  if (!memory) return host;
  return host.to(std::make_shared<core::Allocator>("conformance", memory), core::MemCategory::Workspace);
}

Tensor to_host(compute::Backend& /*backend*/, const Tensor& t) { return t.to_host(); }

}  // namespace tessera::test::compute_conformance
