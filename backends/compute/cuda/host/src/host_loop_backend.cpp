// HostLoopBackend::execute: the kernel dispatch of backends/compute/cuda/kernels on HostLoop,
// with workspace as a booked host tensor.
#include "kernels/dispatch.hpp"
#include "kernels/pass.hpp"
#include "tessera/compute/cuda_kernels.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/core/error.hpp"

namespace tessera::compute::cuda {

namespace {

constexpr std::string_view kName = "cuda-kernels@host";

/// Workspace of one call: a Workspace-booked f64 tensor (8-byte aligned; the host loop's views
/// need no more) with the allocator of the call's lead tensor.
class BookedWorkspace {
 public:
  explicit BookedWorkspace(core::AllocatorPtr allocator) : allocator_(std::move(allocator)) {}
  void* get(std::size_t bytes) {
    TESSERA_ASSERT(!buf_.defined(), kName, ": workspace requested twice for one call");
    const auto words = static_cast<std::int64_t>((bytes + sizeof(double) - 1) / sizeof(double));
    buf_ = core::Tensor::empty({words}, core::DType::F64, core::MemCategory::Workspace, allocator_);
    return buf_.raw_data();
  }
  /// A contiguous Workspace-booked host tensor (the f32 copies of a bf16/f16 call).
  core::Tensor tensor(const core::Shape& shape, core::DType dtype) const {
    return core::Tensor::empty(shape, dtype, core::MemCategory::Workspace, allocator_);
  }

 private:
  core::AllocatorPtr allocator_;
  core::Tensor buf_;
};

void no_meta(const char* what, const OpCall& call, const core::Tensor* t) {
  TESSERA_CHECK(t == nullptr || !t->is_meta(), kName, " ", op_name(call.kind), ": ", what, " ",
                t->describe(), " is a meta tensor (no data); meta runs need a recording backend");
}

}  // namespace

void HostLoopBackend::set_num_threads(int n) {
  TESSERA_CHECK(n >= 1, kName, ": num_threads ", n, " must be at least 1");
}

void HostLoopBackend::execute(const OpCall& call) {
  for (const core::Tensor* t : call.in) no_meta("input", call, t);
  for (const core::Tensor* t : call.out) no_meta("output", call, t);
  const core::Tensor* lead = float_lead(call);
  BookedWorkspace ws(lead ? lead->allocator() : nullptr);
  kernels::HostLoop<BookedWorkspace> loop(ws);
  kernels::run_kernel_op(loop, call, kName);
}

std::unique_ptr<compute::Backend> create_host_loop(const BackendOptions&) {
  return std::make_unique<HostLoopBackend>();
}

}  // namespace tessera::compute::cuda
