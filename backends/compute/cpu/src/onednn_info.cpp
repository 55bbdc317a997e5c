// What the oneDNN path does on this build and CPU: probed once per process by creating one
// pointwise-sized matmul per dtype and reading oneDNN's name for the implementation it chose.
#include <cstdlib>
#include <string>

#include "conv_onednn.hpp"
#include "conv_pointwise.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/core/error.hpp"

#if TESSERA_HAVE_ONEDNN
#include <dnnl.hpp>
#endif

namespace tessera::compute::cpu {

namespace {

#if TESSERA_HAVE_ONEDNN
std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "unknown";
  }
}

// oneDNN's implementation for a ConvNeXt-T stage-1 block (384 × 96 · 96 × 1024, planes 16384
// apart), or "" where none but the reference loops would run (ref:any is not a fast path).
std::string probe(core::DType t) {
  OnednnCache cache;
  try {
    const std::string impl =
        cache.impl(MatmulShape{t, t, 384, 96, 1024, 96, 1, 16384, 1, 16384, 1, false});
    return impl.rfind("ref", 0) == 0 ? std::string() : impl;
  } catch (const Unsupported&) {
    return {};
  }
}
#endif

OnednnInfo make_info() {
  OnednnInfo info;
#if TESSERA_HAVE_ONEDNN
  info.built = true;
  const dnnl::version_t* v = dnnl::version();
  info.version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  info.isa = isa_name(dnnl::get_effective_cpu_isa());
  if (const char* off = std::getenv("TESSERA_CPU_ONEDNN"); off && std::string(off) == "0") {
    info.switched_off = true;
    info.why_not_bf16 =
        "switched off by TESSERA_CPU_ONEDNN=0 (every call on the Eigen and row kernels)";
    return info;
  }
  info.impl_f32 = probe(core::DType::F32);
  // bf16 only on bf16 instructions: on plain AVX-512 oneDNN emulates bf16 products with f32
  // ones and shifts, no faster than the f32 path and rounding the weights besides.
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx)
    info.impl_bf16 = probe(core::DType::BF16);
  info.bf16 = !info.impl_bf16.empty();
  if (!info.bf16)
    info.why_not_bf16 =
        "oneDNN " + info.version + " has no bf16 matrix product for this CPU (ISA " + info.isa +
        "; it needs AVX512_BF16 or AMX-BF16): bf16 calls store 16 bits and compute in f32";
#else
  info.why_not_bf16 =
      "built without oneDNN (TESSERA_WITH_ONEDNN=OFF, or libdnnl-dev missing): bf16 calls store "
      "16 bits and compute in f32";
#endif
  return info;
}

}  // namespace

const OnednnInfo& onednn_info() {
  static const OnednnInfo info = make_info();
  return info;
}

bool onednn_runs(core::DType t) {
  const OnednnInfo& i = onednn_info();
  return t == core::DType::F32 ? !i.impl_f32.empty() : t == core::DType::BF16 && i.bf16;
}

bool onednn_applies(const Conv2dParams& p, const ConvDims& d, core::DType t) {
  return (pointwise_applies(p, d) || patchify_applies(p, d)) && onednn_runs(t);
}

}  // namespace tessera::compute::cpu
