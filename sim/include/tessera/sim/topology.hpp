// Cluster topology: devices, switches, NICs and links (a Boost.Graph underneath), with routing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/sim/devices.hpp"

namespace tessera::sim {

/// Simulated time and durations are integer picoseconds.
using Picos = std::int64_t;
inline constexpr Picos kPicosPerSecond = 1'000'000'000'000;

/// What a vertex is. Gpu and Cpu are compute nodes (ranks map to them); the rest only forward.
enum class NodeKind { Gpu, Cpu, NvSwitch, PcieSwitch, HostBridge, Nic, NetSwitch };
/// "gpu", "cpu", "nvswitch", "pcie_switch", "host_bridge", "nic", "net_switch" (the JSON names).
std::string node_kind_name(NodeKind k);
/// The inverse of node_kind_name; throws InvalidArgument listing the kinds.
NodeKind parse_node_kind(const std::string& s);
/// True for Gpu and Cpu: the vertices that run ranks and never forward others' traffic.
bool is_compute(NodeKind k) noexcept;

/// A vertex. Compute nodes (Gpu, Cpu) name a DeviceSpec of the catalog in `device`.
struct Node {
  std::string name;       ///< unique, e.g. "node0/gpu3", "node0/nvswitch", "leaf1"
  NodeKind kind = NodeKind::Gpu;
  std::string device;     ///< catalog key for Gpu/Cpu ("a100-80gb"); empty otherwise
  int host = 0;           ///< which machine (node) it belongs to; -1 for a cluster switch
};

/// A full-duplex link: `bw_bytes_per_s` in each direction, one-way latency.
struct Link {
  int a = -1, b = -1;
  double bw_bytes_per_s = 0;
  Picos latency_ps = 0;
  std::string kind;  ///< "nvlink", "pcie", "ib", "ethernet", "shm", "loopback"
};

/// One direction of a link (edge id = 2·link + (0: a→b, 1: b→a)).
struct DirectedEdge {
  int link = -1;
  int from = -1, to = -1;
};

/// The graph of a cluster. Routes are shortest paths by (latency, hops), deterministic, cached.
/// Compute nodes are endpoints only: no route passes through a GPU or CPU (NCCL's PXN relay is
/// not modelled). Among equal (latency, hops) paths the one whose vertices have the smallest ids,
/// compared from the destination backwards, wins. Routing is thread-safe; building is not.
class Topology {
 public:
  Topology();
  ~Topology();
  Topology(const Topology&);
  Topology& operator=(const Topology&);
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  /// Throws InvalidArgument for a duplicate or empty name, a compute node without a device (or
  /// another node with one), or a host below -1. Device names are checked by check_devices().
  int add_node(Node n);
  /// Throws InvalidArgument for unknown endpoints, a self-loop or a non-positive bandwidth.
  int add_link(int a, int b, double bw_bytes_per_s, Picos latency_ps, std::string kind);

  const std::vector<Node>& nodes() const noexcept;
  const std::vector<Link>& links() const noexcept;
  int find_node(const std::string& name) const noexcept;  ///< -1 when absent
  /// Compute nodes (Gpu, or Cpu when the cluster has no GPU), in the order ranks map to them.
  std::vector<int> devices() const;
  /// Number of distinct machines (distinct host ≥ 0).
  int num_hosts() const;
  /// Number of directed edges (2 · links().size()).
  int num_edges() const noexcept;
  DirectedEdge edge(int edge_id) const;
  double edge_bw(int edge_id) const;
  Picos edge_latency(int edge_id) const;

  /// Directed edge ids from src to dst (empty for src == dst). Throws InvalidArgument when dst is
  /// unreachable (names both nodes).
  const std::vector<int>& route(int src, int dst) const;
  /// Whether route() finds routes between hosts through their symmetry (the default): hosts with
  /// the same nodes and links, attached to the same cluster switches in the same way, are
  /// interchangeable, so routes are searched from the first two hosts of each such class only and
  /// renamed for the others — the same routes (tested against the search from every source on the
  /// presets), at a cost that grows with the classes, not the hosts. Off: one shortest-path search
  /// per source (`--engine exact`). Routes already found are kept either way.
  void set_symmetric_routing(bool on);
  bool symmetric_routing() const noexcept;

  /// A node's place in the hosts' symmetry: the class of its host (hosts with the same nodes and
  /// links, attached to the same cluster switches in the same way: any permutation of a class's
  /// hosts is an automorphism of the graph), the host (its index among the hosts, in id order) and
  /// its position within the host. host_class is -1 for a cluster switch, and for every node when
  /// the topology lacks the form symmetric routing relies on (then no two nodes are alike).
  struct NodePlace {
    int host_class = -1, host = -1, local = -1;
  };
  /// Every node's place, by node id.
  std::vector<NodePlace> node_places() const;
  /// Sum of the latencies along route(src, dst).
  Picos route_latency(int src, int dst) const;
  /// The smallest bandwidth along route(src, dst).
  double route_bw(int src, int dst) const;

  /// Throws InvalidArgument naming the first compute node whose device is not in `catalog`.
  void check_devices(const DeviceCatalog& catalog) const;

  /// A short human summary ("8× a100-80gb, 1 host, NVSwitch 300 GB/s per GPU per direction").
  std::string describe() const;
  std::string name;  ///< the preset or file name ("dgx-a100:4")

  /// Presets: dgx-a100, dgx-h100, hgx-h200, hgx-b200, gb200-nvl72 (one 72-GPU rack), mi300x,
  /// rtx4090x4, cpu-host, and clusters "FAMILY:N" of those machine families and of h20, mi325x,
  /// mi355x, l40s (rail-optimised InfiniBand; gb200-nvl72:N counts racks), "FAMILY:N:fat-tree"
  /// (two-level fat tree) and "FAMILY:N+FAMILY:M" (families in one job on one rail network).
  /// Throws InvalidArgument listing the presets.
  /// `cpu-host` and `cpu-host:N` (N ranks sharing this machine) take their link figures from the
  /// built-in cpu-host entry (shared-memory copy, REFERENCES.md) — or, through the overload below,
  /// from a catalog that `tessera calibrate` has updated.
  static Topology preset(const std::string& name);
  /// The same, with device figures (the cpu-host shared-memory link) from `catalog`. This is the
  /// calibration hook: a calibrated catalog makes "cpu-host" this machine's measured topology.
  static Topology preset(const std::string& name, const DeviceCatalog& catalog);
  /// The preset forms, for --list: "dgx-a100", ..., "dgx-a100:N", "dgx-a100:N:fat-tree", ...
  static std::vector<std::string> preset_names();
  /// JSON: {"name":..., "nodes":[{"name","kind","device","host"}], "links":[{"a","b","bw_GBps",
  /// "latency_us","kind"}]}. Malformed input throws InvalidArgument naming the field or node.
  /// Devices are checked against the built-in catalog (the overload takes another one).
  static Topology from_json(const std::string& text, const std::string& origin = "topology file");
  static Topology from_json(const std::string& text, const DeviceCatalog& catalog,
                            const std::string& origin);
  std::string to_json() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::sim
