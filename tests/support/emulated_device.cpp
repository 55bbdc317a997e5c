// EmulatedDeviceMemory and EmulatedDeviceCompute (see emulated_device.hpp).
#include "support/emulated_device.hpp"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::test {

namespace {

/// Every live block of every emulated memory (ranks share the process, as on one GPU).
std::mutex& blocks_mu() {
  static std::mutex m;
  return m;
}
std::map<const char*, std::size_t>& blocks() {
  static std::map<const char*, std::size_t> b;
  return b;
}

/// Bytes a strided tensor spans from its first element.
std::size_t span_bytes(const core::Tensor& t) {
  if (t.numel() == 0) return 0;
  std::int64_t last = 0;
  for (int d = 0; d < t.ndim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return static_cast<std::size_t>(last + 1) * core::dtype_size(t.dtype());
}

/// The host alias of `t` when it is device memory (checked to be a live block), else `t`.
core::Tensor host_side(const core::Tensor& t, const char* what) {
  if (t.is_host()) {
    TESSERA_CHECK(t.numel() == 0 || !EmulatedDeviceMemory::is_device(t.raw_data(), 1), what, ": ", t.describe(),
                  " claims host memory but points into a device block");
    return t;
  }
  return host_alias(t);
}

}  // namespace

bool EmulatedDeviceMemory::is_device(const void* p, std::size_t bytes) {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(blocks_mu());
  auto it = blocks().upper_bound(c);
  if (it == blocks().begin()) return false;
  --it;
  return c >= it->first && c + bytes <= it->first + std::max<std::size_t>(it->second, 1);
}

core::Tensor host_alias(const core::Tensor& t) {
  TESSERA_CHECK(t.space() == core::MemorySpace::Cuda, "host_alias: ", t.describe(), " is not device memory");
  TESSERA_CHECK(t.numel() == 0 || EmulatedDeviceMemory::is_device(t.raw_data(), span_bytes(t)), "host_alias: ",
                t.describe(), " is not inside a live block of the emulated device (freed, or never allocated there)");
  return core::Tensor::from_blob(t.raw_data(), t.shape(), t.dtype(), nullptr, t.strides());
}

void* EmulatedDeviceMemory::allocate(std::size_t bytes) {
  // 256-byte aligned, as cudaMalloc's blocks are (and at least as the host allocator's 64).
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + (bytes == 0 ? 256 : 0));
  if (!p) throw OutOfMemory(detail::cat("emulated device: no host memory for ", bytes, " bytes"));
  // Garbage, as fresh device memory is: a read before a write shows up as a wrong result.
  std::memset(p, 0xA5, bytes);
  {
    std::lock_guard<std::mutex> lock(blocks_mu());
    blocks()[static_cast<const char*>(p)] = bytes;
  }
  std::lock_guard<std::mutex> lock(mu_);
  reserved_ += bytes;
  peak_ = std::max(peak_, reserved_);
  return p;
}

EmulatedDeviceMemory::~EmulatedDeviceMemory() { run_queued(); }

void EmulatedDeviceMemory::deallocate(void* p, std::size_t bytes) noexcept {
  // Stream-ordered, as the cuda backend's frees: queued writes into the block run first.
  auto release = [this, p, bytes]() noexcept {
    {
      std::lock_guard<std::mutex> lock(blocks_mu());
      blocks().erase(static_cast<const char*>(p));
    }
    std::free(p);
    std::lock_guard<std::mutex> lock(mu_);
    reserved_ -= bytes;
  };
  try {
    issue(release);
  } catch (...) {
    release();  // no memory to queue it: run it now
  }
}

std::size_t EmulatedDeviceMemory::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

std::size_t EmulatedDeviceMemory::peak_reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

void EmulatedDeviceMemory::copy(const core::Tensor& dst, const core::Tensor& src) {
  const bool d = !dst.is_host(), s = !src.is_host();
  (d && s ? device_to_device : d ? host_to_device : device_to_host)++;
  core::Tensor to = host_side(dst, "emulated device copy"),
               from = host_side(src, "emulated device copy");
  if (!d) {  // into host memory: returns when the data is there, after everything queued
    run_queued();
    to.copy_from(from);
    return;
  }
  if (!s && queueing()) {  // a host source is read at the call (cudaMemcpyAsync stages it)
    core::Tensor snapshot = core::Tensor::empty(from.shape(), from.dtype());
    snapshot.copy_from(from);
    from = snapshot;
  }
  issue([to, from]() mutable { to.copy_from(from); });
}

void EmulatedDeviceMemory::copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  const bool d = is_device(dst, bytes), s = is_device(src, bytes);
  TESSERA_CHECK(d || s, "emulated device copy_bytes: neither side is device memory");
  (d && s ? device_to_device : d ? host_to_device : device_to_host)++;
  if (!d) {  // into host memory: returns when the data is there, after everything queued
    run_queued();
    std::memmove(dst, src, bytes);
    return;
  }
  if (!s && queueing()) {  // a host source is read at the call
    const auto* from = static_cast<const std::byte*>(src);
    auto snapshot = std::make_shared<std::vector<std::byte>>(from, from + bytes);
    issue([dst, snapshot] { std::memcpy(dst, snapshot->data(), snapshot->size()); });
    return;
  }
  issue([dst, src, bytes] { std::memmove(dst, src, bytes); });
}

void EmulatedDeviceMemory::add(const core::Tensor& dst, const core::Tensor& src) {
  TESSERA_CHECK(!dst.is_host() && !src.is_host(), "emulated device add: ", src.describe(), " into ", dst.describe(),
                ": both must be device memory");
  issue([to = host_alias(dst), from = host_alias(src)]() mutable { to.add_from(from); });
}

void EmulatedDeviceMemory::fill(const core::Tensor& dst, double value) {
  issue([to = host_alias(dst), value]() mutable { to.fill(value); });
}

void EmulatedDeviceMemory::synchronize() {
  ++synchronizations;
  run_queued();
}

bool EmulatedDeviceMemory::stream_waits_for_issued(void* stream) {
  if (stream == nullptr || !orders_streams) return false;
  std::uint64_t last = 0;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    last = issued_;
  }
  ++stream_orders;
  static_cast<EmulatedStream*>(stream)->enqueue([this, last] { run_until(last); });
  return true;
}

void EmulatedDeviceMemory::set_deferred(bool on) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    deferred_ = on;
  }
  if (!on) run_queued();
}

bool EmulatedDeviceMemory::queueing() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return deferred_;
}

void EmulatedDeviceMemory::issue(std::function<void()> op) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (deferred_) {
      queue_.emplace_back(++issued_, std::move(op));
      return;
    }
  }
  op();
}

void EmulatedDeviceMemory::run_until(std::uint64_t last) {
  for (;;) {
    std::function<void()> op;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      if (queue_.empty() || queue_.front().first > last) return;
      op = std::move(queue_.front().second);
      queue_.pop_front();
    }
    op();
  }
}

void EmulatedDeviceMemory::run_queued() { run_until(std::numeric_limits<std::uint64_t>::max()); }

std::size_t EmulatedDeviceMemory::queued() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return queue_.size();
}

void EmulatedDeviceCompute::execute(const compute::OpCall& call) {
  memory_->run_queued();  // the kernel runs now, after what its stream queued before it
  compute::OpCall h = call;
  std::vector<core::Tensor> keep;
  keep.reserve(compute::kMaxOpInputs + compute::kMaxOpOutputs);
  auto alias = [&](const core::Tensor* t) -> core::Tensor* {
    if (t == nullptr || !t->defined()) return const_cast<core::Tensor*>(t);
    TESSERA_CHECK(!t->is_host(), "emulated device backend: ", compute::op_name(call.kind), " got ", t->describe(),
                  " in host memory; a device backend computes on device tensors only");
    keep.push_back(host_alias(*t));
    return &keep.back();
  };
  for (auto& in : h.in) in = alias(in);
  for (auto& out : h.out) out = alias(out);
  host_->execute(h);
}

}  // namespace tessera::test
