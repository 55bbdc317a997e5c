// Tensor: shapes, views, strided copies, and booking through the allocator.
#include "support/test_utils.hpp"
#include "tessera/core/tensor.hpp"

using namespace tessera;
using core::DType;
using core::MemCategory;
using core::Tensor;

TEST_CASE("tensor shape, strides and element access", "[core][tensor]") {
  Tensor t = Tensor::zeros({2, 3, 4, 5});
  REQUIRE(t.ndim() == 4);
  REQUIRE(t.numel() == 120);
  REQUIRE(t.nbytes() == 480);
  REQUIRE(t.strides() == core::Shape{60, 20, 5, 1});
  REQUIRE(t.is_contiguous());
  t.at<float>({1, 2, 3, 4}) = 7.f;
  REQUIRE(t.data<float>()[119] == 7.f);
  REQUIRE(t.size(-1) == 5);
  REQUIRE_THROWS_AS(t.data<double>(), InvalidArgument);
  REQUIRE_THROWS_AS(t.at<float>({2, 0, 0, 0}), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor::empty({2, -1}), InvalidArgument);
}

TEST_CASE("a tensor without elements is contiguous", "[core][tensor]") {
  // Tensor::empty gives a 0-extent dim the stride contiguous_strides gives it; the ops that require
  // contiguous tensors (scale, sgd_step, adamw_step) must accept such empty tensors.
  for (const core::Shape& s : {core::Shape{3, 7, 3, 0}, core::Shape{0, 5}, core::Shape{0}}) {
    INFO(core::shape_str(s));
    const Tensor t = Tensor::empty(s);
    REQUIRE(t.is_contiguous());
    REQUIRE(t.reshape({0}).numel() == 0);
  }
  REQUIRE(test::random_tensor({4, 6}, DType::F32, 3).narrow(1, 2, 0).is_contiguous());
}

TEST_CASE("narrow makes views that share storage", "[core][tensor]") {
  Tensor t = test::random_tensor({2, 3, 6, 7}, DType::F64, 1);
  Tensor v = t.narrow(3, 2, 3).narrow(2, 1, 4);
  REQUIRE(v.shape() == core::Shape{2, 3, 4, 3});
  REQUIRE_FALSE(v.is_contiguous());
  REQUIRE(v.shares_storage(t));
  REQUIRE(v.at<double>({1, 2, 0, 0}) == t.at<double>({1, 2, 1, 2}));
  v.at<double>({0, 0, 3, 2}) = 42.0;
  REQUIRE(t.at<double>({0, 0, 4, 4}) == 42.0);
  REQUIRE_THROWS_AS(t.narrow(3, 5, 3), InvalidArgument);
  Tensor c = v.contiguous();
  REQUIRE(c.is_contiguous());
  REQUIRE_FALSE(c.shares_storage(t));
  REQUIRE(test::to_doubles(c) == test::to_doubles(v));
}

TEST_CASE("copy_from, add_from and fill through strided views", "[core][tensor]") {
  Tensor a = test::random_tensor({3, 5, 4}, DType::F32, 2);
  Tensor b = Tensor::zeros({3, 5, 8});
  b.narrow(2, 4, 4).copy_from(a);
  REQUIRE(test::to_doubles(b.narrow(2, 4, 4)) == test::to_doubles(a));
  REQUIRE(test::to_doubles(b.narrow(2, 0, 4)) == std::vector<double>(60, 0.0));
  b.narrow(2, 4, 4).add_from(a);
  const auto twice = test::to_doubles(b.narrow(2, 4, 4));
  const auto once = test::to_doubles(a);
  for (std::size_t i = 0; i < once.size(); ++i) REQUIRE(twice[i] == 2 * once[i]);
  b.narrow(1, 1, 2).fill(3.0);
  REQUIRE(b.at<float>({2, 2, 7}) == 3.f);
  REQUIRE(b.at<float>({2, 3, 7}) != 3.f);
  REQUIRE_THROWS_AS(b.copy_from(a), InvalidArgument);
}

TEST_CASE("reshape needs contiguity, from_blob borrows memory", "[core][tensor]") {
  Tensor t = Tensor::zeros({4, 6});
  REQUIRE(t.reshape({2, 12}).shape() == core::Shape{2, 12});
  REQUIRE_THROWS_AS(t.reshape({5, 5}), InvalidArgument);
  REQUIRE_THROWS_AS(t.narrow(1, 0, 3).reshape({12}), InvalidArgument);
  std::vector<double> mem(6, 1.5);
  Tensor b = Tensor::from_blob(mem.data(), {2, 3}, DType::F64, nullptr);
  b.at<double>({1, 2}) = 9;
  REQUIRE(mem[5] == 9);
}

TEST_CASE("allocator books current and peak bytes by category", "[core][allocator]") {
  auto alloc = std::make_shared<core::Allocator>("rank0");
  {
    Tensor p = Tensor::empty({1000}, DType::F32, MemCategory::Parameter, alloc);
    Tensor a = Tensor::empty({500}, DType::F64, MemCategory::Activation, alloc);
    auto s = alloc->stats();
    REQUIRE(s.current_of(MemCategory::Parameter) == 4000);
    REQUIRE(s.current_of(MemCategory::Activation) == 4000);
    REQUIRE(s.current_total == 8000);
    Tensor view = a.narrow(0, 0, 10);  // views allocate nothing
    REQUIRE(alloc->stats().current_total == 8000);
    Tensor c = view.clone();  // clones keep the category
    REQUIRE(alloc->stats().current_of(MemCategory::Activation) == 4080);
  }
  auto s = alloc->stats();
  REQUIRE(s.current_total == 0);
  REQUIRE(s.peak_total == 8080);
  REQUIRE(s.peak_of(MemCategory::Activation) == 4080);
  REQUIRE(s.peak_of(MemCategory::Parameter) == 4000);
  REQUIRE(s.peak_of(MemCategory::HaloBuffer) == 0);
  alloc->reset_peaks();
  REQUIRE(alloc->stats().peak_total == 0);
  REQUIRE(core::mem_category_name(MemCategory::HaloBuffer) == "halo_buffer");
}

TEST_CASE("allocator capacity refuses an allocation with a clear error", "[core][allocator]") {
  auto alloc = std::make_shared<core::Allocator>("gpu0");
  alloc->set_capacity(1 << 20);
  Tensor a = Tensor::empty({200000}, DType::F32, MemCategory::Activation, alloc);
  try {
    Tensor b = Tensor::empty({100000}, DType::F32, MemCategory::HaloBuffer, alloc);
    FAIL("allocation past the capacity succeeded");
  } catch (const OutOfMemory& e) {
    REQUIRE_THAT(std::string(e.what()), Catch::Matchers::Contains("halo_buffer"));
    REQUIRE_THAT(std::string(e.what()), Catch::Matchers::Contains("capacity of 1048576"));
  }
  REQUIRE(alloc->stats().current_total == 800000);  // the refused block was never booked
}

TEST_CASE("meta tensors book bytes like real ones but hold no memory", "[core][allocator][meta]") {
  auto real = std::make_shared<core::Allocator>("real");
  auto meta = std::make_shared<core::Allocator>("meta", true);
  auto run = [](const core::AllocatorPtr& a) {
    Tensor x = Tensor::zeros({64, 1024, 1024}, DType::F32, MemCategory::Activation, a);  // 256 MiB
    Tensor h = x.narrow(2, 0, 8).clone(MemCategory::HaloBuffer);
    h.fill(1.0);
    x.narrow(2, 0, 8).add_from(h);
    return a->stats();
  };
  const auto sr = run(real), sm = run(meta);
  REQUIRE(sm.peak_total == sr.peak_total);
  REQUIRE(sm.peak_of(MemCategory::HaloBuffer) == 64 * 1024 * 8 * 4);
  REQUIRE(sm.num_allocations == sr.num_allocations);
  Tensor m = Tensor::empty({1ll << 40}, DType::F32, MemCategory::Activation, meta);  // 4 TiB, booked only
  REQUIRE(m.is_meta());
  REQUIRE(m.raw_data() == nullptr);
  REQUIRE(meta->stats().current_total == (std::size_t(1) << 42));
}

TEST_CASE("freed large blocks are reused for the same size without changing the accounting",
          "[core][allocator]") {
  core::Allocator a("cache test");
  const std::size_t big = std::size_t(1) << 20;
  void* p = a.allocate(big, core::MemCategory::Activation);
  a.deallocate(p, big, core::MemCategory::Activation);
  REQUIRE(a.stats().current_total == 0);
  REQUIRE(a.stats().peak_total == big);
  void* q = a.allocate(big, core::MemCategory::Workspace);
  REQUIRE(a.stats().current_of(core::MemCategory::Workspace) == big);
  REQUIRE(a.stats().current_of(core::MemCategory::Activation) == 0);
  if (core::Allocator::caches_blocks()) {
    REQUIRE(q == p);  // the same block, its pages already touched
    REQUIRE(a.cached_bytes() == 0);
  }
  void* small = a.allocate(100, core::MemCategory::Workspace);
  a.deallocate(small, 100, core::MemCategory::Workspace);
  REQUIRE(a.cached_bytes() == 0);  // small blocks go back to malloc
  a.deallocate(q, big, core::MemCategory::Workspace);
  REQUIRE(a.cached_bytes() == (core::Allocator::caches_blocks() ? big : 0));
  REQUIRE(a.stats().current_total == 0);
}

TEST_CASE("as_strided views the storage with any strides, and refuses to reach outside it", "[core][tensor]") {
  core::Tensor t = core::Tensor::empty({12}, core::DType::F32);
  for (int i = 0; i < 12; ++i) t.data<float>()[i] = float(i);
  // A 3x2 view with strides (4, 2) from the first element of the narrowed tensor (element 1).
  const core::Tensor n = t.narrow(0, 1, 11);
  const core::Tensor v = n.as_strided({3, 2}, {4, 2});
  REQUIRE(v.shares_storage(t));
  REQUIRE(v.at<float>({0, 0}) == 1.0f);
  REQUIRE(v.at<float>({0, 1}) == 3.0f);
  REQUIRE(v.at<float>({2, 1}) == 11.0f);  // the last element of the storage
  REQUIRE(n.as_strided({2}, {1}, 3).at<float>({1}) == 5.0f);
  REQUIRE(n.as_strided({0, 5}, {100, 100}, 0).numel() == 0);  // empty: no element to reach
  REQUIRE_THROWS_WITH(n.as_strided({3, 2}, {4, 2}, 1), Catch::Contains("outside the storage"));
  REQUIRE_THROWS_WITH(t.as_strided({2}, {-1}, 0), Catch::Contains("outside the storage"));
  REQUIRE_THROWS_WITH(t.as_strided({2, 2}, {1}, 0), Catch::Contains("2-d shape"));
}
