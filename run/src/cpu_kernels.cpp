// cpu_kernels(): compute::cpu::onednn_info() and the cpu backend's choice of convolution path
// (CpuBackend's pick and run_half_conv) in words, with their text and JSON forms.
#include "tessera/run/cpu_kernels.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "tessera/compute/cpu.hpp"

namespace tessera::run {
namespace {

using Json = nlohmann::ordered_json;

const char* const kWidened = " (widened to f32)";

// Built, but no f32 implementation: the environment switched the path off (onednn_info's reason
// says so), or oneDNN has nothing but its reference loops for this CPU.
std::string why_no_f32(const compute::cpu::OnednnInfo& i) {
  if (!i.built || i.switched_off) return i.why_not_bf16;
  return "oneDNN " + i.version + " has only its reference loops for f32 on ISA " + i.isa;
}

OnednnPath onednn_path() {
  const compute::cpu::OnednnInfo& i = compute::cpu::onednn_info();
  OnednnPath o;
  o.built = i.built, o.version = i.version, o.isa = i.isa;
  o.f32 = compute::cpu::onednn_runs(core::DType::F32);
  o.bf16 = compute::cpu::onednn_runs(core::DType::BF16);
  o.impl_f32 = i.impl_f32, o.impl_bf16 = i.impl_bf16;
  if (!o.f32) o.why_not_f32 = why_no_f32(i);
  if (!o.bf16) o.why_not_bf16 = i.why_not_bf16;
  return o;
}

// Mirrors CpuBackend's pick (depthwise, then oneDNN for 1x1 and patchify, then the Eigen
// pointwise GEMM, else im2col) and execute()'s 16-bit calls (depthwise and pointwise convert
// inside the kernel, the rest on f32 copies); the other ops compute 16-bit tensors in f32 too.
std::vector<ConvPaths> conv_paths(const OnednnPath& o) {
  const std::string gemm = "Eigen GEMM", rows = "tessera row kernels",
                    im2col = "im2col + Eigen GEMM";
  return {
      {"pointwise", o.f32 ? "oneDNN " + o.impl_f32 : gemm,
       o.bf16 ? "oneDNN " + o.impl_bf16 : gemm + kWidened, gemm + kWidened, gemm},
      {"patchify", o.f32 ? "oneDNN " + o.impl_f32 : im2col,
       o.bf16 ? "oneDNN " + o.impl_bf16 : im2col + kWidened, im2col + kWidened, im2col},
      {"depthwise", rows, rows + kWidened, rows + kWidened, rows},
      {"dense/strided", im2col, im2col + kWidened, im2col + kWidened, im2col},
  };
}

}  // namespace

std::string OnednnPath::summary() const {
  if (!built) return "no oneDNN: " + why_not_f32 + "; pointwise on Eigen GEMM";
  std::string s = "oneDNN " + version + ", ISA " + isa;
  if (!f32) return s + ", not used: " + why_not_f32 + "; pointwise on Eigen GEMM";
  s += ", pointwise f32 " + impl_f32;
  return s + (bf16 ? ", bf16 " + impl_bf16 : ", bf16 not on oneDNN: " + why_not_bf16);
}

std::string OnednnPath::to_json() const {
  Json j{{"built", built},
         {"version", version},
         {"isa", isa},
         {"f32", f32},
         {"bf16", bf16},
         {"impl_f32", impl_f32},
         {"impl_bf16", impl_bf16},
         {"why_not_f32", why_not_f32},
         {"why_not_bf16", why_not_bf16}};
  return j.dump();
}

namespace {

// "f32, bf16: oneDNN gemm:jit; f16: Eigen GEMM (widened to f32); f64: Eigen GEMM": the dtypes
// that share a path named together, in the order f32, bf16, f16, f64.
std::string paths_line(const ConvPaths& c) {
  const std::pair<const char*, const std::string*> by_dtype[] = {
      {"f32", &c.f32}, {"bf16", &c.bf16}, {"f16", &c.f16}, {"f64", &c.f64}};
  std::string s;
  for (std::size_t i = 0; i < 4; ++i) {
    bool seen = false;
    for (std::size_t k = 0; k < i; ++k) seen = seen || *by_dtype[k].second == *by_dtype[i].second;
    if (seen) continue;
    std::string dtypes;
    for (std::size_t k = i; k < 4; ++k)
      if (*by_dtype[k].second == *by_dtype[i].second)
        dtypes += (dtypes.empty() ? "" : ", ") + std::string(by_dtype[k].first);
    s += (s.empty() ? "" : "; ") + dtypes + ": " + *by_dtype[i].second;
  }
  return s;
}

}  // namespace

std::string CpuKernels::to_text(const std::string& indent) const {
  std::string s = indent + "kernels: " + onednn.summary() + "\n";
  if (onednn.bf16)
    s += indent + "bf16 convolutions on the CPU's bf16 instructions (products summed in f32)\n";
  s += indent + "Auto's convolution paths:\n";
  for (const ConvPaths& c : conv) {
    std::string name = c.conv_class + ":";
    name.resize(15, ' ');
    s += indent + "  " + name + paths_line(c) + "\n";
  }
  return s + indent + "other ops: " + other_ops + "\n";
}

std::string CpuKernels::to_json() const {
  Json paths = Json::object();
  for (const ConvPaths& c : conv)
    paths[c.conv_class] = {{"f32", c.f32}, {"bf16", c.bf16}, {"f16", c.f16}, {"f64", c.f64}};
  Json j{
      {"onednn", Json::parse(onednn.to_json())}, {"conv_paths", paths}, {"other_ops", other_ops}};
  return j.dump();
}

CpuKernels cpu_kernels() {
  CpuKernels k;
  k.onednn = onednn_path();
  k.conv = conv_paths(k.onednn);
  k.other_ops = "tessera's kernels (bf16/f16 widened to f32)";
  return k;
}

}  // namespace tessera::run
