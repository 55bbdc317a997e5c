// read_chrome_trace: the Chrome trace JSON that write_chrome_trace writes, parsed and checked
// field by field, so that a malformed file is refused with the event index and field at fault.
#include <cmath>
#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/core/trace.hpp"

namespace tessera::core {

using json = nlohmann::ordered_json;  // keeps the file's order of counters and otherData

namespace {

// One JSON object being read; every failure names where it is ("traceEvents[12]") and the field.
struct Fields {
  const json& j;
  std::string where;  // "trace.json: traceEvents[12]"

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InvalidArgument(where + ": field '" + field + "' " + what);
  }
  const json& need(const char* f) const {
    if (!j.contains(f)) fail(f, "is missing");
    return j[f];
  }
  std::string str(const char* f) const {
    const json& v = need(f);
    if (!v.is_string()) fail(f, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  std::int64_t integer(const char* f) const {
    const json& v = need(f);
    if (!v.is_number_integer()) fail(f, "must be an integer, got " + v.dump());
    return v.get<std::int64_t>();
  }
  int small_int(const char* f) const {
    const std::int64_t v = integer(f);
    if (v < 0 || v > (1 << 30)) fail(f, "must lie in [0, 2^30], got " + std::to_string(v));
    return static_cast<int>(v);
  }
  double non_negative(const char* f) const {
    const json& v = need(f);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      fail(f, "must be a non-negative number, got " + v.dump());
    return v.get<double>();
  }
  bool flag(const char* f) const {
    if (!j.contains(f)) return false;
    if (!j[f].is_boolean()) fail(f, "must be true or false, got " + j[f].dump());
    return j[f].get<bool>();
  }
  const json& object(const char* f) const {
    const json& v = need(f);
    if (!v.is_object()) fail(f, "must be an object, got " + v.dump());
    return v;
  }
};

void read_args(const json& a, const std::string& where, TraceEvent& e) {
  const Fields f{a, where + ": args"};
  e.op = f.str("op");
  e.layer = f.str("layer");
  if (a.contains("bytes")) e.bytes = f.integer("bytes");
  if (e.bytes < -1) f.fail("bytes", "must be non-negative, got " + std::to_string(e.bytes));
  if (a.contains("flops")) e.flops = f.non_negative("flops");
  if (a.contains("peer")) e.peer = f.small_int("peer");
  e.critical = f.flag("critical");
  if (a.contains("micro")) e.micro = f.small_int("micro");
  if (a.contains("coords")) {
    const json& c = a["coords"];
    if (!c.is_array()) f.fail("coords", "must be an array of integers, got " + c.dump());
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (!c[i].is_number_integer() || c[i].get<std::int64_t>() < 0)
        f.fail("coords[" + std::to_string(i) + "]", "must be a non-negative integer, got " + c[i].dump());
      e.coords.push_back(c[i].get<int>());
    }
  }
}

TraceEvent read_complete(const Fields& f) {
  TraceEvent e;
  e.ph = 'X';
  e.name = f.str("name");
  e.pid = f.small_int("pid");
  e.tid = f.small_int("tid");
  e.ts_us = f.non_negative("ts");
  e.dur_us = f.non_negative("dur");
  e.cat = f.str("cat");
  if (f.j.contains("bind_id")) {
    e.flow_id = f.str("bind_id");
    if (e.flow_id.empty()) f.fail("bind_id", "must not be empty");
    e.flow_out = f.flag("flow_out");
    e.flow_in = f.flag("flow_in");
    if (e.flow_out == e.flow_in) f.fail("bind_id", "needs exactly one of flow_out and flow_in set to true");
  } else if (f.j.contains("flow_out") || f.j.contains("flow_in")) {
    f.fail("bind_id", "is missing (flow_out/flow_in need the flow's id)");
  }
  read_args(f.object("args"), f.where, e);
  return e;
}

TraceEvent read_counter(const Fields& f) {
  TraceEvent e;
  e.ph = 'C';
  e.name = f.str("name");
  e.pid = f.small_int("pid");
  e.ts_us = f.non_negative("ts");
  const json& a = f.object("args");
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (!it.value().is_number())
      f.fail("args." + it.key(), "must be a number (a counter value), got " + it.value().dump());
    e.counters.emplace_back(it.key(), it.value().get<double>());
  }
  return e;
}

}  // namespace

std::string ChromeTrace::other_value(const std::string& key) const {
  for (const auto& [k, v] : other)
    if (k == key) return v;
  return {};
}

ChromeTrace read_chrome_trace(const std::string& text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw InvalidArgument(origin + ": not valid JSON (" + e.what() + "); expected a Chrome trace written by "
                          "tessera train --trace or tessera sim run --trace");
  }
  if (!doc.is_object())
    throw InvalidArgument(origin + ": expected a JSON object {\"traceEvents\": [...]}, got " +
                          std::string(doc.type_name()));
  const Fields top{doc, origin};
  const json& events = top.need("traceEvents");
  if (!events.is_array()) top.fail("traceEvents", "must be an array, got " + std::string(events.type_name()));
  ChromeTrace t;
  if (doc.contains("otherData")) {
    const json& o = top.object("otherData");
    for (auto it = o.begin(); it != o.end(); ++it) {
      if (!it.value().is_string()) top.fail("otherData." + it.key(), "must be a string, got " + it.value().dump());
      t.other.emplace_back(it.key(), it.value().get<std::string>());
    }
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::string where = origin + ": traceEvents[" + std::to_string(i) + "]";
    if (!events[i].is_object()) throw InvalidArgument(where + ": must be an object, got " + events[i].dump());
    const Fields f{events[i], where};
    const std::string ph = f.str("ph");
    if (ph == "X") {
      t.events.push_back(read_complete(f));
    } else if (ph == "C") {
      t.events.push_back(read_counter(f));
    } else if (ph == "M") {
      const std::string name = f.str("name");
      const int pid = f.small_int("pid");
      const Fields a{f.object("args"), where + ": args"};
      if (name == "process_name") {
        t.process_names.emplace_back(pid, a.str("name"));
      } else if (name == "thread_name") {
        f.small_int("tid");
        a.str("name");
      } else {
        f.fail("name", "of a metadata event must be process_name or thread_name, got \"" + name + "\"");
      }
    } else {
      f.fail("ph", "must be \"X\", \"C\" or \"M\" (the phases tessera writes), got \"" + ph + "\"");
    }
  }
  return t;
}

ChromeTrace read_chrome_trace_file(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error& e) {
    throw InvalidArgument(std::string("cannot read trace: ") + e.what());
  }
  return read_chrome_trace(text, path);
}

}  // namespace tessera::core
