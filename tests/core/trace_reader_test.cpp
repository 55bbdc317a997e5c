// Chrome traces read back: what write_chrome_trace writes comes back field for field, and
// malformed documents are refused with the event index and the field at fault.
#include <sstream>

#include "support/test_utils.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/trace.hpp"

using namespace tessera;
using Catch::Matchers::Contains;
using test::error_of;

namespace {

std::vector<core::TraceEvent> sample_events() {
  std::vector<core::TraceEvent> v;
  core::TraceEvent k;  // a kernel
  k.name = "conv2d_forward";
  k.cat = "compute";
  k.pid = 1;
  k.tid = core::kLaneCompute;
  k.ts_us = 12.5;
  k.dur_us = 3.125;
  k.op = "conv2d_forward";
  k.layer = "stages.0.blocks.0.dwconv";
  k.bytes = 123456789012;
  k.flops = 4.5e9;
  k.coords = {0, 1};
  k.critical = true;
  v.push_back(k);
  core::TraceEvent s;  // a halo send with its flow
  s.name = "send";
  s.cat = "halo";
  s.pid = 1;
  s.tid = core::kLaneHaloBase + 2;
  s.ts_us = 20;
  s.dur_us = 0.001;
  s.op = "send";
  s.layer = "a \"quoted\"\\layer\n";
  s.bytes = 4096;
  s.peer = 2;
  s.flow_id = "1_2_0";
  s.flow_out = true;
  s.micro = 3;  // a pipeline transfer of micro-batch 3
  v.push_back(s);
  core::TraceEvent r = s;
  r.name = r.op = "recv";
  r.pid = 2;
  r.peer = 1;
  r.flow_out = false;
  r.flow_in = true;
  v.push_back(r);
  core::TraceEvent c;  // a memory counter
  c.ph = 'C';
  c.name = "memory";
  c.pid = 2;
  c.ts_us = 30.25;
  c.counters = {{"parameter", 1024}, {"activation", 0.5}};
  v.push_back(c);
  return v;
}

// A valid one-event trace with `event` as its only event.
std::string doc_with(const std::string& event) { return "{\"traceEvents\":[" + event + "]}"; }

const char* kGoodX =
    R"({"ph":"X","name":"add","pid":0,"tid":0,"ts":1.0,"dur":2.0,"cat":"compute","args":{"op":"add","layer":"x"}})";

}  // namespace

TEST_CASE("trace reader: what the writer writes comes back", "[core][trace]") {
  const auto events = sample_events();
  std::ostringstream os;
  core::write_chrome_trace(os, events, {{1, "rank 1 (0,1)"}, {2, "rank 2"}}, {{"model", "convnext-atto"}, {"mesh", "sp=2"}});
  const core::ChromeTrace t = core::read_chrome_trace(os.str(), "sample");
  REQUIRE(t.process_names == std::vector<std::pair<int, std::string>>{{1, "rank 1 (0,1)"}, {2, "rank 2"}});
  REQUIRE(t.other_value("model") == "convnext-atto");
  REQUIRE(t.other_value("mesh") == "sp=2");
  REQUIRE(t.other_value("nothing").empty());
  REQUIRE(t.events.size() == events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const core::TraceEvent& a = events[i];
    const core::TraceEvent& b = t.events[i];
    INFO("event " << i);
    REQUIRE(b.ph == a.ph);
    REQUIRE(b.name == a.name);
    REQUIRE(b.pid == a.pid);
    REQUIRE_THAT(b.ts_us, WithinAbs(a.ts_us, 1e-9));
    REQUIRE(b.counters == a.counters);
    if (a.ph == 'C') continue;
    REQUIRE(b.cat == a.cat);
    REQUIRE(b.tid == a.tid);
    REQUIRE_THAT(b.dur_us, WithinAbs(a.dur_us, 1e-9));
    REQUIRE(b.op == a.op);
    REQUIRE(b.layer == a.layer);
    REQUIRE(b.bytes == a.bytes);
    REQUIRE(b.flops == a.flops);
    REQUIRE(b.peer == a.peer);
    REQUIRE(b.coords == a.coords);
    REQUIRE(b.flow_id == a.flow_id);
    REQUIRE(b.flow_out == a.flow_out);
    REQUIRE(b.flow_in == a.flow_in);
    REQUIRE(b.critical == a.critical);
    REQUIRE(b.micro == a.micro);
  }
}

TEST_CASE("trace reader: an empty trace and a missing file", "[core][trace]") {
  std::ostringstream os;
  core::write_chrome_trace(os, {}, {});
  REQUIRE(core::read_chrome_trace(os.str()).events.empty());
  REQUIRE_THAT(error_of([] { core::read_chrome_trace_file("/nonexistent/dir/t.json"); }),
               Contains("/nonexistent/dir/t.json"));
}

TEST_CASE("trace reader: malformed documents are refused with where and what", "[core][trace]") {
  struct Case {
    std::string text, needle;
  };
  const std::string good(kGoodX);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  const std::vector<Case> cases = {
      {"{\"traceEvents\":[", "t.json: not valid JSON"},
      {"{\"traceEvents\":[],\"x\":3333E33666666}",
       "t.json: not valid JSON"},  // as fuzz_model_json found
      {"[1,2]", "t.json: expected a JSON object"},
      {"{\"events\":[]}", "t.json: field 'traceEvents' is missing"},
      {"{\"traceEvents\":{}}", "field 'traceEvents' must be an array"},
      {"{\"traceEvents\":[],\"otherData\":{\"model\":3}}",
       "field 'otherData.model' must be a string"},
      {doc_with(good + ",7"), "traceEvents[1]: must be an object"},
      {doc_with(good + "," + with("\"ph\":\"X\"", "\"ph\":\"B\"")),
       "traceEvents[1]: field 'ph' must be \"X\", \"C\" or \"M\""},
      {doc_with(with("\"dur\":2.0", "\"dur\":-3")),
       "traceEvents[0]: field 'dur' must be a non-negative number, got -3"},
      {doc_with(with("\"ts\":1.0,", "")), "traceEvents[0]: field 'ts' is missing"},
      {doc_with(with("\"pid\":0", "\"pid\":\"0\"")),
       "traceEvents[0]: field 'pid' must be an integer, got \"0\""},
      {doc_with(with("\"tid\":0", "\"tid\":1.5")), "field 'tid' must be an integer, got 1.5"},
      {doc_with(with(",\"args\":{\"op\":\"add\",\"layer\":\"x\"}", "")),
       "traceEvents[0]: field 'args' is missing"},
      {doc_with(with("\"op\":\"add\",", "")), "traceEvents[0]: args: field 'op' is missing"},
      {doc_with(with("\"layer\":\"x\"", "\"layer\":\"x\",\"bytes\":\"many\"")),
       "args: field 'bytes' must be an integer"},
      {doc_with(with("\"layer\":\"x\"", "\"layer\":\"x\",\"coords\":[0,-1]")),
       "args: field 'coords[1]' must be a non-negative integer"},
      {doc_with(with("\"layer\":\"x\"", "\"layer\":\"x\",\"critical\":1")),
       "args: field 'critical' must be true or false"},
      {doc_with(with("\"layer\":\"x\"", "\"layer\":\"x\",\"micro\":-1")),
       "args: field 'micro' must lie in [0, 2^30]"},
      {doc_with(with("\"cat\":\"compute\"", "\"cat\":\"compute\",\"flow_out\":true")),
       "field 'bind_id' is missing"},
      {doc_with(with("\"cat\":\"compute\"", "\"cat\":\"compute\",\"bind_id\":\"0_1_0\"")),
       "needs exactly one of flow_out and flow_in"},
      {doc_with(R"({"ph":"C","name":"memory","pid":0,"ts":1,"args":{"parameter":"big"}})"),
       "field 'args.parameter' must be a number"},
      {doc_with(R"({"ph":"M","name":"process_sort_index","pid":0,"args":{"name":"x"}})"),
       "must be process_name or thread_name"},
      {doc_with(R"({"ph":"M","name":"thread_name","pid":0,"args":{"name":"x"}})"),
       "traceEvents[0]: field 'tid' is missing"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    REQUIRE_THAT(error_of([&] { core::read_chrome_trace(c.text, "t.json"); }), Contains(c.needle));
  }
  REQUIRE(core::read_chrome_trace(doc_with(good)).events.size() == 1);  // the base case is valid
}
