// The compute conformance suite (as ggml's test-backend-ops): every op of compute::OpKind, in
// every float dtype, in contiguous, narrowed and strided layouts, at odd and empty sizes, with and
// without accumulation, checked against the float64 references of tests/support/reference on
// every compute backend of the registry. tests/compute/README.md says how a backend plugs in.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support/reference/ops_ref.hpp"
#include "support/views.hpp"
#include "tessera/core/half.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/compute/ops.hpp"

namespace tessera::test::compute_conformance {

using core::DType;
using core::Shape;
using core::Tensor;
using ref::Vec;

/// |v| element by element (the magnitudes a rounding bound is taken of).
inline Vec abs_of(Vec v) {
  for (double& e : v) e = std::abs(e);
  return v;
}
/// v·s element by element.
inline Vec scaled(Vec v, double s) {
  for (double& e : v) e *= s;
  return v;
}
/// v rounded to `dt` (to nearest, once; unchanged for f64).
inline Vec rounded(Vec v, DType dt) {
  if (dt == DType::F32)
    for (double& e : v) e = float(e);
  if (core::dtype_is_half(dt))
    for (double& e : v) e = core::half_to_float(core::double_to_half(e, dt), dt);
  return v;
}

/// The float dtypes every op is checked in. bf16 and f16 calls store their Float tensors in 16 bits
/// and compute in f32 (core::accumulate_dtype); their Master slots hold f32 (see Ctx::master).
inline constexpr DType kDTypes[] = {DType::F32, DType::F64, DType::BF16, DType::F16};

/// The extents of a variant: odd sizes (3, 7, 17, 33: no multiple of a vector width), every dim
/// 1, or one dim 0 where the op's contract allows it (the batch, or the width / last dim).
enum class Size { Odd, Unit, EmptyBatch, EmptyWidth };
const char* size_name(Size s);

/// One way of calling an op.
struct Variant {
  Layout layout = Layout::Contiguous;
  Size size = Size::Odd;
  bool accumulate = false;
  /// In a bf16/f16 call: the Master slots (parameters, their gradients, statistics) in the call's
  /// dtype instead of f32 (Ctx::master).
  bool master_in_call_dtype = false;
  /// "stride 2, odd sizes, accumulate".
  std::string name() const;
  /// Batch extent (3 or `odd`, 1 or 0), width / last-dim extent (`odd`, 1 or 0), other extents
  /// (`odd` or 1).
  int n() const { return batch(3); }
  int batch(int odd) const { return size == Size::Unit ? 1 : size == Size::EmptyBatch ? 0 : odd; }
  int w(int odd) const { return size == Size::Unit ? 1 : size == Size::EmptyWidth ? 0 : odd; }
  int dim(int odd) const { return size == Size::Unit ? 1 : odd; }
};

/// What an op's contract lets the suite vary.
struct Traits {
  bool strided = true;      ///< inputs and outputs may be views (else contiguous only)
  bool accumulate = false;  ///< the op has an accumulate flag
  bool empty_batch = true;  ///< a 0 batch is valid
  bool empty_width = true;  ///< a 0 width / last dim is valid
};
/// The variants run for an op with these traits: every layout at odd sizes, contiguous and
/// stride 2 at unit sizes, contiguous at each allowed empty size; each with accumulate off and on
/// where the op has it.
std::vector<Variant> variants_of(const Traits& t);
/// The variants check_op runs for `op` in `dtype`: variants_of(t) for f32 and f64; for bf16/f16
/// (whose every call goes through the same widening on the cpu backend) contiguous and stride 2 at
/// odd sizes, unit and empty sizes as in f32, accumulate as in f32, and, for an op with Master
/// slots, the odd contiguous variant again with them in the call's dtype.
std::vector<Variant> variants_of(const Traits& t, compute::OpKind op, DType dtype);

/// Whether the op table defines calls of `op` in `dtype`: not the 16-bit dtypes of an op with
/// Index slots (top-k's pairs have no 16-bit width). The suite registers no case for those.
bool op_has_dtype(compute::OpKind op, DType dtype);

/// Thrown by a check on a mismatch; the message names the tensor, the worst element and its bound.
class CheckFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One variant being run: makes tensors in the backend's memory in the variant's layout, compares
/// outputs with the reference, and at the end checks that no input was written and no output was
/// written outside its window.
class Ctx {
 public:
  Ctx(compute::Backend& backend, DType dtype, Variant variant)
      : backend(backend), dtype(dtype), variant(variant) {}
  compute::Backend& backend;
  const DType dtype;
  const Variant variant;

  /// n values uniform in [lo, hi), rounded to the dtype.
  Vec values(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) const {
    return test::values(n, seed, dtype, lo, hi);
  }
  /// The dtype of the call's Master slots (parameters, their gradients, normalisation
  /// statistics): f32 in a bf16/f16 call, as the trainer passes them (the call's dtype in the
  /// master_in_call_dtype variant); the call's dtype in f32 and f64 calls.
  DType master() const {
    return core::dtype_is_half(dtype) && !variant.master_in_call_dtype ? DType::F32 : dtype;
  }
  /// Values for a Master slot: uniform in [lo, hi), rounded to master().
  Vec master_values(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) const {
    return test::values(n, seed, master(), lo, hi);
  }
  /// A Master input / output (master()'s dtype, in the variant's layout).
  Tensor master_input(const Vec& v, const Shape& shape) { return input(v, shape, master()); }
  Tensor master_output(const Shape& shape, const Vec& init = {}) {
    return output(shape, master(), variant.layout, init);
  }
  /// An input holding `v` (row-major), in the variant's layout or in `layout`.
  Tensor input(const Vec& v, const Shape& shape) { return input(v, shape, variant.layout); }
  Tensor input(const Vec& v, const Shape& shape, Layout layout) {
    return input(v, shape, dtype, layout);
  }
  /// An input of another float dtype (the f64 sums some ops take), in the variant's layout.
  Tensor input(const Vec& v, const Shape& shape, DType dt) {
    return input(v, shape, dt, variant.layout);
  }
  Tensor input(const Vec& v, const Shape& shape, DType dt, Layout layout);
  /// An i64 input (contiguous).
  Tensor input_i64(const std::vector<std::int64_t>& v, const Shape& shape);
  /// The integer dtype of the call's Index slots (top-k's pairs): i32 in an f32 call, i64 in f64.
  DType index_dtype() const { return dtype == DType::F32 ? DType::I32 : DType::I64; }
  /// A vector of index_dtype() slots holding `v` (each an index, or a value's bits; contiguous).
  Tensor index_input(const std::vector<std::int64_t>& v);
  /// A vector of n index_dtype() slots holding garbage (contiguous).
  Tensor index_output(std::int64_t n);
  /// The slots of an index_dtype() vector made by this Ctx, read back to the host.
  std::vector<std::int64_t> read_slots(const Tensor& t) const;
  /// An output in the variant's layout holding garbage, or `init` (accumulated into, in place).
  Tensor output(const Shape& shape, const Vec& init = {}) {
    return output(shape, dtype, variant.layout, init);
  }
  /// An f64 reduction output (contiguous).
  Tensor output_f64(const Shape& shape, const Vec& init = {}) {
    return output(shape, DType::F64, Layout::Contiguous, init);
  }
  Tensor output(const Shape& shape, DType dt, Layout layout, const Vec& init);

  /// Throws CheckFailure unless every element of `out` is within bound[i] of ref[i]. `bound` is
  /// the bound of the arithmetic (f32's for a bf16/f16 call); an `out` of bf16/f16 adds its one
  /// rounding: |fl(y') − y| ≤ b + u·(|y| + b) + η with y' the f32 result within b of y, u the
  /// 16-bit unit roundoff (2^-8 bf16, 2^-11 f16) and η the absolute error near zero (f16: half
  /// its smallest subnormal, 2^-25; bf16: 2^-126, binary32 subnormals narrow to zero). A bound of
  /// 0 (a value moved or converted, exact) stays 0.
  void expect_within(const char* what, const Tensor& out, const Vec& ref, const Vec& bound);
  /// Throws CheckFailure unless max|out − ref| ≤ rtol·max|ref| (for the few composite ops whose
  /// element-wise bound is not worth deriving; rtol is the existing op tests' rtol_of of the
  /// arithmetic, rtol()). A bf16/f16 `out` adds its one rounding, as in expect_within.
  void expect_close(const char* what, const Tensor& out, const Vec& ref, double rtol);
  /// Throws CheckFailure if an input's buffer changed or an output's changed outside its window.
  void check_guards();

  /// The relative error bound of an m-term sum in the call's dtype, plus the float64
  /// reference's own (γ_m of f64): Higham's γ, see gamma_bound.
  double gamma(std::int64_t m) const;
  /// The unit roundoff of the call's arithmetic: f64's, or f32's for f32, bf16 and f16 calls.
  double unit_roundoff() const;
  /// The unit roundoff u of the rounding a backend that declares
  /// compute::Capabilities::rounds_master_to_call_dtype applies to the f32 Master operands and
  /// gradients of conv2d and linear: the call's 16-bit unit roundoff in a bf16/f16 call whose
  /// Master slots are f32 on such a backend, else 0 (the op table's definition: nothing rounded
  /// but the 16-bit outputs). cases_conv.cpp derives the error it adds.
  double master_rounding() const;
  /// `bound` (within which an f32 Master gradient is computed, before anything is accumulated into
  /// it) plus its one rounding to the call's dtype, where master_rounding() is not 0:
  /// b + u·(|ref| + b) + η, as a 16-bit output's (expect_within).
  Vec with_master_rounding(const Vec& ref, Vec bound) const;
  /// The op tests' tensor-scaled tolerance of the call's arithmetic (rtol_of of f32 or f64).
  double rtol() const { return rtol_of(core::accumulate_dtype(dtype)); }
  /// The largest error of the comparisons so far as a share of its bound (1 = at the bound).
  double worst_share() const { return worst_share_; }

 private:
  struct Tracked {
    Tensor window, base;                // in the backend's memory
    std::vector<unsigned char> before;  // base's bytes when made
    std::vector<std::size_t> offsets;   // byte offsets of the window's elements in base (outputs)
    bool is_output = false;
  };
  const Tracked& find(const Tensor& t) const;
  Tensor track(const View& host, bool is_output);
  std::vector<Tracked> tracked_;
  double worst_share_ = 0;
};

/// One op's conformance case: what it may vary and the check of one variant (a function that
/// calls the op's typed entry point on ctx.backend and compares every output).
struct OpCase {
  compute::OpKind op;
  Traits traits;
  std::function<void(Ctx&)> run;
};

/// The cases, one list per file; all_cases() joins them (the one explicit list).
std::vector<OpCase> conv_cases();
std::vector<OpCase> linear_norm_cases();
std::vector<OpCase> pointwise_cases();
std::vector<OpCase> loss_optim_cases();
std::vector<OpCase> topk_cases();
const std::vector<OpCase>& all_cases();
/// The case of `op`, or null when the op has none (the suite then fails for it).
const OpCase* find_case(compute::OpKind op);

enum class Outcome { Pass, Unsupported, Fail };
const char* outcome_name(Outcome o);

struct VariantResult {
  Variant variant;
  Outcome outcome = Outcome::Pass;
  std::string message;     ///< the failure, or the backend's Unsupported message
  double worst_share = 0;  ///< of a passed variant: its largest error as a share of the bound
};

/// What check_op found for one backend × op × dtype.
struct Report {
  std::string backend;
  compute::OpKind op{};
  DType dtype{};
  std::vector<VariantResult> results;
  std::string missing_case;  ///< set when the op has no conformance case (a failure)

  int count(Outcome o) const;
  /// The largest worst_share of the passed variants (how close the backend came to the bounds).
  double worst_share() const;
  /// Fail when a variant failed or the case is missing; Unsupported when every variant was
  /// unsupported; Pass otherwise (some variants may still be unsupported: see count()).
  Outcome overall() const;
  /// "cpu add f32" and one line per failed or unsupported variant.
  std::string title() const;
  std::string details() const;
};

/// Runs every variant of `op`'s case in `dtype` on `backend`. A variant whose call throws
/// Unsupported is reported unsupported; CheckFailure or any other exception is a failure.
/// `on_variant(i)` (optional) is called before variant i runs (the self-tests use it).
Report check_op(compute::Backend& backend, compute::OpKind op, DType dtype,
                const std::function<void(std::size_t)>& on_variant = {});

/// The body of each test "conformance.<backend>.<op>.<dtype>": check_op, a line "unsupported:
/// <backend> <op> <dtype> [<variant>]: <message>" per unsupported variant, a failure for a failed
/// variant or for an Unsupported that must_support forbids, and TESSERA_SKIP (ctest: skipped) when
/// no variant ran.
void run_conformance_case(compute::Backend& backend, compute::OpKind op, DType dtype);

/// True when `backend` must support `op` in `dtype` (its Unsupported there is a failure, not a
/// skip): cpu must support every op in f32 and f64, cuda-kernels@host every op but the
/// convolutions and linear_forward / linear_backward (cuDNN / cuBLAS calls of the cuda backend),
/// cuda every op in f32 and every op but the convolutions in f64.
bool must_support(std::string_view backend, compute::OpKind op, DType dtype);

/// Threads every backend of the suite is created with.
inline constexpr int kThreads = 2;

/// The cpu backend with kThreads threads: the inner backend of the suite's test decorators.
std::unique_ptr<compute::Backend> create_cpu_backend();

// ---- the host ↔ backend transfer: the one place a device backend adds its memory -------------
/// A contiguous copy of the contiguous host tensor `host` in `backend`'s memory.
Tensor to_backend(compute::Backend& backend, const Tensor& host);
/// A contiguous host copy of the contiguous backend tensor `t`.
Tensor to_host(compute::Backend& backend, const Tensor& t);

}  // namespace tessera::test::compute_conformance
