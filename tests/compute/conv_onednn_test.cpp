// The oneDNN pointwise convolutions (ConvAlgo::Onednn, conv_onednn.cpp), forced and through Auto,
// against the float64 reference: f32 at the suite's f32 tolerance, bf16 (16-bit activations, f32
// masters, through CpuBackend::execute) within a bound derived from the arithmetic; the same bits
// for any thread count; the errors of a forced Onednn that cannot run; the declared rounding.
#include <cmath>
#include <utility>
#include <vector>

#include "conv_test_util.hpp"
#include "support/views.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/half.hpp"

namespace tessera::test {
namespace {

using Catch::Matchers::Contains;
using compute::cpu::onednn_info;
using compute::cpu::onednn_runs;
using core::DType;
using core::Tensor;

constexpr double kGarbage = 55.0;  // exact in bf16: a window's neighbours must keep it

ref::Conv2d pointwise(int n, int cin, int h, int w, int cout, int groups) {
  return {n, cin, h, w, cout, 1, 1, 1, 1, 0, 0, 1, 1, groups};
}

// H·W below (63), equal to (1024) and not a multiple of (2145, 2049) the path's 1024-pixel block;
// one and three samples; groups 1 and 2; odd channels per group; a widening and a narrowing 1x1
// as in an inverted bottleneck (96→384→96, scaled down).
const std::vector<ref::Conv2d>& geometries() {
  static const std::vector<ref::Conv2d> g = {
      pointwise(1, 3, 7, 9, 5, 1),     pointwise(3, 6, 32, 32, 10, 2),
      pointwise(1, 12, 33, 65, 48, 1), pointwise(3, 4, 1, 2049, 6, 2),
      pointwise(3, 48, 7, 9, 12, 1),
  };
  return g;
}

// Activations (x, dy, the start dx0 of an accumulating dx) in the call's dtype; masters (w, b,
// the starts dw0, db0 of accumulating gradients) in f32, as the trainer passes them.
struct Data {
  std::vector<double> x, dy, dx0, w, b, dw0, db0;
};
Data make_data(const ref::Conv2d& c, DType t, std::uint64_t seed) {
  const std::size_t co = std::size_t(c.cout);
  return {values(c.x_size(), seed, t),      values(c.y_size(), seed + 1, t),
          values(c.x_size(), seed + 2, t),  values(c.w_size(), seed + 3, DType::F32),
          values(co, seed + 4, DType::F32), values(c.w_size(), seed + 5, DType::F32),
          values(co, seed + 6, DType::F32)};
}

// Every output of run(), as float64: dw/db overwritten and accumulated, dw alone (db null) too.
struct Outputs {
  std::vector<double> y, dx, dx_acc, dw, db, dw_acc, db_acc, dw_alone, dw_alone_acc;
};
using Field = std::vector<double> Outputs::*;
const std::pair<const char*, Field> kFields[] = {
    {"y", &Outputs::y},
    {"dx", &Outputs::dx},
    {"dx accumulated", &Outputs::dx_acc},
    {"dw", &Outputs::dw},
    {"db", &Outputs::db},
    {"dw accumulated", &Outputs::dw_acc},
    {"db accumulated", &Outputs::db_acc},
    {"dw without db", &Outputs::dw_alone},
    {"dw without db, accumulated", &Outputs::dw_alone_acc},
};

// An (N, C, H, W) activation: contiguous, or channels [2, 2 + C) of a tensor 3 channels wider
// (planes contiguous, N stride (C + 3)·H·W) whose other channels hold garbage.
struct Act {
  Tensor t, parent;
  bool narrowed = false;
};
Act activation(const std::vector<double>& v, const core::Shape& s, DType t, bool narrowed) {
  const Tensor dense = from_doubles(v, s, t);
  if (!narrowed) return {dense, dense, false};
  Tensor parent = Tensor::empty({s[0], s[1] + 3, s[2], s[3]}, t);
  parent.fill(kGarbage);
  Tensor view = parent.narrow(1, 2, s[1]);
  view.copy_from(dense);
  return {view, parent, true};
}

// The channels of a narrowed activation's parent outside its window still hold the garbage.
bool garbage_kept(const Act& a) {
  if (!a.narrowed) return true;
  const std::vector<double> v = to_doubles(a.parent);
  const std::int64_t plane = a.parent.size(2) * a.parent.size(3), cs = a.parent.size(1);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::int64_t ch = std::int64_t(i) / plane % cs;
    if ((ch < 2 || ch >= cs - 1) && v[i] != kGarbage) return false;
  }
  return true;
}

std::vector<double> garbage(std::size_t n) { return std::vector<double>(n, kGarbage); }

// Forward (with bias) and backward-data (overwriting, accumulating) through the typed entry
// points (CpuBackend::execute), on contiguous or channel-narrowed activations.
void run_data(CpuBackend& be, const ref::Conv2d& c, const Data& d, DType t, bool narrowed,
              Outputs& o) {
  const Conv2dParams p = params_of(c);
  const core::Shape xs{c.n, c.cin, c.h, c.w}, ys{c.n, c.cout, c.h, c.w};
  const Tensor w = from_doubles(d.w, {c.cout, c.cin / c.groups, 1, 1}, DType::F32);
  const Tensor b = from_doubles(d.b, {c.cout}, DType::F32);
  const Act x = activation(d.x, xs, t, narrowed), dy = activation(d.dy, ys, t, narrowed);
  Act y = activation(garbage(c.y_size()), ys, t, narrowed);
  compute::conv2d_forward(be, p, x.t, w, &b, y.t);
  Act dx = activation(garbage(c.x_size()), xs, t, narrowed);
  compute::conv2d_backward_data(be, p, dy.t, w, dx.t, false);
  Act dx_acc = activation(d.dx0, xs, t, narrowed);
  compute::conv2d_backward_data(be, p, dy.t, w, dx_acc.t, true);
  REQUIRE(garbage_kept(y));
  REQUIRE(garbage_kept(dx));
  REQUIRE(garbage_kept(dx_acc));
  o.y = to_doubles(y.t), o.dx = to_doubles(dx.t), o.dx_acc = to_doubles(dx_acc.t);
}

// Backward-weight with and without db, overwriting and accumulating (dw, db f32 masters).
void run_weight(CpuBackend& be, const ref::Conv2d& c, const Data& d, DType t, bool narrowed,
                Outputs& o) {
  const Conv2dParams p = params_of(c);
  const Act x = activation(d.x, {c.n, c.cin, c.h, c.w}, t, narrowed);
  const Act dy = activation(d.dy, {c.n, c.cout, c.h, c.w}, t, narrowed);
  const core::Shape ws{c.cout, c.cin / c.groups, 1, 1}, bs{c.cout};
  auto grads = [&](bool with_db, bool acc, std::vector<double>& dw_out,
                   std::vector<double>* db_out) {
    Tensor dw = from_doubles(acc ? d.dw0 : garbage(c.w_size()), ws, DType::F32);
    Tensor db = from_doubles(acc ? d.db0 : garbage(std::size_t(c.cout)), bs, DType::F32);
    compute::conv2d_backward_weight(be, p, x.t, dy.t, dw, with_db ? &db : nullptr, acc);
    dw_out = to_doubles(dw);
    if (db_out) *db_out = to_doubles(db);
  };
  grads(true, false, o.dw, &o.db);
  grads(true, true, o.dw_acc, &o.db_acc);
  grads(false, false, o.dw_alone, nullptr);
  grads(false, true, o.dw_alone_acc, nullptr);
}

Outputs run(CpuBackend& be, const ref::Conv2d& c, const Data& d, DType t, bool narrowed) {
  Outputs o;
  run_data(be, c, d, t, narrowed, o);
  run_weight(be, c, d, t, narrowed, o);
  return o;
}

std::vector<double> plus(std::vector<double> a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// The masters as a call of dtype t takes them: bf16 rounds them (rounds_master_to_call_dtype).
std::vector<double> as_call_dtype(std::vector<double> v, DType t) {
  if (t == DType::BF16)
    for (double& e : v) e = core::half_to_float(core::double_to_half(e, t), t);
  return v;
}

// The float64 reference on the data as the path uses it, start values added where accumulating.
Outputs expected(const ref::Conv2d& c, const Data& d, DType t) {
  const std::vector<double> w = as_call_dtype(d.w, t), b = as_call_dtype(d.b, t);
  const ref::Conv2dGrads g = ref::conv2d_backward(c, d.x, w, d.dy);
  Outputs o;
  o.y = ref::conv2d_forward(c, d.x, w, b);
  o.dx = g.dx, o.dx_acc = plus(d.dx0, g.dx);
  o.dw = o.dw_alone = g.dw, o.db = g.db;
  o.dw_acc = o.dw_alone_acc = plus(d.dw0, g.dw), o.db_acc = plus(d.db0, g.db);
  return o;
}

// The bf16 bound. x, dy and the bf16-rounded w and b are bf16 numbers: a product of two has at
// most 16 significant bits, exact in f32. The path sums an output's m terms (Cin/g products and
// the bias for y, Cout/g products for dx, N·H·W for dw and db, plus the start value when
// accumulating) in f32, in whatever order and blocking oneDNN and the thread partials take:
// within γ_{m−1}·Σ|terms| of the exact sum (Higham §4.2, u = 2^-24). We allow γ_{m+1} (room for
// the start value) plus the float64 reference's own γ_m. y and dx are then rounded once to bf16:
// |ŷ − y| ≤ b + 2^-8·(|y| + b) + 2^-126 (binary32 subnormals narrow to zero). dw and db stay f32.
double gamma(std::int64_t m) { return gamma_bound(DType::F32, m + 1) + gamma_bound(DType::F64, m); }

std::vector<double> rounded_once(std::vector<double> b, const std::vector<double>& y) {
  const double u = std::ldexp(1.0, -8), eta = std::ldexp(1.0, -126);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] += u * (std::abs(y[i]) + b[i]) + eta;
  return b;
}

// b + g·|start| (the start value of an accumulating output is one more term of its sum).
std::vector<double> with_start(std::vector<double> b, const std::vector<double>& start, double g) {
  for (std::size_t i = 0; i < b.size(); ++i) b[i] += g * std::abs(start[i]);
  return b;
}

Outputs bf16_bounds(const ref::Conv2d& c, const Data& d, const Outputs& want) {
  const DType t = DType::BF16;
  const ref::Conv2dBounds s =
      ref::conv2d_bounds(c, d.x, as_call_dtype(d.w, t), as_call_dtype(d.b, t), d.dy, gamma);
  const double g_dx = gamma(c.cout / c.groups), g_dw = gamma(std::int64_t(c.n) * c.h * c.w);
  Outputs o;
  o.y = rounded_once(s.y, want.y);
  o.dx = rounded_once(s.dx, want.dx);
  o.dx_acc = rounded_once(with_start(s.dx, d.dx0, g_dx), want.dx_acc);
  o.dw = o.dw_alone = s.dw, o.db = s.db;
  o.dw_acc = o.dw_alone_acc = with_start(s.dw, d.dw0, g_dw);
  o.db_acc = with_start(s.db, d.db0, g_dw);
  return o;
}

// f32: the suite's tensor-scaled 1e-5; bf16: element-wise within `bound`.
void check(const Outputs& got, const Outputs& want, const Outputs* bound) {
  for (const auto& [name, f] : kFields) {
    INFO("output " << name);
    if (bound)
      REQUIRE_WITHIN(got.*f, want.*f, bound->*f);
    else
      REQUIRE_CLOSE(got.*f, want.*f, 1e-5);
  }
}

// Every geometry, contiguous and channel-narrowed, forced Onednn and Auto, on 1, 2 and 3
// threads: within the reference's bound; y and dx the same bits for every thread count, both
// algorithms (Auto takes the same path) and both layouts; the weight gradient, whose partials
// follow the thread count, the same bits when the same backend runs it again.
void check_all(DType t) {
  std::uint64_t seed = 500;
  for (const ref::Conv2d& c : geometries()) {
    const Data d = make_data(c, t, seed += 10);
    const Outputs want = expected(c, d, t);
    const Outputs bound = t == DType::BF16 ? bf16_bounds(c, d, want) : Outputs{};
    Outputs first;  // y and dx of the first run: every other run gives their bits
    for (bool narrowed : {false, true}) {
      for (ConvAlgo algo : {ConvAlgo::Onednn, ConvAlgo::Auto})
        for (int threads : {1, 2, 3}) {
          INFO(core::dtype_name(t)
               << ", " << describe(c) << (narrowed ? ", channel-narrowed" : "") << ", "
               << compute::cpu::conv_algo_name(algo) << ", " << threads << " threads");
          CpuBackend be(threads);
          be.force_conv_algo(algo);
          const Outputs got = run(be, c, d, t, narrowed);
          check(got, want, t == DType::BF16 ? &bound : nullptr);
          if (first.y.empty()) first = got;
          REQUIRE(got.y == first.y);
          REQUIRE(got.dx == first.dx);
          REQUIRE(got.dx_acc == first.dx_acc);
          Outputs again;
          run_weight(be, c, d, t, narrowed, again);
          for (Field f : {&Outputs::dw, &Outputs::db, &Outputs::dw_acc, &Outputs::db_acc,
                          &Outputs::dw_alone, &Outputs::dw_alone_acc})
            REQUIRE(again.*f == got.*f);
        }
    }
  }
}

TEST_CASE("oneDNN pointwise convolutions in f32 match the float64 reference",
          "[compute][conv][onednn]") {
  if (!onednn_runs(DType::F32))
    TESSERA_SKIP("the oneDNN path does not run f32 here: "
                 << (onednn_info().built ? "no f32 matmul, or switched off by TESSERA_CPU_ONEDNN=0"
                                         : onednn_info().why_not_bf16));
  for (const ref::Conv2d& c : geometries()) {  // Auto's pick for these calls
    INFO(describe(c));
    const Tensor x = Tensor::zeros({c.n, c.cin, c.h, c.w});
    REQUIRE(CpuBackend::pick_conv_algo(params_of(c), x,
                                       Tensor::zeros({c.cout, c.cin / c.groups, 1, 1})) ==
            ConvAlgo::Onednn);
  }
  check_all(DType::F32);
}

TEST_CASE("oneDNN pointwise convolutions in bf16 are within the bound of f32 sums",
          "[compute][conv][onednn][half]") {
  if (!onednn_runs(DType::BF16))
    TESSERA_SKIP(
        "bf16 convolutions do not run through oneDNN here: " << onednn_info().why_not_bf16);
  check_all(DType::BF16);
}

TEST_CASE("a forced oneDNN convolution that cannot run says what it needs",
          "[compute][conv][onednn]") {
  CpuBackend be(2);
  be.force_conv_algo(ConvAlgo::Onednn);
  const ref::Conv2d c = pointwise(2, 4, 5, 6, 6, 1);
  auto call = [&](DType t, int k) {
    Conv2dParams p = params_of(c);
    p.kernel_h = p.kernel_w = k, p.pad_h = p.pad_w = k / 2;
    const Tensor x = Tensor::zeros({c.n, c.cin, c.h, c.w}, t);
    const Tensor w = Tensor::zeros({c.cout, c.cin, k, k}, t == DType::F64 ? t : DType::F32);
    Tensor y = Tensor::zeros({c.n, c.cout, c.h, c.w}, t);
    return error_of<InvalidArgument>([&] { compute::conv2d_forward(be, p, x, w, nullptr, y); });
  };
  const std::string f64 = call(DType::F64, 1), k3 = call(DType::F32, 3);
  REQUIRE_THAT(f64, Contains("algorithm 'onednn' does not apply"));
  REQUIRE_THAT(f64,
               Contains(onednn_info().built ? "dtype f32, or bf16 on a CPU with bf16 instructions"
                                            : "a build with oneDNN"));
  REQUIRE_THAT(k3, Contains("algorithm 'onednn' does not apply"));
  REQUIRE_THAT(k3, Contains("a 1x1 kernel, stride 1, no padding"));
  if (!onednn_runs(DType::BF16)) {  // else bf16 runs (the bf16 test case checks it)
    const std::string bf16 = call(DType::BF16, 1);
    REQUIRE_THAT(bf16, Contains("algorithm 'onednn' does not apply"));
    REQUIRE_THAT(bf16, Contains(onednn_info().built ? "bf16 on a CPU with bf16 instructions"
                                                    : "a build with oneDNN"));
  }
}

TEST_CASE("the cpu backend declares the bf16 rounding of its oneDNN path",
          "[compute][conv][onednn]") {
  CpuBackend be(2);
  // Auto sends bf16 pointwise convolutions to oneDNN, which rounds the f32 masters to bf16.
  REQUIRE(be.capabilities().rounds_master_to_call_dtype == onednn_runs(DType::BF16));
  // The Eigen and row kernels compute bf16 calls in f32 on the f32 masters: nothing to declare.
  for (ConvAlgo algo : {ConvAlgo::Generic, ConvAlgo::Pointwise, ConvAlgo::Im2col}) {
    be.force_conv_algo(algo);
    REQUIRE_FALSE(be.capabilities().rounds_master_to_call_dtype);
  }
}

}  // namespace
}  // namespace tessera::test
