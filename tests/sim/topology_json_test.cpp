// Topology files: round trips, and every kind of malformed input refused naming the field or node.
#include "sim_test_util.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;

namespace {

const char* kGood = R"({"name": "pair", "nodes": [
  {"name": "g0", "kind": "gpu", "device": "h100-sxm", "host": 0},
  {"name": "g1", "kind": "gpu", "device": "h100-sxm", "host": 1},
  {"name": "sw", "kind": "net_switch", "host": -1}],
 "links": [{"a": "g0", "b": "sw", "bw_GBps": 50, "latency_us": 1.25, "kind": "ib"},
           {"a": "g1", "b": "sw", "bw_GBps": 12.5, "latency_us": 0.5}]})";

/// kGood with `from` replaced by `to` (which must occur).
std::string edit(const std::string& from, const std::string& to) {
  std::string s = kGood;
  const auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

}  // namespace

TEST_CASE("a topology file loads with its units converted", "[sim]") {
  const Topology t = Topology::from_json(kGood);
  REQUIRE(t.name == "pair");
  REQUIRE(t.num_hosts() == 2);
  REQUIRE(t.links()[0].bw_bytes_per_s == 50e9);
  REQUIRE(t.links()[0].latency_ps == 1'250'000);
  REQUIRE(t.links()[1].kind == "link");
  REQUIRE(t.route_latency(0, 1) == 1'750'000);
  REQUIRE(t.nodes()[2].kind == NodeKind::NetSwitch);
}

TEST_CASE("topologies round-trip through JSON", "[sim]") {
  const std::string name = GENERATE(as<std::string>{}, "dgx-a100", "dgx-h100:2", "hgx-h200:2:fat-tree",
                                    "rtx4090x4", "cpu-host:3");
  const Topology t = Topology::preset(name);
  const Topology back = Topology::from_json(t.to_json(), "round trip");
  REQUIRE(back.to_json() == t.to_json());
  REQUIRE(back.name == name);
  REQUIRE(back.nodes().size() == t.nodes().size());
  for (std::size_t i = 0; i < t.nodes().size(); ++i) {
    REQUIRE(back.nodes()[i].name == t.nodes()[i].name);
    REQUIRE(back.nodes()[i].kind == t.nodes()[i].kind);
    REQUIRE(back.nodes()[i].device == t.nodes()[i].device);
    REQUIRE(back.nodes()[i].host == t.nodes()[i].host);
  }
  REQUIRE(back.links().size() == t.links().size());
  for (std::size_t i = 0; i < t.links().size(); ++i) {
    REQUIRE(back.links()[i].a == t.links()[i].a);
    REQUIRE(back.links()[i].b == t.links()[i].b);
    REQUIRE(back.links()[i].bw_bytes_per_s == t.links()[i].bw_bytes_per_s);
    REQUIRE(back.links()[i].latency_ps == t.links()[i].latency_ps);
    REQUIRE(back.links()[i].kind == t.links()[i].kind);
  }
}

TEST_CASE("malformed topology files are refused, naming the field or node", "[sim]") {
  struct Case {
    std::string text;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"{\"nodes\": [", {"my.json", "not valid JSON"}},
      {"{\"nodes\": [1e999]}", {"my.json", "not valid JSON", "number overflow"}},  // as fuzz_model_json found
      {"[1, 2]", {"my.json", "is an object"}},
      {R"({"links": []})", {"missing field \"nodes\""}},
      {R"({"nodes": [{"name": "g", "kind": "gpu", "device": "a100-80gb"}]})",
       {"missing field \"links\""}},
      {R"({"nodes": [], "links": []})", {"\"nodes\" must be a non-empty array"}},
      {edit(R"("nodes": [)", R"("bogus": 1, "nodes": [)"), {"unknown field \"bogus\""}},
      {edit(R"({"name": "g0", )", R"({)"), {"nodes[0]", "missing field \"name\""}},
      {edit(R"({"name": "g1")", R"({"name": "g0")"), {"nodes[1]", "duplicate node name \"g0\""}},
      {edit(R"("kind": "net_switch")", R"("kind": "router")"),
       {"nodes[2] (\"sw\")", "field \"kind\"", "router"}},
      {edit(R"("device": "h100-sxm", "host": 1)", R"("host": 1)"),
       {"nodes[1] (\"g1\")", "missing field \"device\""}},
      {edit(R"("device": "h100-sxm", "host": 1)", R"("device": "tpu-v5", "host": 1)"),
       {"nodes[1] (\"g1\")", "unknown device \"tpu-v5\""}},
      {edit(R"("host": 1)", R"("host": "one")"), {"nodes[1]", "\"host\" must be an integer"}},
      {edit(R"("host": 1)", R"("host": -3)"), {"nodes[1]", "\"host\" is -3"}},
      {edit(R"("kind": "net_switch", "host": -1)", R"("kind": "net_switch", "device": "h200")"),
       {"nodes[2]", "only gpu and cpu"}},
      {edit(R"("name": "g0", "kind": "gpu")", R"("name": 7, "kind": "gpu")"),
       {"nodes[0]", "\"name\" must be a string"}},
      {edit(R"({"a": "g1", "b": "sw")", R"({"a": "g9", "b": "sw")"),
       {"links[1] (g9 – sw)", "unknown node \"g9\""}},
      {edit(R"("b": "sw", "bw_GBps": 50)", R"("b": "gx", "bw_GBps": 50)"),
       {"links[0] (g0 – gx)", "field \"b\" names unknown node \"gx\""}},
      {edit(R"("bw_GBps": 50)", R"("bw_GBps": -50)"), {"links[0] (g0 – sw)", "\"bw_GBps\" is -50"}},
      {edit(R"("bw_GBps": 50)", R"("bw_GBps": 0)"), {"links[0]", "\"bw_GBps\" is 0"}},
      {edit(R"("bw_GBps": 50)", R"("bw_GBps": "fast")"), {"links[0]", "\"bw_GBps\" must be a number"}},
      {edit(R"("bw_GBps": 12.5, )", ""), {"links[1] (g1 – sw)", "missing field \"bw_GBps\""}},
      {edit(R"("latency_us": 1.25)", R"("latency_us": -1)"), {"links[0]", "\"latency_us\" is -1"}},
      {edit(R"("latency_us": 0.5})", R"("latency_us": 0.5, "speed": 3})"),
       {"links[1]", "unknown field \"speed\""}},
      {edit(R"({"a": "g1", "b": "sw")", R"({"a": "sw", "b": "sw")"), {"links[1]", "to itself"}},
      {edit(R"("links": [)", R"("links": 5, "x": [)"), {"unknown field \"x\""}},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of([&] { Topology::from_json(c.text, "my.json"); });
    REQUIRE(lacks(msg, c.says) == "");
    REQUIRE(msg.find("my.json") != std::string::npos);
  }
  REQUIRE(error_of([] { Topology::from_json(kGood, "my.json"); }) == "(no error)");
}
