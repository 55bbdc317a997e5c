// The obvious convolution: direct loops over the definition, for any geometry. The fast paths
// are tested against it and against the float64 reference in tests/.
#pragma once

#include "tessera/compute/backend.hpp"

namespace tessera::compute::cpu {

/// Contiguous NCHW buffers; y is overwritten. Shapes as in compute::Backend.
template <class T>
void conv2d_forward_generic(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y,
                            int n, int cin, int h, int wd, int cout, int ho, int wo);
/// dx (+)= adjoint of the forward in x.
template <class T>
void conv2d_backward_data_generic(const Conv2dParams& p, const T* dy, const T* w, T* dx, int n,
                                  int cin, int h, int wd, int cout, int ho, int wo, bool accumulate);
/// dw (+)= Σ x·dy, db (+)= Σ dy (db may be null).
template <class T>
void conv2d_backward_weight_generic(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* db,
                                    int n, int cin, int h, int wd, int cout, int ho, int wo,
                                    bool accumulate);

}  // namespace tessera::compute::cpu
