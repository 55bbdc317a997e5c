// The conformance suite's own checks can fail: a compute::Backend decorator around the cpu backend
// breaks one op on purpose (a result off by a little for strided inputs, accumulate ignored,
// Unsupported, or f32 Master outputs of a bf16/f16 call stored through 16 bits), and check_op must
// report exactly that op and those variants, and pass the rest.
#include <cmath>
#include <memory>
#include <set>

#include "compute/conformance/conformance.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/core/error.hpp"

namespace tessera::test::compute_conformance {
namespace {

using compute::OpKind;

enum class Fault {
  PerturbStrided,  ///< the largest element of the first output ×(1 + 2^-8 | 2^-30) when a tensor is
                   ///< a view
  IgnoreAccumulate,  ///< runs an accumulating call as an overwriting one
  Unsupported,       ///< throws tessera::Unsupported
  /// In a bf16/f16 call, rounds every f32 output (a Master slot: a parameter gradient, a
  /// statistic) to the call's dtype, as a backend would that kept them in 16 bits.
  NarrowMasters,
};
const char* fault_name(Fault f) {
  return f == Fault::PerturbStrided     ? "perturbed for strided tensors"
         : f == Fault::IgnoreAccumulate ? "accumulate ignored"
         : f == Fault::NarrowMasters    ? "f32 master outputs through 16 bits"
                                        : "unsupported";
}

/// Multiplies the largest-magnitude element of `t` (f32/f64/bf16/f16, any strides) by (1 + rel).
void perturb_largest(core::Tensor& t, double rel) {
  const std::vector<double> v = to_doubles(t);
  std::size_t worst = 0;
  for (std::size_t i = 1; i < v.size(); ++i)
    if (std::abs(v[i]) > std::abs(v[worst])) worst = i;
  std::int64_t off = 0, rest = std::int64_t(worst);
  for (int d = t.ndim() - 1; d >= 0; --d)
    off += (rest % t.size(d)) * t.stride(d), rest /= t.size(d);
  const double nv = v[worst] == 0 ? 1.0 : v[worst] * (1 + rel);
  if (t.dtype() == DType::F32)
    static_cast<float*>(t.raw_data())[off] = float(nv);
  else if (core::dtype_is_half(t.dtype()))
    static_cast<std::uint16_t*>(t.raw_data())[off] = core::double_to_half(nv, t.dtype());
  else
    static_cast<double*>(t.raw_data())[off] = nv;
}

/// The cpu backend with `fault` in op `op`; records the variants in which it changed a result.
class BrokenBackend : public compute::Backend {
 public:
  BrokenBackend(OpKind op, Fault fault) : op_(op), fault_(fault), inner_(create_cpu_backend()) {}
  std::string_view name() const noexcept override { return "broken-cpu"; }
  int num_threads() const noexcept override { return inner_->num_threads(); }
  void set_num_threads(int n) override { inner_->set_num_threads(n); }
  /// A decorator forwards its inner backend's (the cpu backend's oneDNN bf16 path declares one).
  compute::Capabilities capabilities() const noexcept override { return inner_->capabilities(); }

  void execute(const compute::OpCall& call) override {
    if (call.kind != op_) return inner_->execute(call);
    switch (fault_) {
      case Fault::Unsupported:
        throw Unsupported(
            detail::cat("broken-cpu: ", compute::op_name(op_), " is not supported (self-test)"));
      case Fault::IgnoreAccumulate: {
        compute::OpCall c = call;
        c.accumulate = false;
        inner_->execute(c);
        if (call.accumulate && has_elements(call)) broken_.insert(variant_);
        return;
      }
      case Fault::NarrowMasters: {
        inner_->execute(call);
        const core::Tensor* lead = compute::float_lead(call);
        if (!lead || !core::dtype_is_half(lead->dtype())) return;
        for (core::Tensor* t : call.out) {
          if (!t || t->dtype() != DType::F32 || t->numel() == 0) continue;
          Tensor c = t->contiguous();
          float* p = c.data<float>();
          bool changed = false;
          for (std::int64_t i = 0; i < c.numel(); ++i) {
            const float r = core::half_to_float(core::float_to_half(p[i], lead->dtype()), lead->dtype());
            changed = changed || r != p[i];
            p[i] = r;
          }
          t->copy_from(c);
          if (changed) broken_.insert(variant_);
        }
        return;
      }
      case Fault::PerturbStrided: {
        inner_->execute(call);
        bool view = false;
        for (const core::Tensor* t : call.in)
          view = view || (t && t->numel() > 0 && !t->is_contiguous());
        for (core::Tensor* t : call.out)
          view = view || (t && t->numel() > 0 && !t->is_contiguous());
        core::Tensor* first = nullptr;
        for (core::Tensor* t : call.out)
          if (t && !first) first = t;
        if (view && first && first->numel() > 0) {
          const DType call_dtype = call.in[0] ? call.in[0]->dtype() : first->dtype();
          // Well past each dtype's bound (a 16-bit output's includes one rounding, 2^-8 or 2^-11).
          perturb_largest(*first, core::dtype_is_half(call_dtype) ? 0x1p-4
                                  : call_dtype == DType::F32     ? 0x1p-8
                                                                 : 0x1p-30);
          broken_.insert(variant_);
        }
        return;
      }
    }
  }
  /// check_op's on_variant hook.
  void set_variant(std::size_t i) { variant_ = i; }
  const std::set<std::size_t>& broken_variants() const { return broken_; }

 private:
  static bool has_elements(const compute::OpCall& call) {
    for (const core::Tensor* t : call.out)
      if (t && t->numel() > 0) return true;
    return false;
  }
  OpKind op_;
  Fault fault_;
  std::unique_ptr<compute::Backend> inner_;
  std::size_t variant_ = 0;
  std::set<std::size_t> broken_;
};

struct Breakage {
  OpKind op;
  Fault fault;
};

TEST_CASE("conformance.selftest: a broken op fails exactly where it is broken", "[conformance]") {
  const Breakage b = GENERATE(Breakage{OpKind::Conv2dForward, Fault::PerturbStrided},
                              Breakage{OpKind::BatchNormBackwardReduce, Fault::PerturbStrided},
                              Breakage{OpKind::SoftmaxCrossEntropy, Fault::PerturbStrided},
                              Breakage{OpKind::LinearBackward, Fault::IgnoreAccumulate},
                              Breakage{OpKind::ChannelBroadcast, Fault::IgnoreAccumulate},
                              Breakage{OpKind::LayerNormForward, Fault::Unsupported},
                              // LayerNorm's statistics must stay f32; so must linear's dw and
                              // db on every backend (cpu declares no rounding of them, and cuda
                              // none of linear's: declared_rounding_test.cpp).
                              Breakage{OpKind::LayerNormForward, Fault::NarrowMasters},
                              Breakage{OpKind::LinearBackward, Fault::NarrowMasters});
  const DType dt = GENERATE(DType::F32, DType::F64, DType::BF16, DType::F16);
  // A 16-bit master changes nothing in an f32 or f64 call (it has none).
  if (b.fault == Fault::NarrowMasters && !core::dtype_is_half(dt)) return;
  INFO(compute::op_name(b.op) << " " << fault_name(b.fault) << ", " << core::dtype_name(dt));
  BrokenBackend be(b.op, b.fault);
  const Report r = check_op(be, b.op, dt, [&](std::size_t i) { be.set_variant(i); });
  INFO(r.details());
  const std::vector<Variant> variants = variants_of(find_case(b.op)->traits, b.op, dt);
  REQUIRE(r.results.size() == variants.size());
  if (b.fault == Fault::Unsupported) {
    REQUIRE(r.overall() == Outcome::Unsupported);  // reported as such, never as passed
    REQUIRE(r.count(Outcome::Unsupported) == int(variants.size()));
    return;
  }
  // The fault changed some results, only in the variants it targets, and exactly those fail.
  const std::set<std::size_t>& broken = be.broken_variants();
  REQUIRE(!broken.empty());
  REQUIRE(broken.size() < variants.size());
  for (std::size_t i = 0; i < variants.size(); ++i) {
    INFO("variant " << i << " [" << variants[i].name()
                    << "]: " << outcome_name(r.results[i].outcome) << " " << r.results[i].message);
    if (b.fault == Fault::PerturbStrided && broken.count(i))
      REQUIRE(variants[i].layout != Layout::Contiguous);
    if (b.fault == Fault::IgnoreAccumulate && broken.count(i)) REQUIRE(variants[i].accumulate);
    if (b.fault == Fault::NarrowMasters && broken.count(i)) REQUIRE(!variants[i].master_in_call_dtype);
    REQUIRE((r.results[i].outcome == Outcome::Fail) == (broken.count(i) == 1));
  }
  REQUIRE(r.overall() == Outcome::Fail);
}

TEST_CASE("conformance.selftest: the other ops pass through a broken backend", "[conformance]") {
  // The decorator is transparent for every op it does not break: the failure above is the op's.
  BrokenBackend be(OpKind::Conv2dForward, Fault::PerturbStrided);
  for (int k = 0; k < int(OpKind::kCount); ++k) {
    const OpKind op = static_cast<OpKind>(k);
    if (op == OpKind::Conv2dForward) continue;
    const Report r = check_op(be, op, DType::F32);
    INFO(r.details());
    REQUIRE(r.overall() == Outcome::Pass);
    REQUIRE(r.count(Outcome::Pass) == int(r.results.size()));
  }
  REQUIRE(be.broken_variants().empty());
}

TEST_CASE("conformance.selftest: a missing case fails", "[conformance]") {
  // An OpKind value past the table has no case: check_op must fail it, not pass it.
  BrokenBackend be(OpKind::Add, Fault::Unsupported);
  const Report r = check_op(be, OpKind::kCount, DType::F32);
  INFO(r.details());
  REQUIRE(r.overall() == Outcome::Fail);
  REQUIRE(r.missing_case.find("has no conformance case") != std::string::npos);
}

}  // namespace

// Hidden: ctest runs it as conformance.selftest.unsupported_is_skipped and requires the skip line
// (tests/CMakeLists.txt), proving that an unsupported backend × op × dtype reaches ctest as
// skipped.
TEST_CASE("conformance.selftest: an unsupported op is skipped, not passed", "[.conformance_skip]") {
  BrokenBackend be(OpKind::Add, Fault::Unsupported);
  run_conformance_case(be, OpKind::Add, DType::F32);  // prints the skip line ctest looks for
}

}  // namespace tessera::test::compute_conformance
