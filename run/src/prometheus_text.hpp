// The Prometheus text exposition format (version 0.0.4) as the run layer writes it: a family's
// HELP and TYPE lines, its samples, and label values escaped. Shared by a rank's live metrics
// (live_metrics.cpp) and the elastic launcher's series (elastic.cpp), so both read the same.
#pragma once

#include <sstream>
#include <string>

namespace tessera::run {

/// A label value with \, " and newlines escaped, as the exposition format wants.
inline std::string prometheus_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

/// Prometheus text being written: families (HELP and TYPE) and their samples, numbers at 17
/// significant digits so that a double reads back the same.
class PrometheusText {
 public:
  PrometheusText() { os_.precision(17); }
  void family(const char* name, const char* type, const char* help) {
    os_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  template <class T>
  void sample(const std::string& name_and_labels, T value) {
    os_ << name_and_labels << " " << value << "\n";
  }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

}  // namespace tessera::run
