#include "tessera/core/report.hpp"

#include <mutex>
#include <utility>

namespace tessera::core {

namespace {

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}

ReportSink& current_sink() {
  static ReportSink s;
  return s;
}

}  // namespace

ReportSink set_report_sink(ReportSink sink) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  return std::exchange(current_sink(), std::move(sink));
}

void report(ReportLevel level, std::string_view message) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (!current_sink()) return;
  try {
    current_sink()(level, message);
  } catch (...) {
    // A sink is a front end's printer; its failure must not turn a notice into an error.
  }
}

std::string_view report_level_name(ReportLevel level) {
  return level == ReportLevel::Info ? "info" : "warning";
}

}  // namespace tessera::core
