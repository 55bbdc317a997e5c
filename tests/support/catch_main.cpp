// Catch2's main, compiled once for every test executable. A test binary is a front end: what the
// libraries report (tessera/core/report.hpp) goes to its stderr.
#define CATCH_CONFIG_MAIN
#include <cstdio>
#include <string>

#include "support/catch.hpp"
#include "tessera/core/report.hpp"

namespace {

const bool kReportToStderr = [] {
  tessera::core::set_report_sink([](tessera::core::ReportLevel, std::string_view m) {
    std::fprintf(stderr, "%s\n", std::string(m).c_str());
  });
  return true;
}();

}  // namespace
