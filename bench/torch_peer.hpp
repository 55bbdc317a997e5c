// What the libtorch peer of bench_conv and bench_train really runs on: how this libtorch was built
// (oneDNN, NNPACK, its BLAS setting), which convolution path ATen picks for a given call, and the
// run-time BLAS (blas_probe.hpp). Only included where TESSERA_BENCH_HAVE_TORCH is defined.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/native/ConvUtils.h>

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

/// How this libtorch was built and what it enables now, with the BLAS it runs on.
struct TorchPeer {
  std::string version;    ///< TORCH_VERSION from at::show_config()
  std::string blas_info;  ///< BLAS_INFO: the BLAS family it was built against ("generic" on Debian)
  bool mkldnn_built = false, mkldnn_enabled = false, nnpack_built = false;
  BlasInfo blas;  ///< what actually serves sgemm_ now
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
  return p;
}

/// Two lines for the readable output.
inline std::string describe(const TorchPeer& p) {
  return "libtorch " + p.version + " (BLAS_INFO=" + p.blas_info + "): oneDNN " +
         (p.mkldnn_built ? (p.mkldnn_enabled ? "built and enabled" : "built but disabled")
                         : "not built") +
         ", NNPACK " + (p.nnpack_built ? "built" : "not built") +
         "\nlibtorch BLAS at run time: " + describe(p.blas);
}

/// The same as one JSON object; `refused` is the reason no ratio is given (empty: ratios given).
inline std::string torch_peer_json(const TorchPeer& p, const std::string& refused) {
  auto b = [](bool v) { return v ? std::string("true") : std::string("false"); };
  return "{\"version\": " + json_quote(p.version) + ", \"blas_info\": " + json_quote(p.blas_info) +
         ", \"mkldnn_built\": " + b(p.mkldnn_built) +
         ", \"mkldnn_enabled\": " + b(p.mkldnn_enabled) +
         ", \"nnpack_built\": " + b(p.nnpack_built) + ", \"blas\": " + blas_json(p.blas) +
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
