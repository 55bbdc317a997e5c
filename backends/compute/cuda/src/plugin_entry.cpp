// The plugin's one exported entry point: tessera_compute_cuda_v1, the table the host's loader
// (loader.cpp, linked into tessera_backends) reads after dlopen.
#include "cuda_backend.hpp"
#include "tessera/core/report.hpp"

namespace {

std::string probe() { return tessera::compute::cuda::probe_devices(); }

std::unique_ptr<tessera::compute::Backend> create(const tessera::compute::BackendOptions& o) {
  return std::make_unique<tessera::compute::cuda::CudaBackend>(o);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const tessera::compute::cuda::PluginV1*
tessera_compute_cuda_v1() {
  static const tessera::compute::cuda::PluginV1 table{tessera::compute::cuda::kPluginApiV1, &probe,
                                                      &create};
  return &table;
}

extern "C" __attribute__((visibility("default"))) void tessera_compute_cuda_v1_report(
    tessera::compute::cuda::ReportFn host_report) {
  tessera::core::set_report_sink(
      [host_report](tessera::core::ReportLevel level, std::string_view m) {
        host_report(level == tessera::core::ReportLevel::Info ? 0 : 1, std::string(m).c_str());
      });
}
