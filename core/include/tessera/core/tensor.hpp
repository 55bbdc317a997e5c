// Dense strided tensor, on the host or on a device, its storage booked with a rank's Allocator.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/allocator.hpp"
#include "tessera/core/dtype.hpp"
#include "tessera/core/error.hpp"

namespace tessera::core {

using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a 0-d shape).
std::int64_t shape_numel(const Shape& s);
/// "[2,96,128,512]".
std::string shape_str(const Shape& s);
/// Row-major (C-order) strides of a shape, in elements.
Shape contiguous_strides(const Shape& s);

/// A block of bytes. Owns it through an Allocator (booked under one category) or borrows it
/// (from_blob: not booked, kept alive by `keepalive`).
class Storage {
 public:
  Storage(std::size_t bytes, MemCategory category, AllocatorPtr allocator);
  Storage(void* data, std::size_t bytes, std::shared_ptr<void> keepalive);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const noexcept { return data_; }
  /// Booked but holding no memory (from a meta Allocator).
  bool is_meta() const noexcept { return allocator_ && allocator_->is_meta(); }
  /// Where the bytes are: the allocator's space (host without one).
  MemorySpace space() const noexcept { return allocator_ ? allocator_->space() : MemorySpace::Host; }
  std::size_t bytes() const noexcept { return bytes_; }
  MemCategory category() const noexcept { return category_; }
  const AllocatorPtr& allocator() const noexcept { return allocator_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemCategory category_ = MemCategory::Workspace;
  AllocatorPtr allocator_;
  std::shared_ptr<void> keepalive_;
};

/// A dense N-d tensor (layout NCHW for images): shape, strides in elements, an offset into shared
/// storage. Copies of a Tensor share storage; `narrow` makes views; `clone` copies data.
/// Without an allocator, storage is plain heap memory that no one books (tests, scratch).
/// A tensor whose allocator is built on a DeviceMemory lives on that device: views, shapes and
/// raw_data() (the device address, for kernels) work as on the host; copy_from, add_from, fill,
/// clone and to() run through the device memory; data<T>() and at<T>() refuse it (host code
/// cannot read device memory: copy it with to_host() first).
class Tensor {
 public:
  Tensor() = default;

  /// Uninitialised contiguous tensor.
  static Tensor empty(Shape shape, DType dtype = DType::F32,
                      MemCategory category = MemCategory::Activation,
                      AllocatorPtr allocator = nullptr);
  /// Zero-filled contiguous tensor.
  static Tensor zeros(Shape shape, DType dtype = DType::F32,
                      MemCategory category = MemCategory::Activation,
                      AllocatorPtr allocator = nullptr);
  /// Wraps memory owned elsewhere (e.g. a NumPy array) without copying or booking it.
  static Tensor from_blob(void* data, Shape shape, DType dtype, std::shared_ptr<void> keepalive,
                          Shape strides = {});

  bool defined() const noexcept { return storage_ != nullptr; }
  /// A tensor with a shape and booked bytes but no data (see Allocator's meta mode). Data
  /// operations (copy_from, add_from, fill) on it do nothing; kernels must not read it.
  bool is_meta() const noexcept { return storage_ && storage_->is_meta(); }
  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  const Shape& strides() const noexcept { return strides_; }
  int ndim() const noexcept { return static_cast<int>(shape_.size()); }
  /// Size of dimension `d` (negative counts from the end).
  std::int64_t size(int d) const;
  std::int64_t stride(int d) const;
  std::int64_t numel() const noexcept { return shape_numel(shape_); }
  std::size_t nbytes() const noexcept { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const noexcept;
  MemCategory category() const noexcept;
  const AllocatorPtr& allocator() const noexcept;
  /// True when both tensors view the same storage.
  bool shares_storage(const Tensor& other) const noexcept { return storage_ == other.storage_; }

  /// Host, or the device of the allocator.
  MemorySpace space() const noexcept { return storage_ ? storage_->space() : MemorySpace::Host; }
  bool is_host() const noexcept { return space() == MemorySpace::Host; }
  /// The device memory holding this tensor; null on the host.
  DeviceMemory* device() const noexcept;

  /// Address of the first element (a device address for a device tensor).
  void* raw_data() const noexcept;
  /// Typed host address of the first element (std::uint16_t for bf16/f16: their raw bits);
  /// throws InvalidArgument on a dtype mismatch or for a tensor in device memory.
  template <class T>
  T* data() const {
    TESSERA_CHECK(dtype_holds<T>(dtype_), "tensor ", describe(), ": requested element type ",
                  element_type_name<T>(), " but the tensor holds ", dtype_name(dtype_));
    TESSERA_CHECK(is_host(), "tensor ", describe(), " is in ", memory_space_name(space()),
                  " memory, which host code cannot read: copy it to the host first (to_host())");
    return static_cast<T*>(raw_data());
  }
  /// Element at an index (bounds-checked; for tests and small tools, not for kernels).
  template <class T>
  T& at(std::initializer_list<std::int64_t> index) const {
    return data<T>()[element_offset(index)];
  }

  /// View of `length` entries of dimension `dim` starting at `start`.
  Tensor narrow(int dim, std::int64_t start, std::int64_t length) const;
  /// A view of this tensor's storage (any memory space) with `shape` and `strides` (elements),
  /// starting `offset` elements after this tensor's first element. Throws InvalidArgument when an
  /// element of the view would lie outside the storage.
  Tensor as_strided(Shape shape, Shape strides, std::int64_t offset = 0) const;
  /// Same data, new shape; the tensor must be contiguous.
  Tensor reshape(Shape shape) const;
  /// This tensor if contiguous, else a contiguous copy (same category and allocator).
  Tensor contiguous() const;
  /// A contiguous copy, booked under `category` (default: this tensor's) with this allocator.
  Tensor clone() const;
  Tensor clone(MemCategory category) const;
  /// A contiguous copy in `allocator`'s memory (host or device), booked under `category`.
  Tensor to(const AllocatorPtr& allocator, MemCategory category) const;
  /// This tensor when it is on the host, else a contiguous host copy (unbooked scratch).
  Tensor to_host() const;

  /// Copies `src` (same shape and dtype, any strides) into this tensor's elements (a no-op when
  /// either is meta). Either side may be on a device: the copy runs through its DeviceMemory.
  void copy_from(const Tensor& src);
  /// Adds `src` (same shape, float dtype) elementwise into this tensor (bf16/f16: widened, added
  /// in f32, rounded once).
  void add_from(const Tensor& src);
  /// Sets every element to `value` (float dtypes; bf16/f16 get it rounded once,
  /// core::double_to_half) or to zero (any dtype, value 0).
  void fill(double value);
  void zero() { fill(0.0); }

  /// "f32[2,96,128,512]"; "f32[2,96,128,512]@cuda" on a device.
  std::string describe() const;

 private:
  std::int64_t element_offset(std::initializer_list<std::int64_t> index) const;

  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::F32;
  Shape shape_;
  Shape strides_;
  std::int64_t offset_ = 0;  // in elements
};

}  // namespace tessera::core
