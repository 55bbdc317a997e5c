// The cuda backend's own kernels (backends/compute/cuda/kernels) beyond what the conformance suite
// checks: View offsets and coalesce against core's tensors, the tensor helpers behind
// copy_from / add_from / fill, the label check of softmax_cross_entropy, and the execution model's
// promises — the same bits whatever order a pass's items run in, workspace requested at most once
// per op and before its first pass — and the top-k ops against the cpu backend bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/pass.hpp"
#include "support/reference/ops_ref.hpp"
#include "support/test_utils.hpp"
#include "support/views.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/compute/cuda_kernels.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/half.hpp"

namespace tessera::test {
namespace {

namespace kn = compute::cuda::kernels;
using core::DType;
using core::Shape;
using core::Tensor;

/// v rounded to dt.
std::vector<double> rounded_copy(std::vector<double> v, DType dt) {
  if (dt == DType::F32)
    for (double& e : v) e = float(e);
  return v;
}

/// The address of row-major element i of t, walking its shape and strides.
const char* address_of(const Tensor& t, std::int64_t i) {
  std::int64_t off = 0;
  for (int d = t.ndim() - 1; d >= 0; --d) {
    off += (i % t.size(d)) * t.stride(d);
    i /= t.size(d);
  }
  return static_cast<const char*>(t.raw_data()) + off * std::int64_t(core::dtype_size(t.dtype()));
}

TEST_CASE("cuda kernels: View offsets and coalesce name the tensor's elements", "[cuda_kernels]") {
  const Layout layout =
      GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::NarrowChannels, Layout::StrideTwo);
  INFO(layout_name(layout));
  const Shape shape{2, 3, 5, 7};
  const Tensor a = make(random_doubles(210, 1), shape, DType::F32, layout);
  const Tensor b = make(random_doubles(210, 2), shape, DType::F32);
  kn::View<const float> va = kn::make_view<const float>(a), vb = kn::make_view<const float>(b);
  REQUIRE(va.numel() == a.numel());
  for (std::int64_t i = 0; i < a.numel(); ++i)
    REQUIRE(reinterpret_cast<const char*>(&va.at(i)) == address_of(a, i));
  kn::coalesce(va, vb);
  REQUIRE(va.numel() == a.numel());
  REQUIRE(va.ndim == vb.ndim);
  if (layout == Layout::Contiguous || layout == Layout::StrideTwo) REQUIRE(va.ndim == 1);
  if (layout == Layout::NarrowLast) REQUIRE(va.ndim == 2);  // (30, 7) rows 10 apart
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    REQUIRE(reinterpret_cast<const char*>(&va.at(i)) == address_of(a, i));
    REQUIRE(reinterpret_cast<const char*>(&vb.at(i)) == address_of(b, i));
  }
  // Extent-1 dims drop out; an all-ones shape becomes a scalar.
  const Tensor one = Tensor::zeros({1, 1, 1});
  kn::View<const float> v1 = kn::make_view<const float>(one);
  kn::coalesce(v1);
  REQUIRE(v1.ndim == 0);
  REQUIRE(v1.numel() == 1);
  REQUIRE(&v1.at(0) == one.data<float>());
}

TEST_CASE("cuda kernels: index division is exact past 32 bits", "[cuda_kernels]") {
  const std::int64_t big = std::int64_t(1) << 33;
  for (std::int64_t a :
       {std::int64_t(0), std::int64_t(7), std::int64_t(4294967295), big + 5, 3 * big + 12345})
    for (std::int64_t b : {std::int64_t(1), std::int64_t(3), std::int64_t(4294967296), big + 1})
      REQUIRE(kn::k_div(a, b) == a / b);
  // A view of more than 2^32 elements (never dereferenced): offsets through both division paths.
  kn::View<const float> v;
  v.ndim = 3;
  v.shape[0] = 3;
  v.shape[1] = big;
  v.shape[2] = 5;
  v.stride[0] = 1;
  v.stride[1] = 3;
  v.stride[2] = 3 * big;
  for (std::int64_t i : {std::int64_t(0), std::int64_t(9), 5 * big + 7, 15 * big - 1}) {
    const std::int64_t i0 = i / (5 * big), i1 = (i / 5) % big, i2 = i % 5;
    REQUIRE(v.offset_of(i) == i0 + 3 * i1 + 3 * big * i2);
  }
}

/// A host Workspace source of plain memory.
struct PlainWorkspace {
  std::vector<double> buf;
  void* get(std::size_t bytes) {
    buf.assign((bytes + 7) / 8, 0.0);
    return buf.data();
  }
};

TEST_CASE("cuda kernels: tensor copy, add and fill on strided views", "[cuda_kernels]") {
  PlainWorkspace ws;
  kn::HostLoop<PlainWorkspace> loop(ws);
  const Shape shape{3, 4, 5};
  const std::vector<double> v = random_doubles(60, 3), w = random_doubles(60, 4);
  SECTION("copy f32 and f64, strided on both sides, outside the window untouched") {
    for (DType dt : {DType::F32, DType::F64}) {
      const Tensor src = make(v, shape, dt, Layout::NarrowChannels);
      View dst = make_view(random_doubles(60, 5, 70, 80), shape, dt, Layout::StrideTwo);
      const std::vector<double> base_before = to_doubles(dst.base);
      kn::run_tensor_copy(loop, src, dst.t);
      REQUIRE(to_doubles(dst.t) == rounded_copy(v, dt));
      const std::vector<double> base_after = to_doubles(dst.base);
      for (std::size_t i = 1; i < base_after.size(); i += 2)
        REQUIRE(base_after[i] == base_before[i]);
    }
  }
  SECTION("copy of i64 moves the words") {
    Tensor src = Tensor::empty(shape, DType::I64);
    for (std::int64_t i = 0; i < 60; ++i)
      src.data<std::int64_t>()[i] = (i * 7919) ^ (std::int64_t(1) << 40);
    Tensor big = Tensor::zeros({3, 6, 5}, DType::I64);
    Tensor dst = big.narrow(1, 1, 4);
    kn::run_tensor_copy(loop, src, dst);
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 4; ++j)
        for (std::int64_t k = 0; k < 5; ++k)
          REQUIRE(dst.at<std::int64_t>({i, j, k}) == src.at<std::int64_t>({i, j, k}));
    REQUIRE(big.at<std::int64_t>({0, 0, 0}) == 0);
    REQUIRE(big.at<std::int64_t>({2, 5, 4}) == 0);
  }
  SECTION("add into a strided view") {
    const Tensor src = make(v, shape, DType::F64, Layout::StrideTwo);
    Tensor dst = make(w, shape, DType::F64, Layout::NarrowLast);
    kn::run_tensor_add(loop, src, dst);
    const std::vector<double> got = to_doubles(dst);
    for (std::size_t i = 0; i < 60; ++i) REQUIRE(got[i] == v[i] + w[i]);
  }
  SECTION("fill: any value for floats, zero for other dtypes") {
    Tensor f = make(w, shape, DType::F32, Layout::StrideTwo);
    kn::run_tensor_fill(loop, f, 2.5);
    for (double x : to_doubles(f)) REQUIRE(x == 2.5);
    Tensor i = Tensor::empty({7}, DType::I64);
    for (int k = 0; k < 7; ++k) i.data<std::int64_t>()[k] = 99;
    kn::run_tensor_fill(loop, i, 0.0);
    for (int k = 0; k < 7; ++k) REQUIRE(i.data<std::int64_t>()[k] == 0);
    REQUIRE_THROWS_AS(kn::run_tensor_fill(loop, i, 1.0), Unsupported);
  }
  SECTION("mismatched shapes or dtypes are refused") {
    const Tensor a = Tensor::zeros({3, 4}), b = Tensor::zeros({4, 3}),
                 c = Tensor::zeros({3, 4}, DType::F64);
    Tensor bb = b, cc = c;
    REQUIRE_THROWS_AS(kn::run_tensor_copy(loop, a, bb), InvalidArgument);
    REQUIRE_THROWS_AS(kn::run_tensor_add(loop, a, cc), InvalidArgument);
  }
}

TEST_CASE("cuda kernels: a label >= K is refused before anything is written", "[cuda_kernels]") {
  compute::cuda::HostLoopBackend be;
  const Tensor logits = random_tensor({2, 3, 2, 2}, DType::F32, 6);
  Tensor labels = Tensor::zeros({2, 2, 2}, DType::I64);
  labels.at<std::int64_t>({1, 0, 1}) = 3;
  labels.at<std::int64_t>({1, 1, 0}) = 7;
  Tensor loss = Tensor::empty({1}, DType::F64), dl = random_tensor({2, 3, 2, 2}, DType::F32, 7);
  loss.data<double>()[0] = -1;
  const std::vector<double> dl_before = to_doubles(dl);
  const std::string msg = error_of<InvalidArgument>(
      [&] { compute::softmax_cross_entropy(be, logits, labels, 1.0, loss, dl); });
  INFO(msg);
  REQUIRE(msg.find("label 3 at position [1,0,1]") != std::string::npos);  // the first bad one
  REQUIRE(msg.find("3 classes") != std::string::npos);
  REQUIRE(to_doubles(dl) == dl_before);
  REQUIRE(loss.data<double>()[0] == -1);
}

TEST_CASE("cuda kernels: library ops are refused as unsupported", "[cuda_kernels]") {
  compute::cuda::HostLoopBackend be;
  const Tensor x = Tensor::zeros({2, 3}), w = Tensor::zeros({4, 3});
  Tensor y = Tensor::zeros({2, 4});
  REQUIRE_THAT(error_of<Unsupported>([&] { compute::linear_forward(be, x, w, nullptr, y); }),
               Catch::Matchers::Contains("cuDNN/cuBLAS"));
}

// ---- bf16/f16 on the host loop: widen, run the f32 body, round once ----------------------------
// (The conformance suite's half cases are another branch's; these check this backend's path.)

/// A contiguous 16-bit tensor holding v rounded (through f32) by core/half.hpp.
Tensor half_tensor(const std::vector<double>& v, const Shape& shape, DType dt) {
  Tensor t = Tensor::empty(shape, dt, core::MemCategory::Workspace);
  REQUIRE(std::int64_t(v.size()) == t.numel());
  auto* p = static_cast<std::uint16_t*>(t.raw_data());
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = core::float_to_half(float(v[i]), dt);
  return t;
}
/// The values of a 16-bit tensor (any strides), exactly.
std::vector<double> half_values(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> v(std::size_t(c.numel()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = core::half_to_float(static_cast<std::uint16_t*>(c.raw_data())[i], t.dtype());
  return v;
}
/// Each element of a 16-bit result is the f32 result rounded once (same bits), and within
/// bound·|ref| + abs of the float64 reference.
void require_rounded_once(const Tensor& got, const Tensor& f32, const std::vector<double>& ref,
                          double rel, double abs) {
  const DType dt = got.dtype();
  const Tensor g = got.contiguous();
  const std::vector<double> f = to_doubles(f32);
  REQUIRE(f.size() == ref.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    INFO("element " << i << " of " << got.describe() << ": f32 " << f[i] << ", ref " << ref[i]);
    REQUIRE(static_cast<std::uint16_t*>(g.raw_data())[i] == core::float_to_half(float(f[i]), dt));
    REQUIRE(std::abs(core::half_to_float(static_cast<std::uint16_t*>(g.raw_data())[i], dt) -
                     ref[i]) <= rel * std::abs(ref[i]) + abs);
  }
}

TEST_CASE("cuda kernels: bf16/f16 calls are the f32 kernels rounded once", "[cuda_kernels]") {
  const DType dt = GENERATE(DType::BF16, DType::F16);
  INFO(core::dtype_name(dt));
  compute::cuda::HostLoopBackend be;
  const double u = core::unit_roundoff(dt), u32 = core::unit_roundoff(DType::F32);
  const Shape s{2, 5, 3, 7};
  const std::size_t n = numel(s);
  const Tensor a = half_tensor(random_doubles(n, 21), s, dt);
  const Tensor b = half_tensor(random_doubles(n, 22), s, dt);
  const std::vector<double> av = half_values(a), bv = half_values(b);
  const Tensor a32 = from_doubles(av, s, DType::F32), b32 = from_doubles(bv, s, DType::F32);
  SECTION("add, into a strided view of a wider tensor") {
    Tensor wide = half_tensor(random_doubles(2 * n, 23), {2, 10, 3, 7}, dt);
    Tensor y = wide.narrow(1, 2, 5);
    const std::vector<double> outside = half_values(wide.narrow(1, 7, 3));
    compute::add(be, a, b, y);
    Tensor y32 = Tensor::empty(s);
    compute::add(be, a32, b32, y32);
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = av[i] + bv[i];
    require_rounded_once(y, y32, ref, u + 2 * u32, 0);
    REQUIRE(half_values(wide.narrow(1, 7, 3)) == outside);
  }
  SECTION("gelu forward and backward") {
    Tensor y = Tensor::empty(s, dt), y32 = Tensor::empty(s);
    compute::activation_forward(be, compute::Activation::Gelu, a, y);
    compute::activation_forward(be, compute::Activation::Gelu, a32, y32);
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = ref::gelu(av[i]);
    require_rounded_once(y, y32, ref, u + 64 * u32, 1e-7);
    Tensor dx = Tensor::empty(s, dt), dx32 = Tensor::empty(s);
    compute::activation_backward(be, compute::Activation::Gelu, b, a, dx);
    compute::activation_backward(be, compute::Activation::Gelu, b32, a32, dx32);
    for (std::size_t i = 0; i < n; ++i) ref[i] = bv[i] * ref::gelu_grad(av[i]);
    require_rounded_once(dx, dx32, ref, u + 64 * u32, 1e-7);
  }
  SECTION("axpy reads its 16-bit output: widened first, rounded once") {
    Tensor y = half_tensor(bv, s, dt), y32 = from_doubles(bv, s, DType::F32);
    compute::axpy(be, 0.75, a, y);
    compute::axpy(be, 0.75, a32, y32);
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = bv[i] + 0.75 * av[i];
    require_rounded_once(y, y32, ref, u + 4 * u32, 0);
  }
  SECTION("layernorm with f32 master gamma/beta and statistics, and with 16-bit ones") {
    const std::int64_t C = 5, P = 21;
    const std::vector<double> gv = random_doubles(C, 24, 0.5, 1.5), bev = random_doubles(C, 25);
    const Tensor g32 = from_doubles(gv, {C}, DType::F32), be32 = from_doubles(bev, {C}, DType::F32);
    Tensor y32 = Tensor::empty(s), m32 = Tensor::empty({2, 3, 7}), r32 = Tensor::empty({2, 3, 7});
    compute::layernorm_forward(be, a32, g32, be32, 1e-5, y32, m32, r32);
    const ref::LayerNormOut ref = ref::layernorm_forward(av, gv, bev, 2, int(C), int(P), 1e-5);
    // f32 master: mean and rstd stay f32, equal to the f32 kernel's bits.
    Tensor y = Tensor::empty(s, dt), m = Tensor::empty({2, 3, 7}), r = Tensor::empty({2, 3, 7});
    compute::layernorm_forward(be, a, g32, be32, 1e-5, y, m, r);
    require_rounded_once(y, y32, ref.y, u + 64 * u32, 64 * u32);
    REQUIRE(to_doubles(m) == to_doubles(m32));
    REQUIRE(to_doubles(r) == to_doubles(r32));
    // 16-bit gamma/beta/statistics: widened in, statistics rounded once.
    const Tensor gh = half_tensor(gv, {C}, dt), bh = half_tensor(bev, {C}, dt);
    const Tensor gw = from_doubles(half_values(gh), {C}, DType::F32),
                 bw = from_doubles(half_values(bh), {C}, DType::F32);
    compute::layernorm_forward(be, a32, gw, bw, 1e-5, y32, m32, r32);
    Tensor mh = Tensor::empty({2, 3, 7}, dt), rh = Tensor::empty({2, 3, 7}, dt);
    compute::layernorm_forward(be, a, gh, bh, 1e-5, y, mh, rh);
    require_rounded_once(mh, m32, ref.mean, u + 64 * u32, 64 * u32);
    REQUIRE(half_values(y) == half_values(half_tensor(to_doubles(y32), s, dt)));
  }
  SECTION("scale_channels_backward: f32 master ds accumulated, 16-bit dx") {
    const std::int64_t C = 5;
    const std::vector<double> sv = random_doubles(C, 26), ds0 = random_doubles(C, 27);
    const Tensor s32 = from_doubles(sv, {C}, DType::F32);
    Tensor ds = from_doubles(ds0, {C}, DType::F32), ds32 = from_doubles(ds0, {C}, DType::F32);
    Tensor dx = Tensor::empty(s, dt), dx32 = Tensor::empty(s);
    compute::scale_channels_backward(be, b, a, s32, &dx, ds, true);
    compute::scale_channels_backward(be, b32, a32, s32, &dx32, ds32, true);
    REQUIRE(to_doubles(ds) == to_doubles(ds32));
    const std::vector<double> dsv = to_doubles(ds);
    for (std::int64_t c = 0; c < C; ++c) {
      double r = ds0[std::size_t(c)];
      for (std::int64_t k = 0; k < 2; ++k)
        for (std::int64_t p = 0; p < 21; ++p) {
          const std::size_t i = std::size_t((k * C + c) * 21 + p);
          r += bv[i] * av[i];
        }
      REQUIRE(std::abs(dsv[std::size_t(c)] - r) <= 2 * u32 * (std::abs(r) + 1));
    }
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = bv[i] * sv[(i / 21) % 5];
    require_rounded_once(dx, dx32, ref, u + 2 * u32, 0);
  }
  SECTION("ops without a 16-bit body (widened into f32 scratch): channel_sum, channel_broadcast") {
    // channel_sum: y (N,C) of the call's dtype; the f32 kernel's sum, rounded once.
    Tensor cs = Tensor::empty({2, 5}, dt), cs32 = Tensor::empty({2, 5});
    compute::channel_sum(be, a, cs);
    compute::channel_sum(be, a32, cs32);
    const std::vector<double> ref = ref::channel_sum(av, 2, 5, 21);
    require_rounded_once(cs, cs32, ref, u + 2 * u32, 1e-6);
    // channel_broadcast with accumulate reads its 16-bit output: widened first, rounded once.
    const Tensor g16 = half_tensor(random_doubles(10, 29), {2, 5}, dt);
    const Tensor g32 = from_doubles(half_values(g16), {2, 5}, DType::F32);
    Tensor y = half_tensor(bv, s, dt), y32 = from_doubles(bv, s, DType::F32);
    compute::channel_broadcast(be, g16, 0.5, y, true);
    compute::channel_broadcast(be, g32, 0.5, y32, true);
    const std::vector<double> bc = ref::channel_broadcast(half_values(g16), 0.5, 2, 5, 21);
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = bv[i] + bc[i];
    require_rounded_once(y, y32, want, u + 2 * u32, 0);
  }
  SECTION("copy converts between every pair of float dtypes") {
    const std::vector<double> v = random_doubles(n, 28, -3, 3);
    for (DType from : {DType::F64, DType::F32, DType::BF16, DType::F16})
      for (DType to : {DType::F64, DType::F32, DType::BF16, DType::F16}) {
        INFO(core::dtype_name(from) << " -> " << core::dtype_name(to));
        const Tensor x =
            core::dtype_is_half(from) ? half_tensor(v, s, from) : from_doubles(v, s, from);
        const std::vector<double> xv = core::dtype_is_half(from) ? half_values(x) : to_doubles(x);
        Tensor y = Tensor::empty(s, to);
        compute::copy(be, x, y);
        const std::vector<double> got = core::dtype_is_half(to) ? half_values(y) : to_doubles(y);
        for (std::size_t i = 0; i < n; ++i) {
          // To 16 bits: through f32 (exact for every source here but f64), then half.hpp's
          // rounding.
          const double want = core::dtype_is_half(to)
                                  ? core::half_to_float(core::float_to_half(float(xv[i]), to), to)
                              : to == DType::F32 ? double(float(xv[i]))
                                                 : xv[i];
          REQUIRE(got[i] == want);
        }
      }
  }
  SECTION("tensor helpers: fill, add, and the widening add into f32") {
    PlainWorkspace ws;
    kn::HostLoop<PlainWorkspace> loop(ws);
    Tensor y = half_tensor(av, s, dt);
    kn::run_tensor_add(loop, b, y);
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = av[i] + bv[i];
    Tensor y32 = a32.clone();
    kn::run_tensor_add(loop, b32, y32);
    require_rounded_once(y, y32, ref, u + 2 * u32, 0);
    Tensor acc = a32.clone();
    kn::run_tensor_add(loop, b, acc);  // f32 += 16-bit: the weight-gradient widening
    REQUIRE(to_doubles(acc) == to_doubles(y32));
    Tensor f = Tensor::empty({7}, dt);
    kn::run_tensor_fill(loop, f, 0.1);
    for (double x : half_values(f))
      REQUIRE(x == core::half_to_float(core::float_to_half(0.1f, dt), dt));
    Tensor wrong = Tensor::empty(s, DType::F64);
    REQUIRE_THROWS_AS(kn::run_tensor_add(loop, b, wrong), InvalidArgument);
  }
}

/// Workspace and pass calls of one op, as a launcher sees them.
struct Calls {
  int workspaces = 0, passes = 0;
  bool workspace_after_pass = false;
};

/// A launcher that runs each pass's items in a permuted order (forward, or a stride-7 walk) and
/// records the calls.
class OrderedLoop {
 public:
  OrderedLoop(int order, Calls& calls) : order_(order), calls_(calls) {}
  template <class Body, class P>
  void pass(const P& p, std::int64_t items) {
    ++calls_.passes;
    if (order_ == 0) {
      for (std::int64_t i = 0; i < items; ++i) Body::run(p, i);
    } else {
      for (std::int64_t r = 0; r < 7; ++r)
        for (std::int64_t i = r; i < items; i += 7) Body::run(p, i);
    }
  }
  void* workspace(std::size_t bytes) {
    ++calls_.workspaces;
    if (calls_.passes > 0) calls_.workspace_after_pass = true;
    return bytes ? ws_.get(bytes) : nullptr;
  }
  Tensor scratch(const Shape& shape, DType dtype) {
    return Tensor::empty(shape, dtype, core::MemCategory::Workspace);
  }
  void read_back(void* dst, const void* src, std::size_t bytes) {
    std::copy_n(static_cast<const unsigned char*>(src), bytes, static_cast<unsigned char*>(dst));
  }

 private:
  int order_;
  Calls& calls_;
  PlainWorkspace ws_;
};

/// A Backend running the kernels on OrderedLoop (order 0 forward, 1 strided), checking the
/// workspace rule on every call.
class OrderedBackend final : public compute::Backend {
 public:
  explicit OrderedBackend(int order) : order_(order) {}
  std::string_view name() const noexcept override { return "ordered-loop"; }
  int num_threads() const noexcept override { return 1; }
  void set_num_threads(int) override {}
  void execute(const compute::OpCall& call) override {
    Calls calls;
    OrderedLoop loop(order_, calls);
    kn::run_kernel_op(loop, call, "ordered-loop");
    INFO(compute::op_name(call.kind));
    REQUIRE(calls.workspaces <= 1);
    REQUIRE(!calls.workspace_after_pass);
  }

 private:
  int order_;
};

/// Every output of the ops with reductions and multi-item bodies, on one backend, as doubles.
std::vector<std::vector<double>> run_ops(compute::Backend& be, DType dt) {
  using namespace compute;
  const Shape s{3, 17, 9, 33};  // 891 terms per channel: 27 tiles
  const std::int64_t C = 17;
  const Tensor x = make(random_doubles(numel(s), 11), s, dt, Layout::NarrowLast);
  const Tensor dy = make(random_doubles(numel(s), 12), s, dt, Layout::StrideTwo);
  const Tensor gamma = random_tensor({C}, dt, 13), beta = random_tensor({C}, dt, 14);
  std::vector<std::vector<double>> out;
  Tensor y = Tensor::empty(s, dt), mean = Tensor::empty({3, 9, 33}, dt),
         rstd = Tensor::empty({3, 9, 33}, dt);
  layernorm_forward(be, x, gamma, beta, 1e-5, y, mean, rstd);
  out.insert(out.end(), {to_doubles(y), to_doubles(mean), to_doubles(rstd)});
  Tensor dx = Tensor::empty(s, dt), dg = random_tensor({C}, dt, 15),
         db = random_tensor({C}, dt, 16);
  layernorm_backward(be, dy, x, gamma, mean, rstd, dx, dg, db, true);
  out.insert(out.end(), {to_doubles(dx), to_doubles(dg), to_doubles(db)});
  Tensor sum = Tensor::empty({C}, DType::F64), sumsq = Tensor::empty({C}, DType::F64);
  channel_moments(be, x, sum, sumsq);
  out.insert(out.end(), {to_doubles(sum), to_doubles(sumsq)});
  const Tensor m = random_tensor({C}, dt, 17), r = random_tensor({C}, dt, 18, 0.5, 2.0);
  batchnorm_backward_reduce(be, dy, x, m, r, sum, sumsq);
  out.insert(out.end(), {to_doubles(sum), to_doubles(sumsq)});
  Tensor ds = Tensor::empty({3, C}, dt);
  scale_channels_backward(be, dy, x, random_tensor({3, C}, dt, 19), &dx, ds, false);
  out.insert(out.end(), {to_doubles(dx), to_doubles(ds)});
  Tensor cs = Tensor::empty({3, C}, dt);
  channel_sum(be, x, cs);
  out.push_back(to_doubles(cs));
  Tensor ss = Tensor::empty({1}, DType::F64);
  sum_squares(be, x, ss);
  out.push_back(to_doubles(ss));
  Tensor labels = Tensor::empty({3, 9, 33}, DType::I64);
  for (std::int64_t i = 0; i < labels.numel(); ++i)
    labels.data<std::int64_t>()[i] = (i * 5) % (C + 2) - 2;
  Tensor loss = Tensor::empty({1}, DType::F64), dl = Tensor::empty(s, dt);
  softmax_cross_entropy(be, x, labels, 0.25, loss, dl);
  out.insert(out.end(), {to_doubles(loss), to_doubles(dl)});
  return out;
}

TEST_CASE("cuda kernels: the same bits whatever order a pass's items run in", "[cuda_kernels]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  INFO(core::dtype_name(dt));
  compute::cuda::HostLoopBackend reverse;  // items last to first
  OrderedBackend forward(0), strided(1);
  const auto want = run_ops(reverse, dt);
  REQUIRE(run_ops(forward, dt) == want);
  REQUIRE(run_ops(strided, dt) == want);
}

// ---- top-k compression's ops: the cpu backend's bits, whatever the item order -------------------

/// Whether two tensors hold the same bytes (NaNs included).
bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

/// Every output of the three top-k ops on `be`: the selection of k from a bucket whose magnitudes
/// tie across the cut (small integers), with NaNs, ±inf and −0; the scatter-add of three blocks
/// (the selection, the selection again, and a block out of order with a repeated index: the
/// one-item path); the residual.
std::vector<Tensor> run_topk(compute::Backend& be, DType dt, std::int64_t n, std::int64_t k) {
  const DType slot = dt == DType::F32 ? DType::I32 : DType::I64;
  std::vector<double> g = random_doubles(std::size_t(n), 41, -8.5, 8.5),
                      r = random_doubles(std::size_t(n), 42, -1, 1);
  for (double& x : g) x = std::round(x);
  for (double& x : r) x = std::round(x * 2) / 4;
  if (n > 10) g[3] = g[n - 2] = std::nan(""), g[5] = -INFINITY, g[7] = INFINITY, g[9] = -0.0;
  Tensor acc = Tensor::empty({n}, dt), order = Tensor::empty({n}, slot),
         pairs = Tensor::empty({2 * k}, slot);
  compute::topk_select(be, make(g, {n}, dt), make(r, {n}, dt), 4.0, k, acc, order, pairs);
  // Blocks 0 and 1: the pairs; block 2: block 0's slots reversed, its last index repeated.
  const std::size_t w = core::dtype_size(slot), block = pairs.nbytes();
  Tensor recv = Tensor::empty({6 * k}, slot);
  auto* dst = static_cast<unsigned char*>(recv.raw_data());
  const auto* src = static_cast<const unsigned char*>(pairs.raw_data());
  std::memcpy(dst, src, block);
  std::memcpy(dst + block, src, block);
  for (std::int64_t j = 0; j < k; ++j) {
    std::memcpy(dst + 2 * block + std::size_t(j) * w, src + std::size_t(k - 1 - j) * w, w);
    std::memcpy(dst + 2 * block + std::size_t(k + j) * w, src + std::size_t(2 * k - 1 - j) * w, w);
  }
  if (k > 1) std::memcpy(dst + 2 * block + w, dst + 2 * block, w);
  Tensor grad = Tensor::empty({n}, dt);
  compute::topk_scatter_add(be, recv, k, grad);
  Tensor after = acc.clone(), residual = Tensor::empty({n}, dt);
  compute::topk_residual(be, pairs, 0.25, after, residual);
  return {acc, order, pairs, grad, after, residual};
}

TEST_CASE("cuda kernels: top-k ops give the cpu backend's bits in any item order",
          "[cuda_kernels]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  // k = 1, the cut inside a tie class, and every element; a bucket of one tile, of many.
  constexpr std::int64_t kSizes[][2] = {{1, 1},    {33, 5},       {33, 33},
                                        {5000, 1}, {40001, 4000}, {40001, 40001}};
  const int which = GENERATE(0, 1, 2, 3, 4, 5);
  const std::int64_t n = kSizes[which][0], k = kSizes[which][1];
  INFO(core::dtype_name(dt) << ", n = " << n << ", k = " << k);
  compute::cpu::CpuBackend cpu(1);
  compute::cuda::HostLoopBackend reverse;  // items last to first
  OrderedBackend forward(0), strided(1);
  const std::vector<Tensor> want = run_topk(cpu, dt, n, k);
  for (compute::Backend* be : std::vector<compute::Backend*>{&reverse, &forward, &strided}) {
    const std::vector<Tensor> got = run_topk(*be, dt, n, k);
    const char* names[] = {"acc", "order", "pairs", "scatter-add", "acc after", "residual"};
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (i == 1) continue;  // `order` is the op's scratch, not part of the contract
      INFO(be->name() << ": " << names[i]);
      REQUIRE(same_bytes(got[i], want[i]));
    }
  }
}

TEST_CASE("cuda kernels: top-k ops refuse a corrupted pair buffer before writing",
          "[cuda_kernels]") {
  compute::cuda::HostLoopBackend be;
  const std::int64_t n = 8;
  Tensor grad = Tensor::zeros({n}, DType::F32);
  grad.data<float>()[0] = 7;
  Tensor recv = Tensor::zeros({6}, DType::I32);  // three blocks of k = 1
  recv.data<std::int32_t>()[2] = 8;              // block 1's index is outside the bucket
  recv.data<std::int32_t>()[4] = -1;             // and block 2's: block 1 is reported
  const std::string msg =
      error_of<InvalidArgument>([&] { compute::topk_scatter_add(be, recv, 1, grad); });
  INFO(msg);
  REQUIRE(msg.find("block 1 (rank 1 of the group) holds index 8 outside the bucket of 8") !=
          std::string::npos);
  REQUIRE(grad.data<float>()[0] == 7);

  Tensor acc = Tensor::zeros({n}), res = Tensor::zeros({n});
  acc.fill(3.0);
  res.fill(5.0);
  Tensor sent = Tensor::zeros({4}, DType::I32);  // k = 2: indices 0 and 9
  sent.data<std::int32_t>()[1] = 9;
  REQUIRE_THAT(error_of<InvalidArgument>([&] { compute::topk_residual(be, sent, 1.0, acc, res); }),
               Catch::Matchers::Contains("sent index 9 outside the bucket of 8"));
  REQUIRE(to_doubles(acc) == std::vector<double>(n, 3.0));
  REQUIRE(to_doubles(res) == std::vector<double>(n, 5.0));
}
}  // namespace
}  // namespace tessera::test
