// The cuda backend end to end: creation (and, without a device, the reason it gives), the
// stream-ordered pool's figures, host<->device copies of strided views, and every library path
// and one kernel body against the cpu backend; the bf16/f16 library paths (f32 accumulation, f32
// master weights and weight gradients) against the cpu backend's f32 on the widened values. The
// [gpu] tests need a visible CUDA device and skip with the reason elsewhere; the no-device test
// runs everywhere.
#include <cstring>

#include "compute/cuda/cuda_support.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/compute/cuda.hpp"
#include "tessera/compute/ops.hpp"

namespace {

using namespace tessera;
using core::DType;
using core::MemCategory;
using core::Tensor;
using test::to_doubles;

// Tensor-scaled tolerances against the cpu backend. f32 GEMMs of these lengths (≤ 49 products)
// differ from the cpu backend by summation order only (a few ulps: 2e-5 leaves a wide margin);
// cuDNN may pick Winograd or FFT algorithms for a convolution, whose f32 transforms cost about one
// more decimal digit (1e-4). f64: summation order only.
constexpr double kF32Tol = 2e-5;
constexpr double kF32ConvTol = 1e-4;
constexpr double kF64Tol = 1e-12;

double tol(DType t) { return t == DType::F64 ? kF64Tol : kF32Tol; }
double conv_tol(DType t) { return t == DType::F64 ? kF64Tol : kF32ConvTol; }

}  // namespace

TEST_CASE("cuda: without a device create says why, with one it makes a cuda backend",
          "[cuda][backend]") {
  compute::Registry r;
  register_builtin_backends(r);
  REQUIRE(r.contains("cuda"));
  const std::string why = compute_backend_unusable("cuda");
  if (!why.empty()) {
    INFO("why: " << why);
    REQUIRE(why.find("no CUDA device visible (cudaGetDeviceCount: ") != std::string::npos);
    try {
      (void)r.create("cuda", {});
      FAIL("create succeeded without a device");
    } catch (const Unsupported& e) {
      REQUIRE(std::string(e.what()).find(
                  "cuda: built, no CUDA device visible (cudaGetDeviceCount: ") == 0);
    }
    return;
  }
  auto b = r.create("cuda", {});
  REQUIRE(b->name() == "cuda");
  REQUIRE(b->device_memory() != nullptr);
  REQUIRE(b->device_memory()->space() == core::MemorySpace::Cuda);
  compute::BackendOptions bad;
  bad.device = 1000;
  REQUIRE_THROWS_AS(r.create("cuda", bad), InvalidArgument);
}

TEST_CASE("cuda (GPU): streams, events and the pool's reserved vs booked figures", "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  auto* dev = dynamic_cast<compute::cuda::CudaDevice*>(g.backend.get());
  REQUIRE(dev != nullptr);
  REQUIRE(dev->compute_stream() != nullptr);
  REQUIRE(dev->comm_stream() != nullptr);
  REQUIRE(dev->compute_stream() != dev->comm_stream());
  REQUIRE_FALSE(dev->tf32());
  dev->comm_waits_for_compute();
  dev->compute_waits_for_comm();
  {
    Tensor a = Tensor::zeros({1024, 1024}, DType::F32, MemCategory::Parameter, g.alloc);
    Tensor b = Tensor::empty({3, 1000, 7}, DType::F64, MemCategory::Activation, g.alloc);
    REQUIRE(a.space() == core::MemorySpace::Cuda);
    const core::MemStats s = g.alloc->stats();
    REQUIRE(s.current_total == a.nbytes() + b.nbytes());
    REQUIRE(s.reserved >= s.current_total);
    REQUIRE(s.peak_reserved >= s.reserved);
  }
  // Freed blocks stay in the pool (the release threshold keeps them): reserved does not drop.
  const core::MemStats after = g.alloc->stats();
  REQUIRE(after.current_total == 0);
  REQUIRE(after.reserved >= std::size_t{4} << 20);
  // A request no device can meet: OutOfMemory naming the request.
  try {
    [[maybe_unused]] Tensor huge =
        Tensor::empty({std::int64_t{1} << 50}, DType::F64, MemCategory::Activation, g.alloc);
    FAIL("an 8 PiB tensor was allocated");
  } catch (const OutOfMemory& e) {
    REQUIRE(std::string(e.what()).find("requested") != std::string::npos);
  }
}

TEST_CASE("cuda (GPU): host<->device copies of strided views, fill and add", "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor host = test::random_tensor({2, 5, 9, 11}, dt, 7);
    const Tensor dev = g.put(host);
    REQUIRE(to_doubles(dev.to_host()) == to_doubles(host));
    // device view -> host: the strided kernel into staging, then one transfer.
    const Tensor view = dev.narrow(2, 2, 5).narrow(3, 1, 7);
    REQUIRE(to_doubles(view.to_host()) == to_doubles(host.narrow(2, 2, 5).narrow(3, 1, 7)));
    // host view -> device view.
    Tensor big = Tensor::zeros({2, 5, 9, 11}, dt, MemCategory::Activation, g.alloc);
    Tensor window = big.narrow(3, 3, 6);
    window.copy_from(host.narrow(2, 0, 9).narrow(3, 4, 6));
    Tensor expect = Tensor::zeros({2, 5, 9, 11}, dt);
    expect.narrow(3, 3, 6).copy_from(host.narrow(3, 4, 6));
    REQUIRE(to_doubles(big.to_host()) == to_doubles(expect));
    // device -> device strided, fill of a strided view, add of views.
    Tensor other = Tensor::zeros({2, 5, 9, 11}, dt, MemCategory::Activation, g.alloc);
    other.narrow(1, 1, 3).copy_from(dev.narrow(1, 2, 3));
    expect.zero();
    expect.narrow(1, 1, 3).copy_from(host.narrow(1, 2, 3));
    REQUIRE(to_doubles(other.to_host()) == to_doubles(expect));
    other.narrow(2, 0, 4).fill(2.5);
    expect.narrow(2, 0, 4).fill(2.5);
    other.narrow(3, 0, 5).add_from(dev.narrow(3, 6, 5));
    expect.narrow(3, 0, 5).add_from(host.narrow(3, 6, 5));
    REQUIRE(to_doubles(other.to_host()) == to_doubles(expect));
  }
  // Integer tensors (labels) move bit for bit.
  Tensor labels = Tensor::empty({4, 6}, DType::I64);
  for (int i = 0; i < 24; ++i) labels.data<std::int64_t>()[i] = i * 1000003 - 7;
  const Tensor back = g.put(labels).narrow(1, 1, 4).to_host();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c)
      REQUIRE(back.at<std::int64_t>({r, c}) == labels.at<std::int64_t>({r, c + 1}));
}

namespace {

struct ConvCase {
  const char* what;
  int n, cin, cout, h, w, oh, ow;
  compute::Conv2dParams p;
};

// Geometries of the table: dense, strided, dilated, grouped, depthwise, and output windows that
// cuDNN's own extent formula does not give (negative pad: a shard's interior; pad ≥ stride with a
// shorter output: the zero-padded frame).
std::vector<ConvCase> conv_cases() {
  return {
      {"3x3 same", 2, 4, 6, 9, 10, 9, 10, {3, 3, 1, 1, 1, 1, 1, 1, 1}},
      {"3x3 stride 2", 2, 4, 6, 9, 10, 5, 5, {3, 3, 2, 2, 1, 1, 1, 1, 1}},
      {"3x3 dilation 2", 1, 3, 5, 11, 9, 11, 9, {3, 3, 1, 1, 2, 2, 2, 2, 1}},
      {"grouped g=2", 2, 4, 6, 8, 8, 8, 8, {3, 3, 1, 1, 1, 1, 1, 1, 2}},
      {"depthwise 7x7", 2, 8, 8, 12, 12, 12, 12, {7, 7, 1, 1, 3, 3, 1, 1, 8}},
      {"window inside (pad -1)", 1, 3, 4, 10, 10, 6, 7, {3, 3, 1, 1, -1, -1, 1, 1, 1}},
      {"framed window (pad 3, stride 1, short output)",
       1,
       3,
       4,
       10,
       10,
       5,
       12,
       {3, 3, 1, 1, 3, 2, 1, 1, 1}},
      {"2x2 patchify stride 2", 2, 3, 8, 8, 8, 4, 4, {2, 2, 2, 2, 0, 0, 1, 1, 1}},
  };
}

}  // namespace

TEST_CASE(
    "cuda (GPU): cuDNN convolutions match the cpu backend (forward, data and weight gradient)",
    "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  compute::cpu::CpuBackend cpu(1);
  for (DType dt : {DType::F32, DType::F64})
    for (const ConvCase& c : conv_cases()) {
      INFO(c.what << " " << core::dtype_name(dt));
      const auto& p = c.p;
      // x is a view into a wider tensor (strided rows), as a shard with halo slots would be.
      const Tensor xwide = test::random_tensor({c.n, c.cin, c.h, c.w + 3}, dt, 1);
      const Tensor x = xwide.narrow(3, 1, c.w);
      const Tensor w =
          test::random_tensor({c.cout, c.cin / p.groups, p.kernel_h, p.kernel_w}, dt, 2);
      const Tensor bias = test::random_tensor({c.cout}, dt, 3);
      const Tensor dy = test::random_tensor({c.n, c.cout, c.oh, c.ow}, dt, 4);
      const Tensor dxd = g.put(xwide).narrow(3, 1, c.w), wd = g.put(w), bd = g.put(bias),
                   dyd = g.put(dy);

      Tensor y_ref = Tensor::zeros({c.n, c.cout, c.oh, c.ow}, dt);
      compute::conv2d_forward(cpu, p, x, w, &bias, y_ref);
      Tensor y = Tensor::zeros({c.n, c.cout, c.oh, c.ow}, dt, MemCategory::Activation, g.alloc);
      compute::conv2d_forward(*g.backend, p, dxd, wd, &bd, y);
      REQUIRE_CLOSE(to_doubles(y.to_host()), to_doubles(y_ref), conv_tol(dt));

      // Data gradient, overwritten then accumulated.
      const Tensor seed = test::random_tensor({c.n, c.cin, c.h, c.w}, dt, 5);
      for (bool acc : {false, true}) {
        Tensor dx_ref = seed.clone();
        compute::conv2d_backward_data(cpu, p, dy, w, dx_ref, acc);
        Tensor dx = g.put(seed);
        compute::conv2d_backward_data(*g.backend, p, dyd, wd, dx, acc);
        INFO("accumulate " << acc);
        REQUIRE_CLOSE(to_doubles(dx.to_host()), to_doubles(dx_ref), conv_tol(dt));
      }
      // Weight and bias gradient, overwritten then accumulated.
      const Tensor wseed = test::random_tensor(w.shape(), dt, 6),
                   bseed = test::random_tensor({c.cout}, dt, 8);
      for (bool acc : {false, true}) {
        Tensor dw_ref = wseed.clone(), db_ref = bseed.clone();
        compute::conv2d_backward_weight(cpu, p, x, dy, dw_ref, &db_ref, acc);
        Tensor dw = g.put(wseed), db = g.put(bseed);
        compute::conv2d_backward_weight(*g.backend, p, dxd, dyd, dw, &db, acc);
        INFO("accumulate " << acc);
        REQUIRE_CLOSE(to_doubles(dw.to_host()), to_doubles(dw_ref), conv_tol(dt));
        REQUIRE_CLOSE(to_doubles(db.to_host()), to_doubles(db_ref), conv_tol(dt));
      }
    }
}

TEST_CASE("cuda (GPU): the convolution algorithm is chosen once per geometry", "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  auto* dev = dynamic_cast<compute::cuda::CudaDevice*>(g.backend.get());
  REQUIRE(dev != nullptr);
  const compute::Conv2dParams p{3, 3, 1, 1, 1, 1, 1, 1, 1};
  const Tensor x = g.put(test::random_tensor({2, 4, 8, 8}, DType::F32, 31));
  const Tensor w = g.put(test::random_tensor({6, 4, 3, 3}, DType::F32, 32));
  Tensor y = Tensor::zeros({2, 6, 8, 8}, DType::F32, MemCategory::Activation, g.alloc);
  REQUIRE(dev->cached_conv_algorithms() == 0);
  compute::conv2d_forward(*g.backend, p, x, w, nullptr, y);
  REQUIRE(dev->cached_conv_algorithms() == 1);
  compute::conv2d_forward(*g.backend, p, x, w, nullptr, y);
  REQUIRE(dev->cached_conv_algorithms() == 1);
  // Another geometry (a stride) and another op each choose their own.
  Tensor y2 = Tensor::zeros({2, 6, 4, 4}, DType::F32, MemCategory::Activation, g.alloc);
  compute::conv2d_forward(*g.backend, {3, 3, 2, 2, 1, 1, 1, 1, 1}, x, w, nullptr, y2);
  REQUIRE(dev->cached_conv_algorithms() == 2);
  Tensor dx = Tensor::zeros({2, 4, 8, 8}, DType::F32, MemCategory::Gradient, g.alloc);
  compute::conv2d_backward_data(*g.backend, p, y, w, dx);
  REQUIRE(dev->cached_conv_algorithms() == 3);
}

TEST_CASE("cuda (GPU): cuBLAS linear forward and backward match the cpu backend", "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  compute::cpu::CpuBackend cpu(1);
  const std::int64_t m = 37, k = 29, n = 13;
  for (DType dt : {DType::F32, DType::F64}) {
    INFO(core::dtype_name(dt));
    // x is a column window of a wider matrix: unit inner stride, row stride (lda) > K.
    const Tensor xwide = test::random_tensor({m, k + 5}, dt, 11);
    const Tensor x = xwide.narrow(1, 2, k);
    const Tensor w = test::random_tensor({n, k}, dt, 12), bias = test::random_tensor({n}, dt, 13);
    const Tensor dy = test::random_tensor({m, n}, dt, 14);
    const Tensor xd = g.put(xwide).narrow(1, 2, k), wd = g.put(w), bd = g.put(bias),
                 dyd = g.put(dy);
    for (bool with_bias : {false, true}) {
      Tensor y_ref = Tensor::zeros({m, n}, dt);
      compute::linear_forward(cpu, x, w, with_bias ? &bias : nullptr, y_ref);
      Tensor y = Tensor::zeros({m, n}, dt, MemCategory::Activation, g.alloc);
      compute::linear_forward(*g.backend, xd, wd, with_bias ? &bd : nullptr, y);
      INFO("bias " << with_bias);
      REQUIRE_CLOSE(to_doubles(y.to_host()), to_doubles(y_ref), tol(dt));
    }
    const Tensor dwseed = test::random_tensor({n, k}, dt, 15),
                 dbseed = test::random_tensor({n}, dt, 16);
    for (bool acc : {false, true}) {
      Tensor dx_ref = Tensor::zeros({m, k}, dt), dw_ref = dwseed.clone(), db_ref = dbseed.clone();
      compute::linear_backward(cpu, dy, x, w, &dx_ref, dw_ref, &db_ref, acc);
      Tensor dx = Tensor::zeros({m, k}, dt, MemCategory::Activation, g.alloc);
      Tensor dw = g.put(dwseed), db = g.put(dbseed);
      compute::linear_backward(*g.backend, dyd, xd, wd, &dx, dw, &db, acc);
      INFO("accumulate " << acc);
      REQUIRE_CLOSE(to_doubles(dx.to_host()), to_doubles(dx_ref), tol(dt));
      REQUIRE_CLOSE(to_doubles(dw.to_host()), to_doubles(dw_ref), tol(dt));
      REQUIRE_CLOSE(to_doubles(db.to_host()), to_doubles(db_ref), tol(dt));
    }
  }
}

TEST_CASE("cuda (GPU): kernel bodies launched on the device match the cpu backend", "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  compute::cpu::CpuBackend cpu(1);
  for (DType dt : {DType::F32, DType::F64}) {
    INFO(core::dtype_name(dt));
    const Tensor a = test::random_tensor({2, 6, 7, 9}, dt, 21),
                 b = test::random_tensor({2, 6, 7, 9}, dt, 22);
    // add of strided views (a pass over the body, grid-stride).
    Tensor y_ref = Tensor::zeros({2, 6, 7, 5}, dt);
    compute::add(cpu, a.narrow(3, 0, 5), b.narrow(3, 4, 5), y_ref);
    Tensor y = Tensor::zeros({2, 6, 7, 5}, dt, MemCategory::Activation, g.alloc);
    compute::add(*g.backend, g.put(a).narrow(3, 0, 5), g.put(b).narrow(3, 4, 5), y);
    REQUIRE(to_doubles(y.to_host()) == to_doubles(y_ref));
    // A reduction with a workspace (per-tile partial sums, then the combine pass): layernorm.
    const Tensor gamma = test::random_tensor({6}, dt, 23), beta = test::random_tensor({6}, dt, 24);
    Tensor ly_ref = Tensor::zeros(a.shape(), dt), mean_ref = Tensor::zeros({2, 7, 9}, dt),
           rstd_ref = Tensor::zeros({2, 7, 9}, dt);
    compute::layernorm_forward(cpu, a, gamma, beta, 1e-6, ly_ref, mean_ref, rstd_ref);
    Tensor ly = Tensor::zeros(a.shape(), dt, MemCategory::Activation, g.alloc);
    Tensor mean = Tensor::zeros({2, 7, 9}, dt, MemCategory::Activation, g.alloc);
    Tensor rstd = Tensor::zeros({2, 7, 9}, dt, MemCategory::Activation, g.alloc);
    compute::layernorm_forward(*g.backend, g.put(a), g.put(gamma), g.put(beta), 1e-6, ly, mean,
                               rstd);
    REQUIRE_CLOSE(to_doubles(ly.to_host()), to_doubles(ly_ref), tol(dt));
    REQUIRE_CLOSE(to_doubles(mean.to_host()), to_doubles(mean_ref), tol(dt));
  }
}

// ---- bf16/f16 (issue 18) --------------------------------------------------------------------
// The reference: the cpu backend in f32 on the 16-bit inputs widened (exact) and on the f32
// weight rounded to the dtype (what the GPU computes with). Tolerances, tensor-scaled, from the
// unit roundoff u of the dtype: a 16-bit output is the f32-accumulated result rounded once (u),
// a forward with bias rounds the bias too (2u); an f32 dw/db of a convolution goes through cuDNN's
// 16-bit gradient (u); linear's f32 dw/db come out of cuBLAS in f32 (kF32ConvTol: far below u,
// which proves they were never rounded to 16 bits).

TEST_CASE("cuda (GPU): bf16/f16 convolutions accumulate in f32, with f32 weights and gradients",
          "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  compute::cpu::CpuBackend cpu(1);
  using test::cuda::half_of;
  using test::cuda::widened;
  for (DType dt : {DType::BF16, DType::F16})
    for (const ConvCase& c : conv_cases()) {
      INFO(c.what << " " << core::dtype_name(dt));
      const double u = core::unit_roundoff(dt);
      const auto& p = c.p;
      const Tensor x16 = half_of(test::random_tensor({c.n, c.cin, c.h, c.w}, DType::F32, 1), dt);
      const Tensor w =
          test::random_tensor({c.cout, c.cin / p.groups, p.kernel_h, p.kernel_w}, DType::F32, 2);
      const Tensor bias = test::random_tensor({c.cout}, DType::F32, 3);
      const Tensor dy16 =
          half_of(test::random_tensor({c.n, c.cout, c.oh, c.ow}, DType::F32, 4), dt);
      const Tensor x = widened(x16), dy = widened(dy16), wr = widened(half_of(w, dt)),
                   br = widened(half_of(bias, dt));
      const Tensor xd = g.put(x16), dyd = g.put(dy16), wd = g.put(w), bd = g.put(bias);

      Tensor y_ref = Tensor::zeros({c.n, c.cout, c.oh, c.ow});
      compute::conv2d_forward(cpu, p, x, wr, &br, y_ref);
      Tensor y = Tensor::zeros({c.n, c.cout, c.oh, c.ow}, dt, MemCategory::Activation, g.alloc);
      compute::conv2d_forward(*g.backend, p, xd, wd, &bd, y);
      REQUIRE_CLOSE(to_doubles(widened(y)), to_doubles(y_ref), 2 * u + kF32ConvTol);

      Tensor dx_ref = Tensor::zeros({c.n, c.cin, c.h, c.w});
      compute::conv2d_backward_data(cpu, p, dy, wr, dx_ref, false);
      Tensor dx = Tensor::zeros({c.n, c.cin, c.h, c.w}, dt, MemCategory::Activation, g.alloc);
      compute::conv2d_backward_data(*g.backend, p, dyd, wd, dx, false);
      REQUIRE_CLOSE(to_doubles(widened(dx)), to_doubles(dx_ref), u + kF32ConvTol);

      const Tensor wseed = test::random_tensor(w.shape(), DType::F32, 6),
                   bseed = test::random_tensor({c.cout}, DType::F32, 8);
      for (bool acc : {false, true}) {
        INFO("accumulate " << acc);
        Tensor dw_ref = wseed.clone(), db_ref = bseed.clone();
        compute::conv2d_backward_weight(cpu, p, x, dy, dw_ref, &db_ref, acc);
        Tensor dw = g.put(wseed, MemCategory::Gradient), db = g.put(bseed, MemCategory::Gradient);
        compute::conv2d_backward_weight(*g.backend, p, xd, dyd, dw, &db, acc);
        REQUIRE(dw.dtype() == DType::F32);
        REQUIRE_CLOSE(to_doubles(dw.to_host()), to_doubles(dw_ref), u + kF32ConvTol);
        REQUIRE_CLOSE(to_doubles(db.to_host()), to_doubles(db_ref), u + kF32ConvTol);
      }
    }
}

TEST_CASE("cuda (GPU): bf16/f16 linear accumulates in f32 and writes f32 dw/db directly",
          "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  compute::cpu::CpuBackend cpu(1);
  using test::cuda::half_of;
  using test::cuda::widened;
  const std::int64_t m = 37, k = 29, n = 13;
  for (DType dt : {DType::BF16, DType::F16}) {
    INFO(core::dtype_name(dt));
    const double u = core::unit_roundoff(dt);
    const Tensor x16 = half_of(test::random_tensor({m, k}, DType::F32, 11), dt);
    const Tensor w = test::random_tensor({n, k}, DType::F32, 12),
                 bias = test::random_tensor({n}, DType::F32, 13);
    const Tensor dy16 = half_of(test::random_tensor({m, n}, DType::F32, 14), dt);
    const Tensor x = widened(x16), dy = widened(dy16), wr = widened(half_of(w, dt)),
                 br = widened(half_of(bias, dt));
    const Tensor xd = g.put(x16), dyd = g.put(dy16), wd = g.put(w), bd = g.put(bias);
    Tensor y_ref = Tensor::zeros({m, n});
    compute::linear_forward(cpu, x, wr, &br, y_ref);
    Tensor y = Tensor::zeros({m, n}, dt, MemCategory::Activation, g.alloc);
    compute::linear_forward(*g.backend, xd, wd, &bd, y);
    REQUIRE_CLOSE(to_doubles(widened(y)), to_doubles(y_ref), 2 * u + kF32Tol);
    const Tensor dwseed = test::random_tensor({n, k}, DType::F32, 15),
                 dbseed = test::random_tensor({n}, DType::F32, 16);
    for (bool acc : {false, true}) {
      INFO("accumulate " << acc);
      Tensor dx_ref = Tensor::zeros({m, k}), dw_ref = dwseed.clone(), db_ref = dbseed.clone();
      compute::linear_backward(cpu, dy, x, wr, &dx_ref, dw_ref, &db_ref, acc);
      Tensor dx = Tensor::zeros({m, k}, dt, MemCategory::Activation, g.alloc);
      Tensor dw = g.put(dwseed, MemCategory::Gradient), db = g.put(dbseed, MemCategory::Gradient);
      compute::linear_backward(*g.backend, dyd, xd, wd, &dx, dw, &db, acc);
      REQUIRE_CLOSE(to_doubles(widened(dx)), to_doubles(dx_ref), u + kF32Tol);
      REQUIRE_CLOSE(to_doubles(dw.to_host()), to_doubles(dw_ref), kF32ConvTol);
      REQUIRE_CLOSE(to_doubles(db.to_host()), to_doubles(db_ref), kF32ConvTol);
    }
  }
}

TEST_CASE("cuda (GPU): kernel bodies in bf16/f16 (widened, f32 bodies, rounded once) on the device",
          "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  compute::cpu::CpuBackend cpu(1);
  using test::cuda::half_of;
  using test::cuda::widened;
  for (DType dt : {DType::BF16, DType::F16}) {
    INFO(core::dtype_name(dt));
    const double u = core::unit_roundoff(dt);
    const Tensor a16 = half_of(test::random_tensor({2, 6, 7, 9}, DType::F32, 21), dt),
                 b16 = half_of(test::random_tensor({2, 6, 7, 9}, DType::F32, 22), dt);
    const Tensor a = widened(a16), b = widened(b16);
    Tensor y_ref = Tensor::zeros({2, 6, 7, 5});
    compute::add(cpu, a.narrow(3, 0, 5), b.narrow(3, 4, 5), y_ref);
    Tensor y = Tensor::zeros({2, 6, 7, 5}, dt, MemCategory::Activation, g.alloc);
    compute::add(*g.backend, g.put(a16).narrow(3, 0, 5), g.put(b16).narrow(3, 4, 5), y);
    REQUIRE_CLOSE(to_doubles(widened(y)), to_doubles(y_ref), u);
    // layernorm with f32 gamma/beta and f32 statistics (Master slots) and a 16-bit y.
    const Tensor gamma = test::random_tensor({6}, DType::F32, 23),
                 beta = test::random_tensor({6}, DType::F32, 24);
    Tensor ly_ref = Tensor::zeros(a.shape()), mean_ref = Tensor::zeros({2, 7, 9}),
           rstd_ref = Tensor::zeros({2, 7, 9});
    compute::layernorm_forward(cpu, a, gamma, beta, 1e-6, ly_ref, mean_ref, rstd_ref);
    Tensor ly = Tensor::zeros(a.shape(), dt, MemCategory::Activation, g.alloc);
    Tensor mean = Tensor::zeros({2, 7, 9}, DType::F32, MemCategory::Activation, g.alloc);
    Tensor rstd = Tensor::zeros({2, 7, 9}, DType::F32, MemCategory::Activation, g.alloc);
    compute::layernorm_forward(*g.backend, g.put(a16), g.put(gamma), g.put(beta), 1e-6, ly, mean,
                               rstd);
    REQUIRE_CLOSE(to_doubles(widened(ly)), to_doubles(ly_ref), u + kF32Tol);
    REQUIRE_CLOSE(to_doubles(mean.to_host()), to_doubles(mean_ref), kF32Tol);
    // An op without a 16-bit body: widened into f32 scratch on the device, rounded once.
    Tensor cs_ref = Tensor::zeros({2, 6});
    compute::channel_sum(cpu, a, cs_ref);
    Tensor cs = Tensor::zeros({2, 6}, dt, MemCategory::Activation, g.alloc);
    compute::channel_sum(*g.backend, g.put(a16), cs);
    REQUIRE_CLOSE(to_doubles(widened(cs)), to_doubles(cs_ref), u + kF32Tol);
    // copy between the dtypes on the device (the conversion kernels).
    Tensor c32 = Tensor::zeros(a.shape(), DType::F32, MemCategory::Activation, g.alloc);
    compute::copy(*g.backend, g.put(a16), c32);
    REQUIRE(to_doubles(c32.to_host()) == to_doubles(a));
    Tensor c16 = Tensor::zeros(a.shape(), dt, MemCategory::Activation, g.alloc);
    compute::copy(*g.backend, g.put(a), c16);
    REQUIRE(to_doubles(widened(c16)) == to_doubles(a));
  }
}

TEST_CASE("cuda (GPU): the device rounds and widens 16-bit values with core/half.hpp's bits",
          "[cuda][gpu]") {
  TESSERA_CUDA_REQUIRE_GPU(g);
  // Every 16-bit pattern widened, and f32 values at the rounding boundaries narrowed: binary32
  // subnormals (bf16 flushes them; CUDA's __float2bfloat16_rn would not), ties to even, the
  // largest finite values and the overflow threshold, infinities, NaNs; plus a sweep of exponents.
  std::vector<std::uint32_t> bits;
  for (std::uint32_t e = 0; e < 256; ++e)
    for (std::uint32_t m : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u, 0xfffu, 0x1000u, 0x1001u,
                            0x3000u, 0x7fffffu, 0x400000u})
      for (std::uint32_t sign : {0u, 0x80000000u}) bits.push_back(sign | (e << 23) | m);
  const auto n = static_cast<std::int64_t>(bits.size());
  Tensor f = Tensor::empty({n}, DType::F32, MemCategory::Workspace);
  std::memcpy(f.raw_data(), bits.data(), bits.size() * 4);
  for (DType dt : {DType::BF16, DType::F16}) {
    INFO(core::dtype_name(dt));
    Tensor h = Tensor::zeros({n}, dt, MemCategory::Activation, g.alloc);
    compute::copy(*g.backend, g.put(f), h);
    const Tensor hh = h.to_host();
    const auto* got = static_cast<const std::uint16_t*>(hh.raw_data());
    for (std::int64_t i = 0; i < n; ++i) {
      INFO("f32 bits 0x" << std::hex << bits[std::size_t(i)]);
      REQUIRE(got[i] == core::float_to_half(f.data<float>()[i], dt));
    }
    Tensor all = Tensor::empty({65536}, dt, MemCategory::Workspace);
    for (std::uint32_t p = 0; p < 65536; ++p)
      static_cast<std::uint16_t*>(all.raw_data())[p] = static_cast<std::uint16_t>(p);
    Tensor w = Tensor::zeros({65536}, DType::F32, MemCategory::Activation, g.alloc);
    compute::copy(*g.backend, g.put(all), w);
    const Tensor wh = w.to_host();
    for (std::uint32_t p = 0; p < 65536; ++p) {
      const float want = core::half_to_float(static_cast<std::uint16_t>(p), dt);
      INFO("16-bit pattern 0x" << std::hex << p);
      REQUIRE(std::memcmp(&wh.data<float>()[p], &want, 4) == 0);
    }
  }
}
