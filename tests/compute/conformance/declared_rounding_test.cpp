// The conformance suite bounds a backend by the arithmetic it declares
// (compute::Capabilities::rounds_master_to_call_dtype): a decorator around the cpu backend that
// rounds the way the cuda backend does in a 16-bit conv2d or linear call with f32 Master tensors
// must pass those ops' cases when it declares it, and fail them when it does not.
#include <array>
#include <memory>

#include "compute/conformance/conformance.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/compute/op_table.hpp"

namespace tessera::test::compute_conformance {
namespace {

using compute::OpKind;

/// An f32 tensor's values rounded to the 16-bit `dt` once (core/half.hpp), stored in f32.
void round_through(Tensor& f32, DType dt) {
  float* p = f32.data<float>();
  for (std::int64_t i = 0; i < f32.numel(); ++i)
    p[i] = core::half_to_float(core::float_to_half(p[i], dt), dt);
}
/// A contiguous copy of the f32 tensor `t` rounded to `dt`.
Tensor rounded_copy(const Tensor& t, DType dt) {
  Tensor c = t.clone(core::MemCategory::Workspace);
  round_through(c, dt);
  return c;
}

/// The cpu backend with the cuda backend's arithmetic (backends/compute/cuda/README.md, "Mixed
/// precision"): in a bf16/f16 call, an f32 weight and bias of conv2d_forward, conv2d_backward_data,
/// linear_forward and linear_backward are rounded to the call's dtype before the cpu op runs (the
/// scratch copy cuDNN / cuBLAS take), and conv2d_backward_weight's f32 dw and db are computed into
/// scratch, rounded to the call's dtype, then copied (accumulate: added in f32) into dw and db
/// (cuDNN's 16-bit filter and bias gradients, widened). linear_backward's dw and db stay f32.
/// It declares rounds_master_to_call_dtype or not, as constructed.
class CudaRoundingCpu final : public compute::Backend {
 public:
  explicit CudaRoundingCpu(bool declares) : declares_(declares), inner_(create_cpu_backend()) {}
  std::string_view name() const noexcept override { return "cuda-rounding-cpu"; }
  int num_threads() const noexcept override { return inner_->num_threads(); }
  void set_num_threads(int n) override { inner_->set_num_threads(n); }
  compute::Capabilities capabilities() const noexcept override {
    return {.rounds_master_to_call_dtype = declares_};
  }

  void execute(const compute::OpCall& call) override {
    const Tensor* lead = compute::float_lead(call);
    if (!lead || !core::dtype_is_half(lead->dtype())) return inner_->execute(call);
    const DType dt = lead->dtype();
    switch (call.kind) {
      case OpKind::Conv2dForward:
      case OpKind::LinearForward:  // in: x, w, bias
        return with_rounded(call, dt, 1, 2);
      case OpKind::Conv2dBackwardData:  // in: dy, w
        return with_rounded(call, dt, 1, -1);
      case OpKind::LinearBackward:  // in: dy, x, w
        return with_rounded(call, dt, 2, -1);
      case OpKind::Conv2dBackwardWeight:
        return gradients_rounded(call, dt);
      default:
        return inner_->execute(call);
    }
  }

 private:
  /// Runs `call` with its f32 inputs w_slot and bias_slot (-1: none) replaced by rounded copies.
  void with_rounded(const compute::OpCall& call, DType dt, int w_slot, int bias_slot) {
    compute::OpCall c = call;
    std::array<Tensor, 2> copies;
    int k = 0;
    for (int slot : {w_slot, bias_slot}) {
      if (slot < 0) continue;
      const Tensor* t = call.in[std::size_t(slot)];
      if (t && t->dtype() == DType::F32) {
        copies[std::size_t(k)] = rounded_copy(*t, dt);
        c.in[std::size_t(slot)] = &copies[std::size_t(k++)];
      }
    }
    inner_->execute(c);
  }
  /// conv2d_backward_weight with f32 dw (and db): computed into scratch, rounded, widened in.
  void gradients_rounded(const compute::OpCall& call, DType dt) {
    if (call.out[0]->dtype() != DType::F32) return inner_->execute(call);
    compute::OpCall c = call;
    c.accumulate = false;
    std::array<Tensor, 2> scratch;
    for (std::size_t k = 0; k < 2; ++k)
      if (call.out[k]) {
        scratch[k] = Tensor::empty(call.out[k]->shape(), DType::F32, core::MemCategory::Workspace);
        c.out[k] = &scratch[k];
      }
    inner_->execute(c);
    for (std::size_t k = 0; k < 2; ++k) {
      if (!call.out[k]) continue;
      round_through(scratch[k], dt);
      if (call.accumulate)
        call.out[k]->add_from(scratch[k]);
      else
        call.out[k]->copy_from(scratch[k]);
    }
  }

  bool declares_;
  std::unique_ptr<compute::Backend> inner_;
};

constexpr OpKind kLibraryOps[] = {OpKind::Conv2dForward, OpKind::Conv2dBackwardData,
                                  OpKind::Conv2dBackwardWeight, OpKind::LinearForward,
                                  OpKind::LinearBackward};

TEST_CASE("conformance.declared_rounding: the declared rounding is bounded, and only it",
          "[conformance]") {
  const OpKind op =
      GENERATE(OpKind::Conv2dForward, OpKind::Conv2dBackwardData, OpKind::Conv2dBackwardWeight,
               OpKind::LinearForward, OpKind::LinearBackward);
  const DType dt = GENERATE(DType::BF16, DType::F16);
  INFO(compute::op_name(op) << " " << core::dtype_name(dt));
  const std::vector<Variant> variants = variants_of(find_case(op)->traits, op, dt);

  // Declared: within the bound its rounding implies, in every variant.
  CudaRoundingCpu declared(true);
  const Report pass = check_op(declared, op, dt);
  INFO(pass.details());
  REQUIRE(pass.count(Outcome::Pass) == int(variants.size()));

  // Undeclared: held to the definition's bound, which the same results exceed where the Master
  // tensors are f32; with them in the call's dtype nothing is rounded and every variant passes.
  CudaRoundingCpu undeclared(false);
  const Report fail = check_op(undeclared, op, dt);
  INFO(fail.details());
  REQUIRE(fail.overall() == Outcome::Fail);
  for (std::size_t i = 0; i < variants.size(); ++i)
    if (variants[i].master_in_call_dtype) REQUIRE(fail.results[i].outcome == Outcome::Pass);
}

TEST_CASE("conformance.declared_rounding: f32 and f64 calls round nothing", "[conformance]") {
  // The decorator changes only 16-bit calls: declared or not, the f32/f64 bounds hold.
  const DType dt = GENERATE(DType::F32, DType::F64);
  for (OpKind op : kLibraryOps) {
    CudaRoundingCpu declared(true);
    const Report r = check_op(declared, op, dt);
    INFO(r.details());
    REQUIRE(r.overall() == Outcome::Pass);
  }
}

}  // namespace
}  // namespace tessera::test::compute_conformance
