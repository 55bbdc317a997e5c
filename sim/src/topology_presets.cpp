// Built-in topologies: DGX A100, DGX H100, HGX H200/B200/H20, GB200 NVL72 racks, 8× MI300X,
// MI325X, MI355X and L40S machines (one machine, or rail-optimised or fat-tree InfiniBand clusters,
// or families joined in one job), a 4× RTX 4090 PCIe workstation and this CPU host. Figures and
// their sources are tabulated in docs/simulator.md, "Devices and presets".
#include <algorithm>
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
constexpr double kNvlink5 = 900e9;  // B200/GB200: 18 NVLink5 links × 50 GB/s (1.8 TB/s bidir.)
constexpr double kXgmi3 = 64e9;     // MI300X/MI325X: one Infinity Fabric link per GPU pair,
                                    // 128 GB/s bidirectional (7 links, 896 GB/s aggregate)
constexpr double kXgmi4 = 76.8e9;   // MI355X: 153.6 GB/s bidirectional per link (7 links)
constexpr double kPcie4 = 25e9;     // PCIe 4.0 x16: 31.5 GB/s raw (16 GT/s, 128b/130b); ≈25 GB/s
                                    // after packet overhead, as bandwidthTest measures
constexpr double kPcie5 = 50e9;     // PCIe 5.0 x16: 63 GB/s raw; ≈50 GB/s effective
constexpr double kHdr = 25e9;       // InfiniBand HDR, ConnectX-6: 200 Gb/s
constexpr double kNdr = 50e9;       // InfiniBand NDR, ConnectX-7: 400 Gb/s

// One-way latencies per link. GPU→NVSwitch→GPU = 0.6 µs and GPU→PCIe→GPU = 1.0 µs match the
// per-hop latencies of NCCL's cost model (src/graph/tuning.cc, hwLat, LL protocol); a ConnectX
// port is "sub 0.6 µs", a Quantum switch 130 ns port to port (NVIDIA datasheets). A direct
// Infinity Fabric link takes the whole GPU-to-GPU 0.6 µs (RCCL keeps NCCL's latency table).
constexpr Picos kNvlinkLat = 300 * kNs;
constexpr Picos kXgmiLat = 600 * kNs;
constexpr Picos kPcieLat = 500 * kNs;
constexpr Picos kIbPortLat = 600 * kNs;
constexpr Picos kIbSwitchLat = 130 * kNs;

/// How a machine's GPUs reach each other: one NVSwitch vertex per machine, one NVLink Switch
/// vertex per rack shared by its compute trays (GB200 NVL72), a direct link per GPU pair (AMD
/// Infinity Fabric), or only PCIe through the host bridge.
enum class Fabric { NvSwitch, NvlDomain, Mesh, Pcie };

struct NodeSpec {
  const char* family;  ///< preset name: "dgx-a100", "gb200-nvl72", ...
  const char* device;
  double gpu_bw;  ///< per GPU to its switch, or per GPU pair on a mesh, per direction
  double pcie_bw, nic_bw;
  int nodes_per_leaf;  ///< fat tree: half the leaf radix down over NICs per node (QM8700 40
                       ///< ports, QM9700 and 400G Ethernet switches 64 ports)
  Fabric fabric = Fabric::NvSwitch;
  int gpus = 8;    ///< per machine (host), each with its PCIe switch and rail NIC
  int domain = 1;  ///< NvlDomain: machines per NVLink domain; "family:N" counts domains
};
constexpr NodeSpec kDgxA100{"dgx-a100", "a100-80gb", kNvlink3, kPcie4, kHdr, 2};
constexpr NodeSpec kDgxH100{"dgx-h100", "h100-sxm", kNvlink4, kPcie5, kNdr, 4};
constexpr NodeSpec kHgxH200{"hgx-h200", "h200", kNvlink4, kPcie5, kNdr, 4};
constexpr NodeSpec kHgxB200{"hgx-b200", "b200", kNvlink5, kPcie5, kNdr, 4};
constexpr NodeSpec kHgxH20{"h20", "h20", kNvlink4, kPcie5, kNdr, 4};
// GB200 NVL72: 18 compute trays (hosts) of 4 GPUs, each GPU with a ConnectX-7 400G NIC.
constexpr NodeSpec kNvl72{"gb200-nvl72",     "gb200", kNvlink5, kPcie5, kNdr, 8,
                          Fabric::NvlDomain, 4,       18};
constexpr NodeSpec kMi300x{"mi300x", "mi300x", kXgmi3, kPcie5, kNdr, 4, Fabric::Mesh};
constexpr NodeSpec kMi325x{"mi325x", "mi325x", kXgmi3, kPcie5, kNdr, 4, Fabric::Mesh};
constexpr NodeSpec kMi355x{"mi355x", "mi355x", kXgmi4, kPcie5, kNdr, 4, Fabric::Mesh};
// L40S: PCIe Gen4 only, a 200 Gb/s NIC per GPU (NVIDIA's 2-8-5-200 reference: 200 Gb/s per GPU).
constexpr NodeSpec kL40s{"l40s", "l40s", 0, kPcie4, kHdr, 2, Fabric::Pcie};
constexpr const NodeSpec* kFamilies[] = {&kDgxA100, &kDgxH100, &kHgxH200, &kHgxB200, &kHgxH20,
                                         &kNvl72,   &kMi300x,  &kMi325x,  &kMi355x,  &kL40s};

const NodeSpec* family(const std::string& name) {
  for (const NodeSpec* s : kFamilies)
    if (name == s->family) return s;
  return nullptr;
}

std::string at(int host, const std::string& what) {
  return "node" + std::to_string(host) + "/" + what;
}

/// One machine's vertices, in id order.
struct Host {
  const NodeSpec* spec;
  std::vector<int> gpus, nics;
};

/// One machine: its GPUs on its fabric (an NvSwitch vertex: the 6 or 4 NVSwitch chips act as one
/// non-blocking crossbar; a mesh: a link per GPU pair), each GPU with its rail NIC behind a PCIe
/// switch (NCCL pairs GPU i with NIC i), the PCIe switches under one host bridge (both CPU
/// sockets). NvlDomain GPUs are joined to their rack's switch by add_nvl_domains.
Host add_host(Topology& t, const NodeSpec& s, int h) {
  const int nvswitch = s.fabric == Fabric::NvSwitch
                           ? t.add_node({at(h, "nvswitch"), NodeKind::NvSwitch, "", h})
                           : -1;
  const int bridge = t.add_node({at(h, "host"), NodeKind::HostBridge, "", h});
  Host host{&s, {}, {}};
  for (int i = 0; i < s.gpus; ++i) {
    const std::string k = std::to_string(i);
    const int gpu = t.add_node({at(h, "gpu" + k), NodeKind::Gpu, s.device, h});
    const int pcie = t.add_node({at(h, "pcie" + k), NodeKind::PcieSwitch, "", h});
    const int nic = t.add_node({at(h, "nic" + k), NodeKind::Nic, "", h});
    if (nvswitch >= 0) t.add_link(gpu, nvswitch, s.gpu_bw, kNvlinkLat, "nvlink");
    t.add_link(gpu, pcie, s.pcie_bw, kPcieLat, "pcie");
    t.add_link(pcie, nic, s.pcie_bw, kPcieLat, "pcie");
    t.add_link(pcie, bridge, s.pcie_bw, kPcieLat, "pcie");
    host.gpus.push_back(gpu);
    host.nics.push_back(nic);
  }
  if (s.fabric == Fabric::Mesh)
    for (int i = 0; i < s.gpus; ++i)
      for (int j = i + 1; j < s.gpus; ++j)
        t.add_link(host.gpus[i], host.gpus[j], s.gpu_bw, kXgmiLat, "xgmi");
  return host;
}

/// The NVLink Switch of each NVL72 rack: one non-blocking crossbar vertex (its 9 switch trays as
/// one, a cluster node) joined to every GPU of the rack's `domain` consecutive hosts.
void add_nvl_domains(Topology& t, const std::vector<Host>& hosts) {
  int rack = 0;
  for (std::size_t h = 0; h < hosts.size();) {
    const NodeSpec& s = *hosts[h].spec;
    if (s.fabric != Fabric::NvlDomain) {
      ++h;
      continue;
    }
    const int sw =
        t.add_node({"rack" + std::to_string(rack++) + "/nvswitch", NodeKind::NvSwitch, "", -1});
    for (int k = 0; k < s.domain && h < hosts.size(); ++k, ++h)
      for (int gpu : hosts[h].gpus) t.add_link(gpu, sw, s.gpu_bw, kNvlinkLat, "nvlink");
  }
}

/// The InfiniBand network. Rail-optimised: NIC i of every host on leaf i, at the host's own NIC
/// speed. Fat tree: a host's NICs on the leaf of its group. The spine layer is one vertex whose
/// leaf links carry as much as the leaf's downlinks (non-blocking, ECMP taken as perfect).
void add_ib(Topology& t, const std::vector<Host>& hosts, bool fat_tree) {
  const int n = static_cast<int>(hosts.size());
  const NodeSpec& s = *hosts[0].spec;  // fat tree: one family
  std::size_t rails = 0;
  for (const Host& h : hosts) rails = std::max(rails, h.nics.size());
  const int spine = t.add_node({"spine", NodeKind::NetSwitch, "", -1});
  const int leaves =
      fat_tree ? (n + s.nodes_per_leaf - 1) / s.nodes_per_leaf : static_cast<int>(rails);
  std::vector<int> leaf;
  for (int j = 0; j < leaves; ++j) {
    leaf.push_back(t.add_node({"leaf" + std::to_string(j), NodeKind::NetSwitch, "", -1}));
    double down = 0;
    if (fat_tree)
      down = s.gpus * std::min(s.nodes_per_leaf, n - j * s.nodes_per_leaf) * s.nic_bw;
    else
      for (const Host& h : hosts)
        if (static_cast<int>(h.nics.size()) > j) down += h.spec->nic_bw;
    t.add_link(leaf[j], spine, down, kIbSwitchLat, "ib");
  }
  for (int h = 0; h < n; ++h)
    for (std::size_t i = 0; i < hosts[h].nics.size(); ++i)
      t.add_link(hosts[h].nics[i], leaf[fat_tree ? h / s.nodes_per_leaf : static_cast<int>(i)],
                 hosts[h].spec->nic_bw, kIbPortLat, "ib");
}

/// One job's machines: `count` units (machines, or NVL72 racks) of each family in order, hosts
/// numbered across families. Every host's nodes come first and contiguously, then the cluster
/// switches (host -1): the host symmetry of topology_symmetry.cpp relies on that order.
struct Part {
  const NodeSpec* spec;
  int count;
};
Topology cluster(const std::vector<Part>& parts, bool network, bool fat_tree) {
  Topology t;
  std::vector<Host> hosts;
  for (const Part& p : parts)
    for (int k = 0; k < p.count * p.spec->domain; ++k)
      hosts.push_back(add_host(t, *p.spec, static_cast<int>(hosts.size())));
  add_nvl_domains(t, hosts);
  if (network) add_ib(t, hosts, fat_tree);
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
  TESSERA_CHECK(cpu.shm_bw_bytes_per_s > 0,
                "sim: device cpu-host has no shm_bw_GBps; give the "
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
  TESSERA_CHECK(used == s.size() && n >= 1 && n <= 4096, "sim: topology preset \"", full, "\": \"",
                s,
                "\" is not a node count (machines; racks for gb200-nvl72) from 1 "
                "to 4096 (e.g. dgx-a100:16)");
  return n;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

[[noreturn]] void unknown_preset(const std::string& name) {
  std::string list;
  for (const auto& p : Topology::preset_names()) list += (list.empty() ? "" : ", ") + p;
  throw InvalidArgument(detail::cat("sim: unknown topology preset \"", name, "\"; presets: ", list,
                                    " (or give a topology JSON file)"));
}

/// The most GPUs a preset builds (dgx-h100:4096); 16,384 (dgx-h100:2048, gb200-nvl72:228) fit.
constexpr int kMaxGpus = 32768;

/// "family", "family:N", "family:N:rail|fat-tree", or families joined by '+' ("dgx-a100:2+
/// dgx-h100:2": one rail-optimised network over both, each host with its own NIC speed).
Topology machines(const std::string& name) {
  const auto terms = split(name, '+');
  std::vector<Part> parts;
  bool network = terms.size() > 1, fat_tree = false;
  long gpus = 0;
  for (const std::string& term : terms) {
    const auto f = split(term, ':');
    const NodeSpec* s = family(f[0]);
    if (!s || f.size() > 3 || (terms.size() > 1 && f.size() != 2)) unknown_preset(name);
    if (f.size() == 3) {
      TESSERA_CHECK(f[2] == "rail" || f[2] == "fat-tree", "sim: topology preset \"", name,
                    "\": unknown network \"", f[2], "\"; use rail or fat-tree");
      fat_tree = f[2] == "fat-tree";
    }
    parts.push_back({s, f.size() == 1 ? 1 : parse_count(f[1], name)});
    network = network || f.size() > 1;
    gpus += static_cast<long>(parts.back().count) * s->domain * s->gpus;
  }
  TESSERA_CHECK(gpus <= kMaxGpus, "sim: topology preset \"", name, "\" has ", gpus,
                " GPUs; the presets build at most ", kMaxGpus, " (write a topology file for more)");
  return cluster(parts, network, fat_tree);
}

}  // namespace

std::vector<std::string> Topology::preset_names() {
  return {"dgx-a100",
          "dgx-h100",
          "hgx-h200",
          "hgx-b200",
          "gb200-nvl72",
          "mi300x",
          "rtx4090x4",
          "cpu-host",
          "cpu-host:N",
          "dgx-a100:N",
          "dgx-h100:N",
          "hgx-h200:N",
          "hgx-b200:N",
          "gb200-nvl72:N",
          "h20:N",
          "mi300x:N",
          "mi325x:N",
          "mi355x:N",
          "l40s:N",
          "dgx-a100:N:fat-tree",
          "dgx-h100:N:fat-tree",
          "hgx-h200:N:fat-tree",
          "FAMILY:N+FAMILY:M"};
}

Topology Topology::preset(const std::string& name) { return preset(name, DeviceCatalog{}); }

Topology Topology::preset(const std::string& name, const DeviceCatalog& catalog) {
  const auto parts = split(name, ':');
  Topology t;
  if (name == "rtx4090x4") {
    t = rtx4090x4();
  } else if (parts[0] == "cpu-host" && parts.size() <= 2) {
    t = cpu_host(parts.size() == 2 ? parse_count(parts[1], name) : 1, catalog);
  } else {
    t = machines(name);
  }
  t.name = name;
  t.check_devices(catalog);
  return t;
}

}  // namespace tessera::sim
