// What the oneDNN convolution paths share (conv_onednn.cpp, conv_onednn_patch.cpp): the engine,
// a primitive as cached, the one-thread guard, per-worker scratchpads and the call itself.
// Included only where TESSERA_HAVE_ONEDNN is 1.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "conv_onednn.hpp"
#include "convert.hpp"

#if TESSERA_HAVE_ONEDNN
#include <omp.h>

#include <Eigen/Core>
#include <dnnl.hpp>

namespace tessera::compute::cpu {

inline dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

inline dnnl::memory::data_type dnnl_type(core::DType t) {
  return t == core::DType::BF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

struct Matmul {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, c, scratch;
  std::size_t scratch_bytes = 0;
  std::string impl;
};

/// This thread's OpenMP team is one thread for the guard's life: the pool splits the work, and
/// oneDNN (OpenMP runtime) then runs inline. The previous value comes back afterwards, so a peer
/// in the same process (libtorch in the benches) keeps its threads.
class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_;
};

/// The product's operand dtype for storage S: f32, or the call's 16-bit dtype.
template <class S>
core::DType dtype_for(const ConvContext& c) {
  return std::is_same_v<S, float> ? core::DType::F32 : c.half;
}

/// Per-worker scratch of `bytes` each, 64-byte aligned, booked as Workspace.
struct Scratch {
  core::Tensor t;
  std::size_t per = 0;
  Scratch(const ConvContext& c, std::size_t bytes) : per((bytes + 63) / 64 * 64) {
    t = workspace<float>(c, std::int64_t((per * c.pool.size() + 64) / sizeof(float)));
  }
  void* at(int worker) const {
    auto base = reinterpret_cast<std::uintptr_t>(t.raw_data());
    return reinterpret_cast<void*>((base + 63) / 64 * 64 + per * std::size_t(worker));
  }
};

/// C (+)= A · B with m's primitive, single-threaded (the caller holds a OneThread).
inline void run_matmul(const Matmul& m, const void* a, const void* b, void* c, void* scratch) {
  dnnl::engine& e = onednn_engine();
  dnnl::stream st(e);
  dnnl::memory am(m.a, e, const_cast<void*>(a)), bm(m.b, e, const_cast<void*>(b));
  dnnl::memory cm(m.c, e, c), sm(m.scratch, e, scratch);
  m.prim.execute(
      st,
      {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
  st.wait();
}

/// The f32 weights as the product's operand type: w itself for f32, rounded to bf16 into `buf`.
template <class S>
const S* weights_as(const ConvContext& c, const float* w, std::int64_t count, core::Tensor& buf) {
  if constexpr (std::is_same_v<S, float>) {
    return w;
  } else {
    buf = workspace<float>(c, (count + 1) / 2);
    auto* out = static_cast<std::uint16_t*>(buf.raw_data());
    narrow(w, out, count, c.half);
    return out;
  }
}

/// out[r] += Σ_q rows[r·ld + q] for r < nrows, q < np, in f32 (16-bit rows widened through tmp,
/// np floats): a bias gradient's share of one block.
template <class S>
void add_row_sums(const S* rows, std::int64_t ld, int nrows, int np, float* out, float* tmp,
                  core::DType half) {
  for (int r = 0; r < nrows; ++r) {
    const float* v = nullptr;
    if constexpr (std::is_same_v<S, float>) {
      v = rows + r * ld;
    } else {
      widen(rows + r * ld, tmp, np, half);
      v = tmp;
    }
    out[r] += Eigen::Map<const Eigen::VectorXf>(v, np).sum();
  }
}

}  // namespace tessera::compute::cpu

#endif
