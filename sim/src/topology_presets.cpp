// Built-in topologies: DGX A100, DGX H100, HGX H200 (single node and rail-optimised or fat-tree
// InfiniBand clusters), a 4× RTX 4090 PCIe workstation and this CPU host. Figures and their
// sources are tabulated in docs/simulator.md, "Topologies and devices".
#include <cmath>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::sim {

namespace {

constexpr Picos kPs = 1, kNs = 1000 * kPs;

// Bandwidths per direction (GB = 1e9 bytes).
constexpr double kNvlink3 = 300e9;  // A100 SXM4: 12 NVLink3 links × 25 GB/s (datasheet: 600 GB/s
                                    // bidirectional per GPU)
constexpr double kNvlink4 = 450e9;  // H100/H200 SXM5: 18 NVLink4 links × 25 GB/s (900 GB/s bidir.)
constexpr double kPcie4 = 25e9;     // PCIe 4.0 x16: 31.5 GB/s raw (16 GT/s, 128b/130b); ≈25 GB/s
                                    // after packet overhead, as bandwidthTest measures
constexpr double kPcie5 = 50e9;     // PCIe 5.0 x16: 63 GB/s raw; ≈50 GB/s effective
constexpr double kHdr = 25e9;       // InfiniBand HDR, ConnectX-6: 200 Gb/s
constexpr double kNdr = 50e9;       // InfiniBand NDR, ConnectX-7: 400 Gb/s

// One-way latencies per link. GPU→NVSwitch→GPU = 0.6 µs and GPU→PCIe→GPU = 1.0 µs match the
// per-hop latencies of NCCL's cost model (src/graph/tuning.cc, hwLat, LL protocol); a ConnectX
// port is "sub 0.6 µs", a Quantum switch 130 ns port to port (NVIDIA datasheets).
constexpr Picos kNvlinkLat = 300 * kNs;
constexpr Picos kPcieLat = 500 * kNs;
constexpr Picos kIbPortLat = 600 * kNs;
constexpr Picos kIbSwitchLat = 130 * kNs;

struct NodeSpec {
  const char* device;
  double nvlink_bw, pcie_bw, nic_bw;
  int nodes_per_leaf;  ///< fat tree: 8 NICs per node, half the leaf radix down (QM8700 40 ports,
                       ///< QM9700 64 ports)
};
constexpr NodeSpec kDgxA100{"a100-80gb", kNvlink3, kPcie4, kHdr, 2};
constexpr NodeSpec kDgxH100{"h100-sxm", kNvlink4, kPcie5, kNdr, 4};
constexpr NodeSpec kHgxH200{"h200", kNvlink4, kPcie5, kNdr, 4};

std::string at(int host, const std::string& what) {
  return "node" + std::to_string(host) + "/" + what;
}

/// One 8-GPU SXM machine: GPUs on one NVSwitch vertex (the 6 or 4 NVSwitch chips act as one
/// non-blocking crossbar), each GPU with its rail NIC behind a PCIe switch (NCCL pairs GPU i with
/// NIC i), the PCIe switches under one host bridge (both CPU sockets). Returns NIC ids.
std::vector<int> add_sxm_node(Topology& t, const NodeSpec& s, int h) {
  const int nvswitch = t.add_node({at(h, "nvswitch"), NodeKind::NvSwitch, "", h});
  const int host = t.add_node({at(h, "host"), NodeKind::HostBridge, "", h});
  std::vector<int> nics;
  for (int i = 0; i < 8; ++i) {
    const std::string k = std::to_string(i);
    const int gpu = t.add_node({at(h, "gpu" + k), NodeKind::Gpu, s.device, h});
    const int pcie = t.add_node({at(h, "pcie" + k), NodeKind::PcieSwitch, "", h});
    const int nic = t.add_node({at(h, "nic" + k), NodeKind::Nic, "", h});
    t.add_link(gpu, nvswitch, s.nvlink_bw, kNvlinkLat, "nvlink");
    t.add_link(gpu, pcie, s.pcie_bw, kPcieLat, "pcie");
    t.add_link(pcie, nic, s.pcie_bw, kPcieLat, "pcie");
    t.add_link(pcie, host, s.pcie_bw, kPcieLat, "pcie");
    nics.push_back(nic);
  }
  return nics;
}

/// N machines. Rail-optimised: NIC i of every node on leaf i. Fat tree: a node's NICs on the
/// leaf of its group. The spine layer is one vertex whose leaf links carry as much as the leaf's
/// downlinks (non-blocking, ECMP taken as perfect).
Topology sxm_cluster(const NodeSpec& s, int n, bool fat_tree) {
  Topology t;
  std::vector<std::vector<int>> nics;
  for (int h = 0; h < n; ++h) nics.push_back(add_sxm_node(t, s, h));
  const int spine = t.add_node({"spine", NodeKind::NetSwitch, "", -1});
  const int leaves = fat_tree ? (n + s.nodes_per_leaf - 1) / s.nodes_per_leaf : 8;
  std::vector<int> leaf;
  for (int j = 0; j < leaves; ++j) {
    leaf.push_back(t.add_node({"leaf" + std::to_string(j), NodeKind::NetSwitch, "", -1}));
    const int down = fat_tree ? 8 * std::min(s.nodes_per_leaf, n - j * s.nodes_per_leaf) : n;
    t.add_link(leaf[j], spine, down * s.nic_bw, kIbSwitchLat, "ib");
  }
  for (int h = 0; h < n; ++h)
    for (int i = 0; i < 8; ++i)
      t.add_link(nics[h][i], leaf[fat_tree ? h / s.nodes_per_leaf : i], s.nic_bw, kIbPortLat, "ib");
  return t;
}

Topology sxm_single(const NodeSpec& s) {
  Topology t;
  add_sxm_node(t, s, 0);
  return t;
}

/// 4× RTX 4090 on PCIe 4.0 x16 to the CPU root complex; no NVLink (the 4090 has none) and no
/// peer-to-peer (disabled on GeForce), so every transfer crosses the root complex.
Topology rtx4090x4() {
  Topology t;
  const int root = t.add_node({"node0/root", NodeKind::HostBridge, "", 0});
  for (int i = 0; i < 4; ++i) {
    const int gpu = t.add_node({at(0, "gpu" + std::to_string(i)), NodeKind::Gpu, "rtx4090", 0});
    t.add_link(gpu, root, kPcie4, kPcieLat, "pcie");
  }
  return t;
}

/// This machine with `ranks` processes or threads, each a cpu node, exchanging data through
/// shared memory: one link per rank to the memory vertex with the catalog's cpu-host figures
/// (half the one-way latency on each of the two links of a rank-to-rank route).
Topology cpu_host(int ranks, const DeviceCatalog& catalog) {
  const DeviceSpec& cpu = catalog.get("cpu-host");
  TESSERA_CHECK(cpu.shm_bw_bytes_per_s > 0, "sim: device cpu-host has no shm_bw_GBps; give the "
                "shared-memory copy bandwidth in the device file (tessera calibrate writes it)");
  Topology t;
  const int mem = t.add_node({"node0/memory", NodeKind::HostBridge, "", 0});
  const auto half_lat = static_cast<Picos>(std::llround(cpu.shm_latency_s * 1e12 / 2));
  for (int i = 0; i < ranks; ++i) {
    const int c = t.add_node({at(0, "cpu" + std::to_string(i)), NodeKind::Cpu, "cpu-host", 0});
    t.add_link(c, mem, cpu.shm_bw_bytes_per_s, half_lat, "shm");
  }
  return t;
}

int parse_count(const std::string& s, const std::string& full) {
  std::size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TESSERA_CHECK(used == s.size() && n >= 1 && n <= 4096, "sim: topology preset \"", full,
                "\": \"", s, "\" is not a node count from 1 to 4096 (e.g. dgx-a100:16)");
  return n;
}

}  // namespace

std::vector<std::string> Topology::preset_names() {
  return {"dgx-a100",   "dgx-h100",   "hgx-h200",   "rtx4090x4",           "cpu-host",
          "cpu-host:N", "dgx-a100:N", "dgx-h100:N", "hgx-h200:N",          "dgx-a100:N:fat-tree",
          "dgx-h100:N:fat-tree", "hgx-h200:N:fat-tree"};
}

Topology Topology::preset(const std::string& name) { return preset(name, DeviceCatalog{}); }

Topology Topology::preset(const std::string& name, const DeviceCatalog& catalog) {
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t colon = name.find(':', start);
    parts.push_back(name.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  const std::string& base = parts[0];
  const NodeSpec* sxm = base == "dgx-a100"   ? &kDgxA100
                        : base == "dgx-h100" ? &kDgxH100
                        : base == "hgx-h200" ? &kHgxH200
                                             : nullptr;
  Topology t;
  bool known = true;
  if (sxm && parts.size() == 1) {
    t = sxm_single(*sxm);
  } else if (sxm && parts.size() <= 3) {
    const bool fat_tree = parts.size() == 3 && parts[2] == "fat-tree";
    TESSERA_CHECK(parts.size() == 2 || fat_tree || parts[2] == "rail", "sim: topology preset \"",
                  name, "\": unknown network \"", parts.back(), "\"; use rail or fat-tree");
    t = sxm_cluster(*sxm, parse_count(parts[1], name), fat_tree);
  } else if (base == "rtx4090x4" && parts.size() == 1) {
    t = rtx4090x4();
  } else if (base == "cpu-host" && parts.size() <= 2) {
    t = cpu_host(parts.size() == 2 ? parse_count(parts[1], name) : 1, catalog);
  } else {
    known = false;
  }
  if (!known) {
    std::string list;
    for (const auto& p : preset_names()) list += (list.empty() ? "" : ", ") + p;
    throw InvalidArgument(detail::cat("sim: unknown topology preset \"", name, "\"; presets: ",
                                      list, " (or give a topology JSON file)"));
  }
  t.name = name;
  t.check_devices(catalog);
  return t;
}

}  // namespace tessera::sim
