// Random clusters shaped like the ones people build: hosts of a few GPUs on an NVSwitch or a PCIe
// tree, NICs per GPU or per pair of GPUs, a rail-optimised or a fat-tree network (possibly
// oversubscribed), sometimes a second kind of host. The tests of the fast routing and engine
// compare them with the exact ones on these.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "tessera/sim/topology.hpp"

namespace tessera::simtest {

struct RandomCluster {
  sim::Topology topology;
  std::string description;  ///< for failure messages
};

/// A random cluster of `hosts` hosts from `seed`. Hosts' nodes come first, switches after; every
/// GPU can reach every other.
inline RandomCluster random_cluster(unsigned seed, int hosts) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int gpus = 2 * pick(1, 4);        // 2, 4, 6 or 8 per host
  const bool nvswitch = pick(0, 1) == 1;  // else a PCIe tree through the host bridge
  const int per_nic = pick(1, 2);         // GPUs per NIC
  const bool fat_tree = pick(0, 1) == 1;
  const int hosts_per_leaf = pick(1, 3);
  const double oversub = fat_tree ? 1.0 / pick(1, 3) : 1.0;
  const int mixed_from = pick(0, 1) == 1 ? hosts / 2 : hosts;  // hosts from here have H100s
  const double nic_bw = 12.5e9 * pick(1, 4), nvlink_bw = 100e9 * pick(1, 4), pcie_bw = 25e9;
  const sim::Picos ns = 1000;
  RandomCluster c;
  c.description = "seed " + std::to_string(seed) + ": " + std::to_string(hosts) + " hosts of " +
                  std::to_string(gpus) + " GPUs, " + (nvswitch ? "nvswitch" : "pcie") + ", " +
                  std::to_string(per_nic) + " GPU(s) per NIC, " +
                  (fat_tree ? "fat tree of " + std::to_string(hosts_per_leaf) + " hosts per leaf"
                            : std::string("rails")) +
                  (mixed_from < hosts ? ", mixed devices" : "");
  sim::Topology& t = c.topology;
  std::vector<std::vector<int>> nics(hosts);
  for (int h = 0; h < hosts; ++h) {
    const std::string p = "node" + std::to_string(h) + "/";
    const std::string dev = h < mixed_from ? "a100-80gb" : "h100-sxm";
    const int bridge = t.add_node({p + "host", sim::NodeKind::HostBridge, "", h});
    const int sw = nvswitch ? t.add_node({p + "nvswitch", sim::NodeKind::NvSwitch, "", h}) : -1;
    int pcie = -1;
    for (int g = 0; g < gpus; ++g) {
      const int gpu = t.add_node({p + "gpu" + std::to_string(g), sim::NodeKind::Gpu, dev, h});
      if (g % per_nic == 0) {
        pcie = t.add_node({p + "pcie" + std::to_string(g), sim::NodeKind::PcieSwitch, "", h});
        const int nic = t.add_node({p + "nic" + std::to_string(g), sim::NodeKind::Nic, "", h});
        t.add_link(pcie, bridge, pcie_bw, 500 * ns, "pcie");
        t.add_link(pcie, nic, pcie_bw, 500 * ns, "pcie");
        nics[h].push_back(nic);
      }
      t.add_link(gpu, pcie, pcie_bw, 500 * ns, "pcie");
      if (sw >= 0) t.add_link(gpu, sw, nvlink_bw, 300 * ns, "nvlink");
    }
  }
  const int rails = static_cast<int>(nics[0].size());
  const int spine = t.add_node({"spine", sim::NodeKind::NetSwitch, "", -1});
  const int leaves = fat_tree ? (hosts + hosts_per_leaf - 1) / hosts_per_leaf : rails;
  std::vector<int> leaf;
  for (int j = 0; j < leaves; ++j) {
    leaf.push_back(t.add_node({"leaf" + std::to_string(j), sim::NodeKind::NetSwitch, "", -1}));
    const int down =
        fat_tree ? rails * std::min(hosts_per_leaf, hosts - j * hosts_per_leaf) : hosts;
    t.add_link(leaf[j], spine, down * nic_bw * oversub, 130 * ns, "ib");
  }
  for (int h = 0; h < hosts; ++h)
    for (int i = 0; i < rails; ++i)
      t.add_link(nics[h][i], leaf[fat_tree ? h / hosts_per_leaf : i], nic_bw, 600 * ns, "ib");
  t.name = "random:" + std::to_string(seed);
  return c;
}

}  // namespace tessera::simtest
