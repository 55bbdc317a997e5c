// What the libtorch peer of bench_conv and bench_train really runs on: how this libtorch was built
// (oneDNN, NNPACK, its BLAS setting), which convolution path ATen picks for a given call, and the
// run-time BLAS (blas_probe.hpp). Only included where TESSERA_BENCH_HAVE_TORCH is defined.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/native/ConvUtils.h>
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "blas_probe.hpp"

namespace tessera::bench {

/// ATen's name of a convolution backend (at::native::ConvBackend): "Mkldnn" is oneDNN,
/// "Slow2d" is THNN's im2col + BLAS sgemm_, "SlowDilated2d" the same with dilation, ...
inline std::string conv_backend_name(at::native::ConvBackend b) {
  using B = at::native::ConvBackend;
  switch (b) {
    case B::Mkldnn:
      return "Mkldnn";
    case B::MkldnnEmpty:
      return "MkldnnEmpty";
    case B::NnpackSpatial:
      return "NnpackSpatial";
    case B::Slow2d:
      return "Slow2d";
    case B::SlowDilated2d:
      return "SlowDilated2d";
    case B::SlowTranspose2d:
      return "SlowTranspose2d";
    case B::Xnnpack2d:
      return "Xnnpack2d";
    case B::Winograd3x3Depthwise:
      return "Winograd3x3Depthwise";
    case B::Empty:
      return "Empty";
    case B::Overrideable:
      return "Overrideable";
    default:
      return "ConvBackend(" + std::to_string(int(b)) + ")";
  }
}

/// The backend at::conv2d dispatches this call to, asked of ATen itself
/// (at::native::select_conv_backend, the function at::convolution uses), under the current
/// thread count, grad mode and memory format.
inline std::string conv2d_path(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                               std::int64_t stride, std::int64_t pad, std::int64_t dilation,
                               std::int64_t groups) {
  return conv_backend_name(at::native::select_conv_backend(
      x, w, b, {stride, stride}, {pad, pad}, {dilation, dilation}, false, {0, 0}, groups));
}

/// The oneDNN libtorch's own calls resolve to, asked of that library at run time (libtorch 1.13
/// exposes no oneDNN ISA of its own): "" fields where libtorch has none that can be found (a
/// oneDNN linked in statically, its symbols hidden).
struct PeerOnednn {
  std::string library;  ///< the shared object libtorch_cpu's dnnl_version resolves to
  std::string version;  ///< dnnl_version(): "2.6.3"
  std::string isa;      ///< dnnl_get_effective_cpu_isa(): "avx512_core_bf16", ...
  /// The same object the process's global scope resolves dnnl_version to: the one oneDNN a
  /// tessera built with oneDNN calls too.
  bool process_wide = false;
};

/// A dnnl_cpu_isa_t of oneDNN 2.x by name (values of dnnl_types.h: libtorch-dev does not bring
/// oneDNN's headers).
inline std::string dnnl_isa_name(int isa) {
  switch (isa) {
    case 0x1:
      return "sse41";
    case 0x3:
      return "avx";
    case 0x7:
      return "avx2";
    case 0xf:
      return "avx512_mic";
    case 0x1f:
      return "avx512_mic_4ops";
    case 0x27:
      return "avx512_core";
    case 0x67:
      return "avx512_core_vnni";
    case 0xe7:
      return "avx512_core_bf16";
    case 0x3e7:
      return "avx512_core_amx";
    case 0x407:
      return "avx2_vnni";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "dnnl_cpu_isa 0x%x", unsigned(isa));
      return buf;
    }
  }
}

/// The path of the loaded object whose name contains `part` ("libtorch_cpu"), or "".
inline std::string loaded_object(const std::string& part) {
  std::pair<std::string, std::string> q{part, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* q = static_cast<std::pair<std::string, std::string>*>(data);
        if (!info->dlpi_name || std::string(info->dlpi_name).find(q->first) == std::string::npos)
          return 0;
        q->second = info->dlpi_name;
        return 1;
      },
      &q);
  return q.second;
}

/// Opens libtorch_cpu again (already loaded: RTLD_NOLOAD) and looks oneDNN's entry points up in
/// its dependency scope, the scope its own calls resolve in.
inline PeerOnednn peer_onednn() {
  PeerOnednn o;
  const std::string torch_cpu = loaded_object("libtorch_cpu");
  void* h = torch_cpu.empty() ? nullptr : dlopen(torch_cpu.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return o;
  struct Version {  // dnnl_version_t
    int major, minor, patch;
    const char* hash;
    unsigned cpu_runtime, gpu_runtime;
  };
  void* version_sym = dlsym(h, "dnnl_version");
  void* isa_sym = dlsym(h, "dnnl_get_effective_cpu_isa");
  Dl_info where{};
  if (version_sym && dladdr(version_sym, &where) && where.dli_fname) {
    std::error_code ec;
    const auto real = std::filesystem::canonical(where.dli_fname, ec);
    o.library = ec ? std::string(where.dli_fname) : real.string();
    const Version* v = reinterpret_cast<const Version* (*)()>(version_sym)();
    o.version =
        std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    o.process_wide = dlsym(RTLD_DEFAULT, "dnnl_version") == version_sym;
  }
  if (isa_sym) o.isa = dnnl_isa_name(reinterpret_cast<int (*)()>(isa_sym)());
  dlclose(h);
  return o;
}

/// How this libtorch was built and what it enables now, with the BLAS it runs on.
struct TorchPeer {
  std::string version;    ///< TORCH_VERSION from at::show_config()
  std::string blas_info;  ///< BLAS_INFO: the BLAS family it was built against ("generic" on Debian)
  bool mkldnn_built = false, mkldnn_enabled = false, nnpack_built = false;
  BlasInfo blas;  ///< what actually serves sgemm_ now
  PeerOnednn onednn;  ///< the oneDNN its Mkldnn convolutions run on
};

inline std::string show_config_value(const std::string& cfg, const std::string& key) {
  const auto at = cfg.find(key + "=");
  if (at == std::string::npos) return "";
  const auto from = at + key.size() + 1;
  return cfg.substr(from, cfg.find_first_of(", \n", from) - from);
}

/// Reads at::show_config(), at::globalContext() and probe_blas().
inline TorchPeer torch_peer() {
  TorchPeer p;
  const std::string cfg = at::show_config();
  p.version = show_config_value(cfg, "TORCH_VERSION");
  p.blas_info = show_config_value(cfg, "BLAS_INFO");
  p.mkldnn_built = at::globalContext().hasMKLDNN();
  p.mkldnn_enabled = p.mkldnn_built && at::globalContext().userEnabledMkldnn();
  p.nnpack_built = show_config_value(cfg, "USE_NNPACK") == "ON";
  p.blas = probe_blas();
  p.onednn = peer_onednn();
  return p;
}

/// Two lines for the readable output.
inline std::string describe(const TorchPeer& p) {
  return "libtorch " + p.version + " (BLAS_INFO=" + p.blas_info + "): oneDNN " +
         (p.mkldnn_built ? (p.mkldnn_enabled ? "built and enabled" : "built but disabled")
                         : "not built") +
         ", NNPACK " + (p.nnpack_built ? "built" : "not built") +
         "\nlibtorch BLAS at run time: " + describe(p.blas) + "\nlibtorch oneDNN at run time: " +
         (p.onednn.library.empty()
              ? std::string("no dnnl_version in libtorch_cpu's scope (static or absent)")
              : p.onednn.library + " (oneDNN " + p.onednn.version + ", ISA " + p.onednn.isa +
                    (p.onednn.process_wide ? ", the one the whole process calls"
                                           : ", not the global scope's") +
                    ")");
}

/// The same as one JSON object; `refused` is the reason no ratio is given (empty: ratios given).
inline std::string torch_peer_json(const TorchPeer& p, const std::string& refused) {
  auto b = [](bool v) { return v ? std::string("true") : std::string("false"); };
  return "{\"version\": " + json_quote(p.version) + ", \"blas_info\": " + json_quote(p.blas_info) +
         ", \"mkldnn_built\": " + b(p.mkldnn_built) +
         ", \"mkldnn_enabled\": " + b(p.mkldnn_enabled) +
         ", \"nnpack_built\": " + b(p.nnpack_built) + ", \"blas\": " + blas_json(p.blas) +
         ", \"onednn\": {\"library\": " + json_quote(p.onednn.library) +
         ", \"version\": " + json_quote(p.onednn.version) +
         ", \"isa\": " + json_quote(p.onednn.isa) +
         ", \"process_wide\": " + b(p.onednn.process_wide) + "}" +
         ", \"ratios_refused\": " + (refused.empty() ? "null" : json_quote(refused)) + "}";
}

/// Joins the distinct names in order ("Mkldnn", "Slow2d+Mkldnn").
inline std::string join_paths(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& p : v)
    if (s.empty() || ("+" + s + "+").find("+" + p + "+") == std::string::npos)
      s += (s.empty() ? "" : "+") + p;
  return s;
}

}  // namespace tessera::bench
