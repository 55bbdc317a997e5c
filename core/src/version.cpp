// The version and the build's optional parts, from the header CMake writes at configure time
// (cmake/TesseraVersion.cmake; <build>/generated/tessera_build_info.hpp).
#include "tessera/core/version.hpp"

#include "tessera_build_info.hpp"

namespace tessera::core {

std::string_view version() { return TESSERA_VERSION_STRING; }

std::string_view build_parts() { return TESSERA_BUILD_PARTS; }

std::string_view build_commit() { return TESSERA_BUILD_COMMIT; }

std::string build_description() {
  std::string out = build_parts().empty() ? "no optional parts" : std::string(build_parts());
  if (!build_commit().empty()) out += ", configured at commit " + std::string(build_commit());
  return out;
}

std::string version_line() {
  return "tessera " + std::string(version()) + " (" + build_description() + ")";
}

}  // namespace tessera::core
