// The cpu backend's bf16/f16 calls beyond the conformance suite: the f32 workspace they book (the
// 16-bit tensors widened, f32 Master slots not copied, nothing left booked), in-place use, one
// rounding of the output, and the same bits for any thread count.
#include <functional>
#include <memory>

#include "support/test_utils.hpp"
#include "support/views.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/core/half.hpp"

using namespace tessera;
using core::DType;
using core::MemCategory;
using core::Tensor;

namespace {

Tensor half_tensor(const core::Shape& s, DType t, std::uint64_t seed, const core::AllocatorPtr& a) {
  const Tensor host =
      test::from_doubles(test::values(std::size_t(core::shape_numel(s)), seed, t), s, t);
  return host.to(a, MemCategory::Activation);
}

}  // namespace

TEST_CASE("cpu bf16/f16 calls: f32 workspace per 16-bit tensor, masters passed through",
          "[compute][cpu][half]") {
  for (DType t : {DType::BF16, DType::F16}) {
    INFO(core::dtype_name(t));
    compute::cpu::CpuBackend be(2);
    auto alloc = std::make_shared<core::Allocator>("host");
    const std::int64_t n = 3, c = 5, p = 7, numel = n * c * p;
    const Tensor x = half_tensor({n, c, p}, t, 1, alloc);
    Tensor s = Tensor::empty({n}, DType::F32, MemCategory::Parameter, alloc);  // an f32 Master slot
    s.fill(0.75);
    Tensor y = Tensor::empty({n, c, p}, t, MemCategory::Activation, alloc);
    alloc->reset_peaks();
    compute::scale_samples(be, x, s, y);
    // x and y widened (4 bytes an element each); s used as it is; all of it given back.
    REQUIRE(alloc->stats().peak_of(MemCategory::Workspace) == std::size_t(2 * numel * 4));
    REQUIRE(alloc->stats().current_of(MemCategory::Workspace) == 0);
    const auto xv = test::to_doubles(x), yv = test::to_doubles(y);
    for (std::int64_t i = 0; i < numel; ++i)  // one rounding of an exact f32 product
      REQUIRE(
          yv[std::size_t(i)] ==
          double(core::half_to_float(core::float_to_half(float(xv[std::size_t(i)] * 0.75), t), t)));
  }
}

TEST_CASE("cpu bf16/f16 calls: in place, and the same bits on 1 and 3 threads",
          "[compute][cpu][half]") {
  for (DType t : {DType::BF16, DType::F16}) {
    INFO(core::dtype_name(t));
    auto alloc = std::make_shared<core::Allocator>("host");
    const core::Shape shape{2, 3, 33, 65};
    const Tensor x = half_tensor(shape, t, 2, alloc);
    compute::cpu::CpuBackend one(1), three(3);
    Tensor y1 = Tensor::empty(shape, t, MemCategory::Activation, alloc);
    Tensor y3 = Tensor::empty(shape, t, MemCategory::Activation, alloc);
    compute::activation_forward(one, compute::Activation::Gelu, x, y1);
    compute::activation_forward(three, compute::Activation::Gelu, x, y3);
    Tensor inplace = x.clone();
    compute::activation_forward(three, compute::Activation::Gelu, inplace, inplace);  // y aliases x
    const auto a = y1.data<std::uint16_t>(), b = y3.data<std::uint16_t>(),
               d = inplace.data<std::uint16_t>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      REQUIRE(a[i] == b[i]);
      REQUIRE(a[i] == d[i]);
    }
  }
}

namespace {

Tensor widened(const Tensor& t, compute::Backend& be) {
  Tensor f = Tensor::empty(t.shape(), DType::F32, MemCategory::Activation, t.allocator());
  compute::copy(be, t, f);
  return f;
}

void require_same_bits(const Tensor& a, const Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  const auto av = test::to_doubles(a), bv = test::to_doubles(b);
  for (std::size_t i = 0; i < av.size(); ++i) {
    INFO("element " << i << ": " << av[i] << " vs " << bv[i]);
    REQUIRE(av[i] == bv[i]);
  }
}

}  // namespace

// Pointwise convolutions of 16-bit activations run block by block (conv_half.cpp), not
// through whole-tensor f32 copies. Forward and backward-data must give the bits of the widened
// call: the same f32 GEMM on the same values, each output rounded once. The weight gradient sums
// in f32 in another grouping, so it is held to the f64 sum of the exact products within
// γ_K·Σ|dy·x| (K terms per entry, u = 2^-24; any summation order meets it).
TEST_CASE("cpu bf16/f16 pointwise convolutions: the bits of the widened f32 call, blocked scratch",
          "[compute][cpu][half]") {
  struct Geo {
    int n, cin, h, w, cout, groups;
  };
  for (DType t : {DType::BF16, DType::F16})
    for (const Geo g : {Geo{2, 12, 9, 37, 20, 1}, Geo{1, 8, 5, 70, 6, 2}, Geo{3, 4, 1, 3, 5, 1}})
      for (int threads : {1, 3}) {
        INFO(core::dtype_name(t) << " n" << g.n << " cin" << g.cin << " " << g.h << "x" << g.w << " cout" << g.cout
                                 << " groups" << g.groups << " threads " << threads);
        auto alloc = std::make_shared<core::Allocator>("host");
        compute::cpu::CpuBackend be(threads);
        // The blocked 16-bit kernels, which f16 (and bf16 without oneDNN's bf16) take under Auto;
        // bf16 through oneDNN is tests/compute/conv_onednn_test.cpp's.
        be.force_conv_algo(compute::cpu::ConvAlgo::Pointwise);
        compute::Conv2dParams p;
        p.groups = g.groups;
        const core::Shape xs{g.n, g.cin, g.h, g.w}, ys{g.n, g.cout, g.h, g.w}, ws{g.cout, g.cin / g.groups, 1, 1};
        const Tensor x = half_tensor(xs, t, 3, alloc), dy = half_tensor(ys, t, 4, alloc);
        const Tensor w = half_tensor(ws, DType::F32, 5, alloc), b = half_tensor({g.cout}, DType::F32, 6, alloc);
        const Tensor x32 = widened(x, be), dy32 = widened(dy, be);
        compute::cpu::CpuBackend ref(threads);
        ref.force_conv_algo(compute::cpu::ConvAlgo::Pointwise);

        // Forward: the half call's scratch is per-thread blocks, far below an f32 copy of x and y.
        Tensor y = Tensor::empty(ys, t, MemCategory::Activation, alloc);
        alloc->reset_peaks();
        compute::conv2d_forward(be, p, x, w, &b, y);
        REQUIRE(alloc->stats().peak_of(MemCategory::Workspace) <=
                std::size_t((g.cin + g.cout) / g.groups * 256 * threads * 4));
        REQUIRE(alloc->stats().current_of(MemCategory::Workspace) == 0);
        Tensor y32 = Tensor::empty(ys, DType::F32, MemCategory::Workspace, alloc);
        compute::conv2d_forward(ref, p, x32, w, &b, y32);
        Tensor y_ref = Tensor::empty(ys, t, MemCategory::Workspace, alloc);
        compute::copy(ref, y32, y_ref);
        require_same_bits(y, y_ref);

        // Backward data, accumulating into 16-bit values: widened, summed in f32, rounded once.
        for (bool acc : {false, true}) {
          INFO("accumulate " << acc);
          Tensor dx = half_tensor(xs, t, 7, alloc);
          Tensor dx32 = widened(dx, be);
          compute::conv2d_backward_data(be, p, dy, w, dx, acc);
          compute::conv2d_backward_data(ref, p, dy32, w, dx32, acc);
          Tensor dx_ref = Tensor::empty(xs, t, MemCategory::Workspace, alloc);
          compute::copy(ref, dx32, dx_ref);
          require_same_bits(dx, dx_ref);
        }

        // Weight gradient in f32 against the f64 sums, accumulating onto a start value.
        Tensor dw = half_tensor(ws, DType::F32, 8, alloc), db = half_tensor({g.cout}, DType::F32, 9, alloc);
        const auto dw0 = test::to_doubles(dw), db0 = test::to_doubles(db);
        compute::conv2d_backward_weight(be, p, x, dy, dw, &db, true);
        const auto xv = test::to_doubles(x), dyv = test::to_doubles(dy);
        const int cpi = g.cin / g.groups, cpo = g.cout / g.groups, hw = g.h * g.w;
        const double u = std::ldexp(1.0, -24), k = double(g.n) * hw + 1;
        const double gamma = k * u / (1 - k * u);
        std::vector<double> dw_ref(dw0.size()), dw_bound(dw0.size()), db_ref(db0.size()), db_bound(db0.size());
        for (int o = 0; o < g.cout; ++o) {
          const int grp = o / cpo;
          double bs = db0[std::size_t(o)], ba = std::abs(bs);
          for (int nn = 0; nn < g.n; ++nn)
            for (int q = 0; q < hw; ++q) {
              const double d = dyv[std::size_t((nn * g.cout + o) * hw + q)];
              bs += d, ba += std::abs(d);
            }
          db_ref[std::size_t(o)] = bs, db_bound[std::size_t(o)] = gamma * ba;
          for (int i = 0; i < cpi; ++i) {
            const std::size_t wi = std::size_t(o * cpi + i);
            double s = dw0[wi], a = std::abs(s);
            for (int nn = 0; nn < g.n; ++nn)
              for (int q = 0; q < hw; ++q) {
                const double v = dyv[std::size_t((nn * g.cout + o) * hw + q)] *
                                 xv[std::size_t((nn * g.cin + grp * cpi + i) * hw + q)];
                s += v, a += std::abs(v);
              }
            dw_ref[wi] = s, dw_bound[wi] = gamma * a;
          }
        }
        REQUIRE(test::compare_within(test::to_doubles(dw), dw_ref, dw_bound).ok);
        REQUIRE(test::compare_within(test::to_doubles(db), db_ref, db_bound).ok);
      }
}

// Large elementwise calls go chunk by chunk through cached f32 buffers (half_calls.cpp): the
// bits of the op on the widened tensors, in place too, and a workspace of a few chunks.
TEST_CASE("cpu bf16/f16 elementwise calls in chunks: the bits of the widened f32 call",
          "[compute][cpu][half]") {
  const std::int64_t n = 3 * 65536 + 123;  // whole chunks (2^15 elements) and a tail
  const core::Shape shape{n};
  for (DType t : {DType::BF16, DType::F16}) {
    INFO(core::dtype_name(t));
    auto alloc = std::make_shared<core::Allocator>("host");
    compute::cpu::CpuBackend be(2);
    const Tensor a = half_tensor(shape, t, 11, alloc), c = half_tensor(shape, t, 12, alloc);
    const Tensor a32 = widened(a, be), c32 = widened(c, be);
    auto narrowed = [&](const Tensor& f) {
      Tensor h = Tensor::empty(shape, t, MemCategory::Activation, alloc);
      compute::copy(be, f, h);
      return h;
    };
    auto check = [&](const char* what, const std::function<void(Tensor&)>& half_op,
                     const std::function<void(Tensor&)>& f32_op, const Tensor& start) {
      INFO(what);
      Tensor y = start.clone();
      Tensor y32 = widened(start, be);
      alloc->reset_peaks();
      half_op(y);
      REQUIRE(alloc->stats().peak_of(MemCategory::Workspace) <= std::size_t(2 * 3 * 32768 * 4));  // per worker and tensor
      REQUIRE(alloc->stats().current_of(MemCategory::Workspace) == 0);
      f32_op(y32);
      require_same_bits(y, narrowed(y32));
    };
    using compute::Activation;
    for (Activation act : {Activation::Gelu, Activation::Relu, Activation::Sigmoid}) {
      check("activation forward", [&](Tensor& y) { compute::activation_forward(be, act, a, y); },
            [&](Tensor& y) { compute::activation_forward(be, act, a32, y); }, c);
      check("activation forward in place", [&](Tensor& y) { compute::activation_forward(be, act, y, y); },
            [&](Tensor& y) { compute::activation_forward(be, act, y, y); }, a);
      check("activation backward", [&](Tensor& y) { compute::activation_backward(be, act, a, c, y); },
            [&](Tensor& y) { compute::activation_backward(be, act, a32, c32, y); }, c);
    }
    check("add", [&](Tensor& y) { compute::add(be, a, c, y); }, [&](Tensor& y) { compute::add(be, a32, c32, y); }, c);
    check("axpy", [&](Tensor& y) { compute::axpy(be, 0.3, a, y); }, [&](Tensor& y) { compute::axpy(be, 0.3, a32, y); },
          c);
    check("scale", [&](Tensor& y) { compute::scale(be, -1.7, y); }, [&](Tensor& y) { compute::scale(be, -1.7, y); }, a);
  }
}

// Depthwise convolutions of 16-bit activations run the f32 row kernels on 16-bit storage
// (conv_half.cpp): every output, the weight gradient included, has the bits of the f32 call on the
// widened tensors, for strides, dilations, uneven padding of the rows and W-narrowed views (the
// halo windows of a sharded convolution).
TEST_CASE("cpu bf16/f16 depthwise convolutions: the bits of the widened f32 call",
          "[compute][cpu][half]") {
  struct Geo {
    int k, stride, pad, dilation, h, w;
  };
  for (DType t : {DType::BF16, DType::F16})
    for (const Geo g : {Geo{7, 1, 3, 1, 11, 45}, Geo{3, 2, 1, 1, 9, 20}, Geo{3, 1, 2, 2, 6, 17}, Geo{5, 1, 0, 1, 7, 9}})
      for (bool view : {false, true}) {
        INFO(core::dtype_name(t) << " k" << g.k << " stride " << g.stride << " pad " << g.pad << " dilation "
                                 << g.dilation << " " << g.h << "x" << g.w << (view ? " (W-narrowed views)" : ""));
        auto alloc = std::make_shared<core::Allocator>("host");
        compute::cpu::CpuBackend be(2), ref(2);
        ref.force_conv_algo(compute::cpu::ConvAlgo::Depthwise);
        compute::Conv2dParams p;
        p.kernel_h = p.kernel_w = g.k;
        p.stride_h = p.stride_w = g.stride;
        p.pad_h = p.pad_w = g.pad;
        p.dilation_h = p.dilation_w = g.dilation;
        p.groups = 6;
        const int ho = (g.h + 2 * g.pad - g.dilation * (g.k - 1) - 1) / g.stride + 1;
        const int wo = (g.w + 2 * g.pad - g.dilation * (g.k - 1) - 1) / g.stride + 1;
        const core::Shape xs{2, 6, g.h, g.w}, ys{2, 6, ho, wo}, ws{6, 1, g.k, g.k};
        // A view holds the middle W columns of a tensor 5 columns wider (strides of the parent).
        auto act = [&](const core::Shape& s, std::uint64_t seed) {
          if (!view) return half_tensor(s, t, seed, alloc);
          const Tensor parent = half_tensor({s[0], s[1], s[2], s[3] + 5}, t, seed, alloc);
          return parent.narrow(3, 2, s[3]);
        };
        const Tensor x = act(xs, 21), dy = act(ys, 22);
        const Tensor w = half_tensor(ws, DType::F32, 23, alloc), b = half_tensor({6}, DType::F32, 24, alloc);
        const Tensor x32 = widened(x, be), dy32 = widened(dy, be);

        Tensor y = act(ys, 25), y32 = widened(y, be);
        alloc->reset_peaks();
        compute::conv2d_forward(be, p, x, w, &b, y);
        // Row scratch only: less than the f32 copies of x and y that the widened call books.
        REQUIRE(alloc->stats().peak_of(MemCategory::Workspace) < std::size_t((x.numel() + y.numel()) * 4));
        compute::conv2d_forward(ref, p, x32, w, &b, y32);
        Tensor y_ref = Tensor::empty(ys, t, MemCategory::Activation, alloc);
        compute::copy(ref, y32, y_ref);
        require_same_bits(y, y_ref);

        for (bool acc : {false, true}) {
          INFO("accumulate " << acc);
          Tensor dx = act(xs, 26), dx32 = widened(dx, be);
          compute::conv2d_backward_data(be, p, dy, w, dx, acc);
          compute::conv2d_backward_data(ref, p, dy32, w, dx32, acc);
          Tensor dx_ref = Tensor::empty(xs, t, MemCategory::Activation, alloc);
          compute::copy(ref, dx32, dx_ref);
          require_same_bits(dx, dx_ref);

          Tensor dw = half_tensor(ws, DType::F32, 27, alloc), db = half_tensor({6}, DType::F32, 28, alloc);
          Tensor dw32 = dw.clone(), db32 = db.clone();
          compute::conv2d_backward_weight(be, p, x, dy, dw, &db, acc);
          compute::conv2d_backward_weight(ref, p, x32, dy32, dw32, &db32, acc);
          require_same_bits(dw, dw32);
          require_same_bits(db, db32);
        }
      }
}

namespace {

// The bits of a 16-bit tensor's f32 twin rounded once (the widened call's last step).
Tensor narrowed_like(const Tensor& f32, const Tensor& like, compute::Backend& be) {
  Tensor h = Tensor::empty(like.shape(), like.dtype(), MemCategory::Workspace, like.allocator());
  compute::copy(be, f32, h);
  return h;
}

}  // namespace

// Layer norm of 16-bit activations runs on the 16-bit storage (ops_layernorm_half.cpp): every
// output (y, dx in 16 bits; mean, rstd, dgamma, dbeta in f32) has the bits of the f32 kernel on
// the widened tensors, for C = 3 (blocks of 1024 pixels and a tail), C = 96 and (N,C) inputs, on 1
// and 3 threads; the scratch is per-thread blocks of B ≤ min(P, 1024) pixels (C or 2C staged rows
// and three f32 rows, two double rows), for the large call far below the widened call's f32 copies
// of its 16-bit tensors. A W-narrowed view goes the widened way and gives the same bits.
TEST_CASE("cpu bf16/f16 layer norm: the bits of the widened f32 call, blocked scratch",
          "[compute][cpu][half]") {
  for (DType t : {DType::BF16, DType::F16})
    for (const core::Shape& xs : {core::Shape{2, 3, 64, 150}, core::Shape{2, 96, 7, 9},
                                  core::Shape{5, 96}, core::Shape{1, 3, 5, 4}})
      for (int threads : {1, 3})
        for (bool view : {false, true}) {
          if (view && xs.size() != 4) continue;
          INFO(core::dtype_name(t) << " " << core::shape_str(xs) << " threads " << threads
                                   << (view ? " (W-narrowed views)" : ""));
          auto alloc = std::make_shared<core::Allocator>("host");
          compute::cpu::CpuBackend be(threads), ref(threads);
          auto act = [&](std::uint64_t seed) {
            if (!view) return half_tensor(xs, t, seed, alloc);
            const Tensor parent = half_tensor({xs[0], xs[1], xs[2], xs[3] + 3}, t, seed, alloc);
            return parent.narrow(3, 1, xs[3]);
          };
          core::Shape ss = xs;
          ss.erase(ss.begin() + 1);
          const std::int64_t c = xs[1];
          const Tensor x = act(31), dy = act(32);
          const Tensor gamma = half_tensor({c}, DType::F32, 33, alloc);
          const Tensor beta = half_tensor({c}, DType::F32, 34, alloc);
          const Tensor x32 = widened(x, be), dy32 = widened(dy, be);

          Tensor y = act(35);
          Tensor mean = Tensor::empty(ss, DType::F32, MemCategory::Activation, alloc),
                 rstd = mean.clone();
          alloc->reset_peaks();
          compute::layernorm_forward(be, x, gamma, beta, 1e-5, y, mean, rstd);
          const std::int64_t b = std::min<std::int64_t>(x.numel() / (xs[0] * c), 1024);
          // The blocked scratch bound with `rows` staged rows, and the widened call's copies of
          // `tensors` 16-bit tensors (checked against the large call only).
          auto check_peak = [&](std::int64_t rows, std::int64_t tensors) {
            const std::size_t peak = alloc->stats().peak_of(MemCategory::Workspace);
            REQUIRE(peak <= std::size_t(threads * ((rows + 3) * b * 4 + 2 * b * 8)));
            if (x.numel() > 50000) REQUIRE(peak * 2 < std::size_t(tensors * x.numel() * 4));
          };
          if (!view) check_peak(c, 2);
          REQUIRE(alloc->stats().current_of(MemCategory::Workspace) == 0);
          Tensor y32 = widened(y, be), mean32 = mean.clone(), rstd32 = mean.clone();
          compute::layernorm_forward(ref, x32, gamma, beta, 1e-5, y32, mean32, rstd32);
          require_same_bits(y, narrowed_like(y32, y, ref));
          require_same_bits(mean, mean32);
          require_same_bits(rstd, rstd32);

          for (bool acc : {false, true}) {
            INFO("accumulate " << acc);
            Tensor dx = act(36);
            Tensor dgamma = half_tensor({c}, DType::F32, 37, alloc);
            Tensor dbeta = half_tensor({c}, DType::F32, 38, alloc);
            Tensor dx32 = widened(dx, be), dgamma32 = dgamma.clone(), dbeta32 = dbeta.clone();
            alloc->reset_peaks();
            compute::layernorm_backward(be, dy, x, gamma, mean, rstd, dx, dgamma, dbeta, acc);
            if (!view) check_peak(2 * c, 3);
            compute::layernorm_backward(ref, dy32, x32, gamma, mean32, rstd32, dx32, dgamma32,
                                        dbeta32, acc);
            require_same_bits(dx, narrowed_like(dx32, dx, ref));
            require_same_bits(dgamma, dgamma32);
            require_same_bits(dbeta, dbeta32);
          }
        }
}

TEST_CASE("cpu bf16/f16 layer norm: statistics of the wrong shape are refused",
          "[compute][cpu][half]") {
  auto alloc = std::make_shared<core::Allocator>("host");
  compute::cpu::CpuBackend be(2);
  const Tensor x = half_tensor({2, 4, 3, 5}, DType::BF16, 41, alloc);
  const Tensor gamma = half_tensor({4}, DType::F32, 42, alloc);
  const Tensor beta = half_tensor({4}, DType::F32, 43, alloc);
  Tensor y = Tensor::empty(x.shape(), DType::BF16, MemCategory::Activation, alloc);
  Tensor mean = Tensor::empty({2, 3}, DType::F32, MemCategory::Activation, alloc),
         rstd = mean.clone();
  REQUIRE_THROWS_AS(compute::layernorm_forward(be, x, gamma, beta, 1e-5, y, mean, rstd),
                    InvalidArgument);
}

// LayerScale and drop path on 16-bit activations (scale_channels, its backward, scale_samples;
// more than 2^14 elements) go plane by plane in chunks of 2^14 pixels through per-worker f32
// buffers (ops_scale_half.cpp): the bits of the f32 kernels on the widened tensors (ds summed in
// the f32 kernel's lanes and order), in place too, on 1 and 3 threads, for planes of a chunk and
// an odd tail; W-narrowed views go the widened way with the same bits.
TEST_CASE("cpu bf16/f16 channel and sample scales: the bits of the widened f32 call, chunked",
          "[compute][cpu][half]") {
  const core::Shape xs{2, 5, 130, 131};  // 17030 pixels a plane: one chunk and a tail of 646
  for (DType t : {DType::BF16, DType::F16})
    for (int threads : {1, 3})
      for (bool view : {false, true}) {
        INFO(core::dtype_name(t) << " threads " << threads << (view ? " (W-narrowed views)" : ""));
        auto alloc = std::make_shared<core::Allocator>("host");
        compute::cpu::CpuBackend be(threads), ref(threads);
        auto act = [&](std::uint64_t seed) {
          if (!view) return half_tensor(xs, t, seed, alloc);
          const Tensor parent = half_tensor({xs[0], xs[1], xs[2], xs[3] + 2}, t, seed, alloc);
          return parent.narrow(3, 1, xs[3]);
        };
        const Tensor x = act(51), dy = act(52);
        const Tensor x32 = widened(x, be), dy32 = widened(dy, be);
        const Tensor s_c = half_tensor({5}, DType::F32, 53, alloc);
        const Tensor s_nc = half_tensor({2, 5}, DType::F32, 54, alloc);
        const Tensor s_n = half_tensor({2}, DType::F32, 55, alloc);
        // Chunk buffers only (one or two per worker, and a word), far below the widened call's
        // copies of its `buffers` + 1 16-bit tensors.
        auto check_peak = [&](std::int64_t buffers) {
          if (view) return;
          const std::size_t peak = alloc->stats().peak_of(MemCategory::Workspace);
          REQUIRE(peak <= std::size_t(threads * buffers * 16384 * 4 + 256));
          REQUIRE(peak * 4 < std::size_t((buffers + 1) * x.numel() * 4));
        };
        for (const Tensor* s : {&s_c, &s_nc}) {
          INFO("s " << core::shape_str(s->shape()));
          Tensor y = act(56), y32 = widened(y, be);
          alloc->reset_peaks();
          compute::scale_channels(be, x, *s, y);
          check_peak(1);
          compute::scale_channels(ref, x32, *s, y32);
          require_same_bits(y, narrowed_like(y32, y, ref));
          for (bool acc : {false, true})
            for (bool in_place : {false, true}) {
              INFO("accumulate " << acc << (in_place ? " (dx aliases dy)" : ""));
              Tensor dyc = dy.clone(), dx = in_place ? dyc : act(57);
              Tensor ds = half_tensor(s->shape(), DType::F32, 58, alloc), ds32 = ds.clone();
              Tensor dx32 = widened(dx, be);
              alloc->reset_peaks();
              compute::scale_channels_backward(be, dyc, x, *s, &dx, ds, acc);
              check_peak(2);
              compute::scale_channels_backward(ref, dy32, x32, *s, &dx32, ds32, acc);
              require_same_bits(dx, narrowed_like(dx32, dx, ref));
              require_same_bits(ds, ds32);
            }
          Tensor ds = half_tensor(s->shape(), DType::F32, 59, alloc), ds32 = ds.clone();
          compute::scale_channels_backward(be, dy, x, *s, nullptr, ds, false);  // ds alone
          compute::scale_channels_backward(ref, dy32, x32, *s, nullptr, ds32, false);
          require_same_bits(ds, ds32);
        }
        Tensor y = act(60), y32 = widened(y, be);
        alloc->reset_peaks();
        compute::scale_samples(be, x, s_n, y);
        check_peak(1);
        compute::scale_samples(ref, x32, s_n, y32);
        require_same_bits(y, narrowed_like(y32, y, ref));
      }
}
