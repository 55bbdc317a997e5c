// Compute registry and the shared argument checks of compute kernels.
#include "tessera/compute/backend.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"

namespace tessera::compute {

void Registry::add(std::string name, BackendFactory factory) {
  TESSERA_CHECK(entries_.find(name) == entries_.end(), "compute registry: backend '", name,
                "' is registered twice");
  entries_.emplace(std::move(name), std::move(factory));
}

std::unique_ptr<Backend> Registry::create(std::string_view name, const BackendOptions& options) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string avail;
    for (auto& [n, f] : entries_) avail += (avail.empty() ? "" : ", ") + n;
    throw InvalidArgument(tessera::detail::cat("no compute backend '", name, "'; available: ",
                                               avail.empty() ? "(none)" : avail));
  }
  TESSERA_CHECK(options.num_threads >= 1, "compute backend '", name, "': num_threads ",
                options.num_threads, " must be at least 1");
  return it->second(options);
}

bool Registry::contains(std::string_view name) const { return entries_.find(name) != entries_.end(); }

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (auto& [n, f] : entries_) out.push_back(n);
  return out;
}

void check_conv2d_shapes(const char* what, const Conv2dParams& p, const core::Tensor& x,
                         const core::Tensor& w, const core::Tensor* bias, const core::Tensor& y) {
  TESSERA_CHECK(p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0 &&
                    p.dilation_h > 0 && p.dilation_w > 0 && p.groups > 0,
                what, ": kernel ", p.kernel_h, "x", p.kernel_w, ", stride ", p.stride_h, "x",
                p.stride_w, ", dilation ", p.dilation_h, "x", p.dilation_w, ", groups ", p.groups,
                ": all must be positive");
  TESSERA_CHECK(x.ndim() == 4, what, ": input ", x.describe(), " must be 4-d (N,C,H,W)");
  TESSERA_CHECK(w.ndim() == 4, what, ": weight ", w.describe(), " must be 4-d (Cout,Cin/groups,kh,kw)");
  TESSERA_CHECK(y.ndim() == 4, what, ": output ", y.describe(), " must be 4-d (N,Cout,Ho,Wo)");
  const auto cin = x.size(1), cout = w.size(0);
  TESSERA_CHECK(cin % p.groups == 0 && cout % p.groups == 0, what, ": ", cin, " input and ", cout,
                " output channels are not both divisible by groups=", p.groups);
  TESSERA_CHECK(w.size(1) == cin / p.groups, what, ": weight ", w.describe(), " expects ",
                w.size(1) * p.groups, " input channels with groups=", p.groups, " but the input ",
                x.describe(), " has ", cin);
  TESSERA_CHECK(w.size(2) == p.kernel_h && w.size(3) == p.kernel_w, what, ": weight ", w.describe(),
                " does not match kernel ", p.kernel_h, "x", p.kernel_w);
  TESSERA_CHECK(y.size(0) == x.size(0) && y.size(1) == cout, what, ": output ", y.describe(),
                " does not match batch ", x.size(0), " and ", cout, " output channels");
  // The op table's dtype rule (check_call): input and output share the call's dtype; the weight
  // and bias are Master slots, of that dtype or f32 in a bf16/f16 call (mixed precision).
  const auto master_ok = [&](core::DType t) {
    return t == x.dtype() || (core::dtype_is_half(x.dtype()) && t == core::DType::F32);
  };
  TESSERA_CHECK(master_ok(w.dtype()) && y.dtype() == x.dtype(), what, ": mixed dtypes (input ",
                core::dtype_name(x.dtype()), ", weight ", core::dtype_name(w.dtype()), ", output ",
                core::dtype_name(y.dtype()), "): input and output must share a dtype, the weight has it too ",
                "or is f32 in a bf16/f16 call");
  if (bias != nullptr && bias->defined()) {
    TESSERA_CHECK(bias->ndim() == 1 && bias->size(0) == cout, what, ": bias ", bias->describe(),
                  " must have ", cout, " entries");
    TESSERA_CHECK(master_ok(bias->dtype()), what, ": bias dtype ", core::dtype_name(bias->dtype()),
                  " must be the input's (", core::dtype_name(x.dtype()), ") or f32 in a bf16/f16 call");
  }
}

}  // namespace tessera::compute
