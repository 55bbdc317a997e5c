// Topology files: {"name", "nodes":[{"name","kind","device","host"}], "links":[{"a","b",
// "bw_GBps","latency_us","kind"}]}; every malformed case refused naming the field or node.
#include <cmath>

#include "json_fields.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::sim {

using namespace json_fields;

Topology Topology::from_json(const std::string& text, const std::string& origin) {
  return from_json(text, DeviceCatalog{}, origin);
}

Topology Topology::from_json(const std::string& text, const DeviceCatalog& catalog,
                             const std::string& origin) {
  const Json doc = parse(text, origin);
  TESSERA_CHECK(doc.is_object(), "sim: ", origin,
                ": a topology file is an object {\"name\", \"nodes\", \"links\"}");
  refuse_unknown(doc, {"name", "nodes", "links"}, origin);
  Topology t;
  if (doc.contains("name")) t.name = string_field(doc["name"], "name", origin);
  const Json& nodes = required(doc, "nodes", origin);
  const Json& links = required(doc, "links", origin);
  TESSERA_CHECK(nodes.is_array() && !nodes.empty(), "sim: ", origin,
                ": field \"nodes\" must be a non-empty array of {\"name\", \"kind\", ...}");
  TESSERA_CHECK(links.is_array(), "sim: ", origin,
                ": field \"links\" must be an array of {\"a\", \"b\", \"bw_GBps\", ...}");

  for (std::size_t i = 0; i < nodes.size(); ++i) {
    std::string where = detail::cat(origin, ": nodes[", i, "]");
    const Json& n = nodes[i];
    TESSERA_CHECK(n.is_object(), "sim: ", where, " must be an object {\"name\", \"kind\", ...}");
    refuse_unknown(n, {"name", "kind", "device", "host"}, where);
    Node node;
    node.name = string_field(required(n, "name", where), "name", where);
    where += " (\"" + node.name + "\")";
    TESSERA_CHECK(t.find_node(node.name) < 0, "sim: ", where, ": duplicate node name \"",
                  node.name, "\"; node names must be unique");
    const std::string kind = string_field(required(n, "kind", where), "kind", where);
    try {
      node.kind = parse_node_kind(kind);
    } catch (const InvalidArgument&) {
      throw InvalidArgument(detail::cat(
          "sim: ", where, ": field \"kind\" is \"", kind,
          "\", not one of gpu, cpu, nvswitch, pcie_switch, host_bridge, nic, net_switch"));
    }
    if (n.contains("device")) node.device = string_field(n["device"], "device", where);
    if (n.contains("host")) node.host = int_field(n["host"], "host", where);
    TESSERA_CHECK(node.host >= -1, "sim: ", where, ": field \"host\" is ", node.host,
                  "; give the machine index (≥ 0), or -1 for a cluster switch");
    TESSERA_CHECK(is_compute(node.kind) || node.device.empty(), "sim: ", where,
                  ": field \"device\" given for a ", kind, " node; only gpu and cpu nodes have one");
    if (is_compute(node.kind)) {
      TESSERA_CHECK(!node.device.empty(), "sim: ", where, ": missing field \"device\" (a ", kind,
                    " node names its catalog entry, e.g. \"a100-80gb\")");
      TESSERA_CHECK(catalog.contains(node.device), "sim: ", where, ": unknown device \"",
                    node.device, "\"; add it with a device file or use a catalog name");
    }
    t.add_node(std::move(node));
  }

  for (std::size_t i = 0; i < links.size(); ++i) {
    std::string where = detail::cat(origin, ": links[", i, "]");
    const Json& l = links[i];
    TESSERA_CHECK(l.is_object(), "sim: ", where, " must be an object {\"a\", \"b\", ...}");
    refuse_unknown(l, {"a", "b", "bw_GBps", "latency_us", "kind"}, where);
    const std::string a = string_field(required(l, "a", where), "a", where);
    const std::string b = string_field(required(l, "b", where), "b", where);
    where += " (" + a + " – " + b + ")";
    const int ia = t.find_node(a), ib = t.find_node(b);
    TESSERA_CHECK(ia >= 0, "sim: ", where, ": field \"a\" names unknown node \"", a,
                  "\"; declare it in \"nodes\"");
    TESSERA_CHECK(ib >= 0, "sim: ", where, ": field \"b\" names unknown node \"", b,
                  "\"; declare it in \"nodes\"");
    TESSERA_CHECK(ia != ib, "sim: ", where, ": joins node \"", a, "\" to itself");
    const double gbps = number_field(required(l, "bw_GBps", where), "bw_GBps", where);
    TESSERA_CHECK(gbps > 0 && gbps < 1e9, "sim: ", where, ": field \"bw_GBps\" is ", gbps,
                  "; give the bandwidth per direction in GB/s (1e9 bytes/s), greater than 0");
    const double lat_us = number_in(l, "latency_us", 0, 1e6, where, "give the one-way latency in µs");
    const std::string kind =
        l.contains("kind") ? string_field(l["kind"], "kind", where) : std::string("link");
    t.add_link(ia, ib, std::round(gbps * 1e9), static_cast<Picos>(std::llround(lat_us * 1e6)),
               kind);
  }
  return t;
}

std::string Topology::to_json() const {
  Json nodes = Json::array(), links = Json::array();
  for (const Node& n : this->nodes()) {
    Json j = {{"name", n.name}, {"kind", node_kind_name(n.kind)}, {"host", n.host}};
    if (!n.device.empty()) j["device"] = n.device;
    nodes.push_back(std::move(j));
  }
  for (const Link& l : this->links())
    links.push_back({{"a", this->nodes()[l.a].name},
                     {"b", this->nodes()[l.b].name},
                     {"bw_GBps", l.bw_bytes_per_s / 1e9},
                     {"latency_us", static_cast<double>(l.latency_ps) / 1e6},
                     {"kind", l.kind}});
  return Json{{"name", name}, {"nodes", nodes}, {"links", links}}.dump(2);
}

}  // namespace tessera::sim
