// The cpu backend's bf16/f16 calls beyond the conformance suite: the f32 workspace they book (the
// 16-bit tensors widened, f32 Master slots not copied, nothing left booked), in-place use, one
// rounding of the output, and the same bits for any thread count.
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
