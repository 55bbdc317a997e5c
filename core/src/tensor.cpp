// Tensor: storage, views and strided copies.
#include "tessera/core/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "tessera/core/half.hpp"

namespace tessera::core {

std::int64_t shape_numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  std::int64_t acc = 1;
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}

Storage::Storage(std::size_t bytes, MemCategory category, AllocatorPtr allocator)
    : bytes_(bytes), category_(category), allocator_(std::move(allocator)) {
  if (allocator_) {
    data_ = allocator_->allocate(bytes, category);
  } else {
    const std::size_t rounded = ((bytes + 63) / 64) * 64;
    data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (data_ == nullptr) throw OutOfMemory(detail::cat("out of host memory allocating ", bytes, " bytes"));
  }
}

Storage::Storage(void* data, std::size_t bytes, std::shared_ptr<void> keepalive)
    : data_(data), bytes_(bytes), keepalive_(std::move(keepalive)) {}

Storage::~Storage() {
  if (keepalive_) return;  // borrowed
  if (allocator_) {  // also unbooks meta blocks (data_ == nullptr)
    allocator_->deallocate(data_, bytes_, category_);
  } else {
    std::free(data_);
  }
}

namespace {
void check_shape(const Shape& shape) {
  for (auto d : shape) TESSERA_CHECK(d >= 0, "tensor shape ", shape_str(shape), " has a negative size");
}
}  // namespace

Tensor Tensor::empty(Shape shape, DType dtype, MemCategory category, AllocatorPtr allocator) {
  check_shape(shape);
  Tensor t;
  t.dtype_ = dtype;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.storage_ = std::make_shared<Storage>(t.nbytes(), category, std::move(allocator));
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, MemCategory category, AllocatorPtr allocator) {
  Tensor t = empty(std::move(shape), dtype, category, std::move(allocator));
  if (t.is_meta() || t.numel() == 0) return t;
  if (DeviceMemory* dm = t.device())
    dm->fill(t, 0.0);
  else
    std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::from_blob(void* data, Shape shape, DType dtype, std::shared_ptr<void> keepalive,
                         Shape strides) {
  check_shape(shape);
  Tensor t;
  t.dtype_ = dtype;
  t.strides_ = strides.empty() ? contiguous_strides(shape) : std::move(strides);
  TESSERA_CHECK(t.strides_.size() == shape.size(), "from_blob: ", shape.size(),
                "-d shape with ", t.strides_.size(), " strides");
  t.shape_ = std::move(shape);
  if (!keepalive) keepalive = std::shared_ptr<void>(data, [](void*) {});
  t.storage_ = std::make_shared<Storage>(data, t.nbytes(), std::move(keepalive));
  return t;
}

std::int64_t Tensor::size(int d) const {
  const int n = ndim();
  if (d < 0) d += n;
  TESSERA_CHECK(d >= 0 && d < n, "tensor ", describe(), " has no dimension ", d);
  return shape_[d];
}

std::int64_t Tensor::stride(int d) const {
  const int n = ndim();
  if (d < 0) d += n;
  TESSERA_CHECK(d >= 0 && d < n, "tensor ", describe(), " has no dimension ", d);
  return strides_[d];
}

bool Tensor::is_contiguous() const noexcept {
  if (numel() == 0) return true;  // no element to be out of place (contiguous_strides counts a 0 dim as 1)
  std::int64_t acc = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != acc) return false;
    acc *= shape_[i];
  }
  return true;
}

MemCategory Tensor::category() const noexcept {
  return storage_ ? storage_->category() : MemCategory::Workspace;
}

DeviceMemory* Tensor::device() const noexcept {
  return storage_ && storage_->allocator() ? storage_->allocator()->device() : nullptr;
}

const AllocatorPtr& Tensor::allocator() const noexcept {
  static const AllocatorPtr kNone;
  return storage_ ? storage_->allocator() : kNone;
}

void* Tensor::raw_data() const noexcept {
  if (!storage_ || storage_->data() == nullptr) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
}

std::int64_t Tensor::element_offset(std::initializer_list<std::int64_t> index) const {
  TESSERA_CHECK(static_cast<int>(index.size()) == ndim(), "tensor ", describe(), ": index with ",
                index.size(), " coordinates");
  std::int64_t off = 0;
  int d = 0;
  for (auto i : index) {
    TESSERA_CHECK(i >= 0 && i < shape_[d], "tensor ", describe(), ": index ", i,
                  " out of range in dimension ", d);
    off += i * strides_[d];
    ++d;
  }
  return off;
}

Tensor Tensor::narrow(int dim, std::int64_t start, std::int64_t length) const {
  const int n = ndim();
  if (dim < 0) dim += n;
  TESSERA_CHECK(dim >= 0 && dim < n, "narrow: tensor ", describe(), " has no dimension ", dim);
  TESSERA_CHECK(start >= 0 && length >= 0 && start + length <= shape_[dim], "narrow: range [",
                start, ",", start + length, ") is outside dimension ", dim, " of ", describe());
  Tensor v = *this;
  v.shape_[dim] = length;
  v.offset_ += start * strides_[dim];
  return v;
}

Tensor Tensor::as_strided(Shape shape, Shape strides, std::int64_t offset) const {
  check_shape(shape);
  TESSERA_CHECK(strides.size() == shape.size(), "as_strided: ", shape.size(), "-d shape ", shape_str(shape),
                " with ", strides.size(), " strides");
  TESSERA_CHECK(storage_ != nullptr, "as_strided: the tensor has no storage");
  const std::int64_t first = offset_ + offset;
  std::int64_t lo = first, hi = first;
  if (shape_numel(shape) > 0)
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const std::int64_t reach = (shape[d] - 1) * strides[d];
      (reach < 0 ? lo : hi) += reach;
    }
  const auto elems = static_cast<std::int64_t>(storage_->bytes() / dtype_size(dtype_));
  TESSERA_CHECK(lo >= 0 && (shape_numel(shape) == 0 || hi < elems), "as_strided: a view ", shape_str(shape),
                " with strides ", shape_str(strides), " at offset ", offset, " reaches elements [", lo, ", ", hi,
                "] outside the storage of ", describe(), " (", elems, " elements)");
  Tensor v = *this;
  v.shape_ = std::move(shape);
  v.strides_ = std::move(strides);
  v.offset_ = first;
  return v;
}

Tensor Tensor::reshape(Shape shape) const {
  TESSERA_CHECK(is_contiguous(), "reshape: tensor ", describe(), " is not contiguous");
  TESSERA_CHECK(shape_numel(shape) == numel(), "reshape: cannot view ", describe(), " as ",
                shape_str(shape));
  Tensor v = *this;
  v.strides_ = contiguous_strides(shape);
  v.shape_ = std::move(shape);
  return v;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const { return clone(category()); }

Tensor Tensor::clone(MemCategory category) const {
  Tensor t = empty(shape_, dtype_, category, allocator());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(const AllocatorPtr& allocator, MemCategory category) const {
  Tensor t = empty(shape_, dtype_, category, allocator);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to_host() const {
  if (is_host()) return *this;
  Tensor t = empty(shape_, dtype_, category(), nullptr);
  t.copy_from(*this);
  return t;
}

namespace {

// Walks every element of two same-shaped strided tensors; the innermost contiguous run is handed
// to `run(dst, src, count)` in elements.
template <class Fn>
void for_each_run(int ndim, const std::int64_t* shape, const std::int64_t* dst_st, const std::int64_t* src_st,
                  char* dst, const char* src, std::size_t esize, Fn&& run) {
  if (ndim == 0) {
    run(dst, src, 1);
    return;
  }
  if (ndim == 1) {
    if (dst_st[0] == 1 && src_st[0] == 1) {
      run(dst, src, shape[0]);
    } else {
      for (std::int64_t i = 0; i < shape[0]; ++i)
        run(dst + i * dst_st[0] * esize, src + i * src_st[0] * esize, 1);
    }
    return;
  }
  for (std::int64_t i = 0; i < shape[0]; ++i)
    for_each_run(ndim - 1, shape + 1, dst_st + 1, src_st + 1, dst + i * dst_st[0] * esize,
                 src + i * src_st[0] * esize, esize, run);
}

}  // namespace

void Tensor::copy_from(const Tensor& src) {
  TESSERA_CHECK(shape_ == src.shape_, "copy_from: shape ", src.describe(), " into ", describe());
  TESSERA_CHECK(dtype_ == src.dtype_, "copy_from: dtype ", dtype_name(src.dtype_), " into ",
                dtype_name(dtype_));
  if (numel() == 0 || is_meta() || src.is_meta()) return;
  if (DeviceMemory* dm = device() ? device() : src.device()) {
    dm->copy(*this, src);
    return;
  }
  const std::size_t es = dtype_size(dtype_);
  if (is_contiguous() && src.is_contiguous()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
    return;
  }
  for_each_run(ndim(), shape_.data(), strides_.data(), src.strides_.data(),
               static_cast<char*>(raw_data()), static_cast<const char*>(src.raw_data()), es,
               [es](char* d, const char* s, std::int64_t n) { std::memcpy(d, s, n * es); });
}

void Tensor::add_from(const Tensor& src) {
  TESSERA_CHECK(shape_ == src.shape_, "add_from: shape ", src.describe(), " into ", describe());
  TESSERA_CHECK(dtype_ == src.dtype_, "add_from: dtype ", dtype_name(src.dtype_), " into ",
                dtype_name(dtype_));
  if (numel() == 0 || is_meta() || src.is_meta()) return;
  if (device() || src.device()) {
    TESSERA_CHECK(space() == src.space(), "add_from: ", src.describe(), " into ", describe(),
                  ": both must be in the same memory; copy one of them first (to() / to_host())");
    device()->add(*this, src);
    return;
  }
  const std::size_t es = dtype_size(dtype_);
  auto body = [&](auto zero) {
    using T = decltype(zero);
    for_each_run(ndim(), shape_.data(), strides_.data(), src.strides_.data(),
                 static_cast<char*>(raw_data()), static_cast<const char*>(src.raw_data()), es,
                 [](char* d, const char* s, std::int64_t n) {
                   T* dd = reinterpret_cast<T*>(d);
                   const T* ss = reinterpret_cast<const T*>(s);
                   for (std::int64_t i = 0; i < n; ++i) dd[i] += ss[i];
                 });
  };
  switch (dtype_) {
    case DType::F32: body(0.0f); break;
    case DType::F64: body(0.0); break;
    case DType::I32: body(std::int32_t{0}); break;
    case DType::I64: body(std::int64_t{0}); break;
    case DType::BF16:
    case DType::F16: {
      // Widen both (exact), add in f32, round once (core/half.hpp).
      const DType t = dtype_;
      for_each_run(ndim(), shape_.data(), strides_.data(), src.strides_.data(),
                   static_cast<char*>(raw_data()), static_cast<const char*>(src.raw_data()), es,
                   [t](char* d, const char* s, std::int64_t n) {
                     auto* dd = reinterpret_cast<std::uint16_t*>(d);
                     const auto* ss = reinterpret_cast<const std::uint16_t*>(s);
                     for (std::int64_t i = 0; i < n; ++i)
                       dd[i] = float_to_half(half_to_float(dd[i], t) + half_to_float(ss[i], t), t);
                   });
      break;
    }
    default:
      throw Unsupported(detail::cat("add_from: dtype ", dtype_name(dtype_), " is not supported on the CPU"));
  }
}

void Tensor::fill(double value) {
  if (numel() == 0 || is_meta()) return;
  if (DeviceMemory* dm = device()) {
    dm->fill(*this, value);
    return;
  }
  const std::size_t es = dtype_size(dtype_);
  auto body = [&](auto typed) {
    using T = decltype(typed);
    const T v = static_cast<T>(value);
    for_each_run(ndim(), shape_.data(), strides_.data(), strides_.data(),
                 static_cast<char*>(raw_data()), static_cast<const char*>(raw_data()), es,
                 [v](char* d, const char*, std::int64_t n) {
                   T* dd = reinterpret_cast<T*>(d);
                   for (std::int64_t i = 0; i < n; ++i) dd[i] = v;
                 });
  };
  switch (dtype_) {
    case DType::F32: body(0.0f); break;
    case DType::F64: body(0.0); break;
    case DType::I32: body(std::int32_t{0}); break;
    case DType::I64: body(std::int64_t{0}); break;
    case DType::BF16:
    case DType::F16: {
      const std::uint16_t v = double_to_half(value, dtype_);  // the value rounded once
      for_each_run(ndim(), shape_.data(), strides_.data(), strides_.data(),
                   static_cast<char*>(raw_data()), static_cast<const char*>(raw_data()), es,
                   [v](char* d, const char*, std::int64_t n) {
                     auto* dd = reinterpret_cast<std::uint16_t*>(d);
                     for (std::int64_t i = 0; i < n; ++i) dd[i] = v;
                   });
      break;
    }
    default:
      TESSERA_CHECK(value == 0.0, "fill: dtype ", dtype_name(dtype_), " can only be zero-filled");
      for_each_run(ndim(), shape_.data(), strides_.data(), strides_.data(),
                   static_cast<char*>(raw_data()), static_cast<const char*>(raw_data()), es,
                   [es](char* d, const char*, std::int64_t n) { std::memset(d, 0, n * es); });
  }
}

std::string Tensor::describe() const {
  std::string d = std::string(dtype_name(dtype_)) + shape_str(shape_);
  if (!is_host()) {
    d += '@';
    d.append(memory_space_name(space()));
  }
  return d;
}

}  // namespace tessera::core
