// copy: y = x converted to y's dtype (any two of f32, f64, bf16, f16, or the same dtype), either
// side any strides, each value rounded once (convert.hpp; the bf16/f16 bits are core/half.hpp's).
#include "convert.hpp"
#include "ops_common.hpp"
#include "ops_kernels.hpp"

namespace tessera::compute::cpu::ops {

template <class T>
void run_copy(const OpCall& call, ThreadPool& pool) {
  convert_tensor(call.input("x"), call.output("y"), pool);
}

template void run_copy<float>(const OpCall&, ThreadPool&);
template void run_copy<double>(const OpCall&, ThreadPool&);

}  // namespace tessera::compute::cpu::ops
