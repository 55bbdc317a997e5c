// TraceRecorder and the Chrome trace JSON writer.
#include "tessera/core/trace.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "tessera/core/version.hpp"

namespace tessera::core {

TraceRecorder::TraceRecorder() : epoch_(std::chrono::steady_clock::now()) {}

double TraceRecorder::us_at(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - epoch_).count();
}

double TraceRecorder::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch_).count();
}

void TraceRecorder::add(TraceEvent e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

void TraceRecorder::set_process_name(int pid, std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : process_names_)
    if (p.first == pid) {
      p.second = std::move(name);
      return;
    }
  process_names_.emplace_back(pid, std::move(name));
}

std::vector<std::pair<int, std::string>> TraceRecorder::process_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  return process_names_;
}

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string trace_lane_name(int tid) {
  if (tid == kLaneCompute) return "compute";
  if (tid == kLaneComm) return "comm";
  if (tid >= kLaneHaloBase) return "halo <-> rank " + std::to_string(tid - kLaneHaloBase);
  return "lane " + std::to_string(tid);
}

namespace {
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// The otherData keys every trace carries: the version and the optional parts of the build.
std::vector<std::pair<std::string, std::string>> build_metadata() {
  return {{"tessera_version", std::string(version())}, {"build", build_description()}};
}

}  // namespace

void write_chrome_trace(std::ostream& os, const std::vector<TraceEvent>& events,
                        const std::vector<std::pair<int, std::string>>& process_names,
                        const std::vector<std::pair<std::string, std::string>>& other) {
  os << "{\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) os << ",\n";
    first = false;
  };
  std::set<std::pair<int, int>> lanes;
  for (const auto& e : events)
    if (e.ph == 'X') lanes.insert({e.pid, e.tid});
  for (const auto& [pid, name] : process_names) {
    sep();
    os << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << pid << ",\"args\":{\"name\":\""
       << json_escape(name) << "\"}}";
  }
  for (const auto& [pid, tid] : lanes) {
    sep();
    os << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << pid << ",\"tid\":" << tid
       << ",\"args\":{\"name\":\"" << json_escape(trace_lane_name(tid)) << "\"}}";
  }
  for (const auto& e : events) {
    sep();
    os << "{\"ph\":\"" << e.ph << "\",\"name\":\"" << json_escape(e.name) << "\",\"pid\":" << e.pid
       << ",\"ts\":" << num(e.ts_us);
    if (e.ph == 'C') {
      os << ",\"args\":{";
      for (std::size_t i = 0; i < e.counters.size(); ++i)
        os << (i ? "," : "") << "\"" << json_escape(e.counters[i].first) << "\":" << num(e.counters[i].second);
      os << "}}";
      continue;
    }
    os << ",\"tid\":" << e.tid << ",\"dur\":" << num(e.dur_us) << ",\"cat\":\"" << json_escape(e.cat) << "\"";
    if (!e.flow_id.empty()) {
      os << ",\"bind_id\":\"" << json_escape(e.flow_id) << "\"";
      if (e.flow_out) os << ",\"flow_out\":true";
      if (e.flow_in) os << ",\"flow_in\":true";
    }
    os << ",\"args\":{\"op\":\"" << json_escape(e.op) << "\",\"layer\":\"" << json_escape(e.layer) << "\"";
    if (e.bytes >= 0) os << ",\"bytes\":" << e.bytes;
    if (e.flops >= 0) os << ",\"flops\":" << num(e.flops);
    if (e.peer >= 0) os << ",\"peer\":" << e.peer;
    if (e.critical) os << ",\"critical\":true";
    if (e.micro >= 0) os << ",\"micro\":" << e.micro;
    if (!e.coords.empty()) {
      os << ",\"coords\":[";
      for (std::size_t i = 0; i < e.coords.size(); ++i) os << (i ? "," : "") << e.coords[i];
      os << "]";
    }
    os << "}}";
  }
  os << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{";
  for (std::size_t i = 0; i < other.size(); ++i)
    os << (i ? "," : "") << "\"" << json_escape(other[i].first) << "\":\"" << json_escape(other[i].second) << "\"";
  // Every trace says which tessera wrote it; a trace read back and written again keeps its own.
  bool first_other = other.empty();
  for (const auto& entry : build_metadata()) {
    // Not a structured binding: clang 14 (the fuzz preset) cannot capture one in a lambda.
    const auto same_key = [&](const auto& kv) { return kv.first == entry.first; };
    if (std::any_of(other.begin(), other.end(), same_key)) continue;
    os << (first_other ? "" : ",") << "\"" << entry.first << "\":\"" << json_escape(entry.second) << "\"";
    first_other = false;
  }
  os << "}}\n";
}

}  // namespace tessera::core
