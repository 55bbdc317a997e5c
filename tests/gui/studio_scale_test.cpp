// The studio at cluster scale, headless: the topology of 1,024 GPUs aggregated into host boxes,
// switch boxes and lines (every node and link in exactly one, the figures equal to those computed
// from the links directly), a host zoomed into, and the topology view drawing both.
#include <QComboBox>
#include <QImage>
#include <QLabel>
#include <QPushButton>
#include <chrono>
#include <map>
#include <set>

#include "gui_app.hpp"
#include "memory_view.hpp"
#include "planner_view.hpp"
#include "shard_map_view.hpp"
#include "simulation.hpp"
#include "support/catch.hpp"
#include "tessera/run/simulate.hpp"
#include "timeline_view.hpp"
#include "topology_aggregate.hpp"
#include "topology_view.hpp"

using namespace tessera;
using namespace tessera::studio;

namespace {

StudioConfig clusterConfig(const QString& topology, int hosts) {
  StudioConfig c;
  c.model = "convnext-t";
  c.input = "3x256x2048";
  c.batch = hosts;
  c.mesh = QStringLiteral("dp=%1,sp=8").arg(hosts);
  c.topology = topology;
  return c;
}

/// The views' topology of `c`, simulated folded (the same link figures; the studio's every-rank
/// run adds only the trace's lanes).
TopologyGraph clusterGraph(const StudioConfig& c) {
  const run::SimRun r = run::simulate(resolveConfig(c), /*every_rank=*/false, /*keep_trace=*/false);
  return buildTopologyGraph(r.setup.topology, r.result, r.setup.mesh.size());
}

const TopologyGraph& rail128() {
  static const TopologyGraph g = clusterGraph(clusterConfig("dgx-a100:128", 128));
  return g;
}

const TopologyGraph& fatTree128() {
  static const TopologyGraph g = clusterGraph(clusterConfig("dgx-a100:128:fat-tree", 128));
  return g;
}

int countLevel(const AggregatedTopology& a, int level) {
  int n = 0;
  for (const AggregateBox& b : a.boxes) n += b.level == level ? 1 : 0;
  return n;
}

/// Every node in exactly one box, every link in exactly one box or line, and each aggregate's
/// max/mean utilisation equal to the one computed from the graph's links by box membership.
void checkPartition(const TopologyGraph& g, const AggregatedTopology& a) {
  std::vector<int> nodeSeen(g.nodes.size(), 0), linkSeen(g.links.size(), 0),
      boxOf(g.nodes.size(), -1);
  int devices = 0;
  for (int b = 0; b < static_cast<int>(a.boxes.size()); ++b) {
    for (int n : a.boxes[b].nodes) ++nodeSeen[n], boxOf[n] = b;
    devices += a.boxes[b].devices;
    for (int l : a.boxes[b].links) ++linkSeen[l];
  }
  for (const AggregateLine& l : a.lines)
    for (int i : l.links) ++linkSeen[i];
  for (int s : nodeSeen) REQUIRE(s == 1);
  for (int s : linkSeen) REQUIRE(s == 1);
  REQUIRE(devices == 1024);
  // Directly: group the links by (box, box, kind) from the box membership alone.
  std::map<std::tuple<int, int, QString>, std::vector<double>> direct;
  int withBytes = 0;
  for (const GraphLink& l : g.links) {
    const int x = std::min(boxOf[l.a], boxOf[l.b]), y = std::max(boxOf[l.a], boxOf[l.b]);
    direct[{x, y, x == y ? QString() : l.kind}].push_back(
        std::max(l.utilisation[0], l.utilisation[1]));
    withBytes += l.bytes[0] + l.bytes[1] > 0 ? 1 : 0;
  }
  REQUIRE(withBytes > 1000);
  auto check = [&](const LinkStats& s, const std::vector<double>& u) {
    REQUIRE(s.links == static_cast<int>(u.size()));
    double sum = 0;
    for (double v : u) sum += v;
    REQUIRE(s.maxUtilisation == *std::max_element(u.begin(), u.end()));
    REQUIRE(s.meanUtilisation == Approx(sum / u.size()).epsilon(1e-12));
  };
  std::size_t aggregates = 0;
  for (const AggregateLine& l : a.lines)
    check(l.stats, direct.at({l.a, l.b, l.kind})), ++aggregates;
  for (int b = 0; b < static_cast<int>(a.boxes.size()); ++b)
    if (!a.boxes[b].links.empty())
      check(a.boxes[b].inner, direct.at({b, b, QString()})), ++aggregates;
  REQUIRE(aggregates == direct.size());
}

}  // namespace

TEST_CASE("the topology of 1,024 GPUs is aggregated into host boxes, switch boxes and lines",
          "[gui]") {
  SECTION("rail-optimised: 16 boxes of 8 hosts, the 8 rail leaves and the spine each alone") {
    const TopologyGraph& g = rail128();
    REQUIRE(needsAggregation(g));
    const AggregatedTopology a = aggregateTopology(g);
    REQUIRE(a.hosts == 128);
    REQUIRE(a.hostsPerBox == 8);
    REQUIRE(countLevel(a, 0) == 16);
    REQUIRE(countLevel(a, 1) == 8);  // leaf0..leaf7, each linked to every host box
    REQUIRE(countLevel(a, 2) == 1);  // the spine
    REQUIRE(a.lines.size() == 16 * 8 + 8);
    REQUIRE(a.boxes[0].label == "node0–7");
    REQUIRE(a.boxes[0].firstRank == 0);
    REQUIRE(a.boxes[0].lastRank == 63);
    checkPartition(g, a);
  }
  SECTION("fat tree: the 64 leaves grouped by the host box they serve, so one line per group") {
    const TopologyGraph& g = fatTree128();
    const AggregatedTopology a = aggregateTopology(g);
    REQUIRE(countLevel(a, 0) == 16);
    REQUIRE(countLevel(a, 1) == 16);  // 4 leaves of 2 hosts each per box of 8 hosts
    REQUIRE(countLevel(a, 2) == 1);
    REQUIRE(a.lines.size() == 16 + 16);  // host box ↔ its leaves, leaves ↔ spine
    checkPartition(g, a);
  }
  SECTION("one host per box while the hosts are few") {
    AggregateOptions o;
    o.maxHostBoxes = 128;
    const AggregatedTopology a = aggregateTopology(rail128(), o);
    REQUIRE(a.hostsPerBox == 1);
    REQUIRE(countLevel(a, 0) == 128);
    REQUIRE(a.boxes[5].label == "node5");
    REQUIRE(a.boxes[5].devices == 8);
    checkPartition(rail128(), a);
  }
}

TEST_CASE("a host of the cluster zoomed into is its nodes and links, as a small topology is drawn",
          "[gui]") {
  const TopologyGraph& g = rail128();
  const HostView v = hostSubgraph(g, 5);
  // 8 GPUs, NVSwitch, host bridge, 8 PCIe switches, 8 NICs, and the 8 rail leaves they link to.
  REQUIRE(v.graph.nodes.size() == 26 + 8);
  REQUIRE(v.graph.links.size() == 8 * 4 + 8);
  std::set<int> ranks;
  for (const GraphNode& n : v.graph.nodes)
    if (n.rank >= 0) ranks.insert(n.rank);
  REQUIRE(ranks == std::set<int>{40, 41, 42, 43, 44, 45, 46, 47});
  for (std::size_t i = 0; i < v.graph.links.size(); ++i) {
    const GraphLink& l = v.graph.links[i];
    const GraphLink& whole = g.links[v.linkIds[i]];
    REQUIRE(v.graph.nodes[l.a].name == g.nodes[whole.a].name);
    REQUIRE(v.graph.nodes[l.b].name == g.nodes[whole.b].name);
    REQUIRE(l.bytes[0] == whole.bytes[0]);
  }
  // A single DGX is drawn whole.
  REQUIRE_FALSE(needsAggregation(simulate(StudioConfig{})->topology));
}

TEST_CASE("the topology view draws a cluster aggregated, zooms into a host and back", "[gui]") {
  guiApp();
  auto s = std::make_shared<Snapshot>();
  s->topology = rail128();
  s->numRanks = 1024;
  TopologyView v;
  v.resize(1200, 700);
  v.show();
  v.setSnapshot(s);
  REQUIRE(v.aggregate() != nullptr);
  REQUIRE(v.shownGraph() == nullptr);
  auto* hosts = v.findChild<QComboBox*>("hosts");
  REQUIRE(hosts != nullptr);
  REQUIRE(hosts->count() == 1 + 128);
  const QImage whole = v.grab().toImage();
  v.selectLine(0);
  REQUIRE(v.selectedLine() == 0);
  v.zoomToHost(5);
  REQUIRE(v.shownGraph() != nullptr);
  REQUIRE(v.shownGraph()->nodes.size() == 34);
  REQUIRE(hosts->currentData().toInt() == 5);
  const QImage host = v.grab().toImage();
  REQUIRE(whole != host);
  v.zoomToHost(-1);
  REQUIRE(v.shownGraph() == nullptr);
}

TEST_CASE("the plan table shows a pruned entry as its lower bound", "[gui]") {
  sim::PlanResult r;
  sim::PlanEntry simulated, pruned;
  simulated.config.mesh = "dp=2,sp=4";
  simulated.iteration_s = 0.0125;
  simulated.compute_busy_s = 0.01;
  simulated.fits = true;
  pruned.config.mesh = "dp=8";
  pruned.simulated = false;
  pruned.iteration_s = pruned.lower_bound_s = 0.02;
  pruned.fits = true;
  r.entries = {simulated, pruned};
  PlanTableModel m;
  m.setResult(r);
  auto text = [&](int row, int col) { return m.data(m.index(row, col)).toString().toStdString(); };
  REQUIRE(text(0, PlanTableModel::Iteration) ==
          formatPs(12'500'000'000).toStdString());  // "12.5 ms"
  REQUIRE(text(1, PlanTableModel::Iteration) ==
          "≥ " + formatPs(20'000'000'000).toStdString() + " (pruned)");
  REQUIRE(text(1, PlanTableModel::Compute) == "–");
  REQUIRE(text(1, PlanTableModel::Mesh) == "dp=8");
  REQUIRE(m.data(m.index(1, 0), Qt::ToolTipRole).toString().startsWith("pruned"));
}

namespace {

/// ConvNeXt-atto on the 8 GPUs of a DGX: a few dozen candidates.
StudioConfig planConfig() {
  StudioConfig c;
  c.model = "convnext-atto";
  c.input = "3x256x1024";
  c.batch = 8;
  c.mesh = "dp=2,sp=4";
  c.topology = "dgx-a100";
  return c;
}

}  // namespace

TEST_CASE("the planner view reports progress, and Cancel stops the plan with its partial table",
          "[gui]") {
  guiApp();
  PlannerView v;
  v.setConfig(planConfig());
  int planned = 0;
  QObject::connect(&v, &PlannerView::planned, [&] { ++planned; });
  auto* cancel = v.findChild<QPushButton*>("cancel");
  auto* status = v.findChild<QLabel*>("status");
  REQUIRE(cancel != nullptr);
  REQUIRE(status != nullptr);

  v.runPlanner();
  REQUIRE(cancel->isEnabled());
  REQUIRE(waitFor([&] { return planned == 1; }));
  INFO(v.error().toStdString());
  REQUIRE(v.error().isEmpty());
  const sim::PlanResult& done = v.model()->result();
  REQUIRE_FALSE(done.cancelled);
  REQUIRE(v.progressReports() >= 1);  // at least the report at the end, queued to this thread
  REQUIRE(v.progress().total > 0);
  REQUIRE(v.progress().done == v.progress().total);
  REQUIRE(v.model()->rowCount() > 0);
  int pruned = 0;
  for (int row = 0; row < v.model()->rowCount(); ++row) {
    const bool simulated = done.entries[row].simulated;
    pruned += simulated ? 0 : 1;
    const QString t = v.model()->data(v.model()->index(row, PlanTableModel::Iteration)).toString();
    REQUIRE(t.endsWith("(pruned)") == !simulated);
  }
  REQUIRE(status->text().contains(QStringLiteral("%1 pruned").arg(pruned)));
  REQUIRE_FALSE(status->text().contains("cancelled"));
  const sim::PlanProgress whole = v.progress();
  REQUIRE(PlannerView::bestText(whole).startsWith("best "));

  v.runPlanner();
  cancel->click();  // before the planner can have decided every candidate
  REQUIRE_FALSE(cancel->isEnabled());
  REQUIRE(waitFor([&] { return planned == 2; }));
  REQUIRE(v.model()->result().cancelled);
  REQUIRE(v.progress().done < whole.total);
  REQUIRE(v.model()->rowCount() <= whole.total);
  REQUIRE(status->text().contains("cancelled"));
}

TEST_CASE("a snapshot of 128 GPUs is folded and loses no rank, link or figure", "[gui]") {
  StudioConfig c = clusterConfig("dgx-a100:16", 16);
  c.model = "convnext-atto";
  c.input = "3x128x512";
  TopologyCache cache;
  const auto s = simulate(c, &cache);
  INFO(s->error.toStdString());
  REQUIRE(s->ok());
  REQUIRE(s->numRanks == 128);
  REQUIRE(s->result.simulated_ranks < 128);  // folded: above kEveryRankMaxRanks
  // Timeline: a lane pair per simulated rank; every other rank counted on the one it mirrors.
  REQUIRE(static_cast<int>(s->timeline.lanes.size()) == 2 * s->result.simulated_ranks);
  int ranks = 0;
  for (const TimelineLane& l : s->timeline.lanes) ranks += l.comm ? 0 : 1 + l.mirrors;
  REQUIRE(ranks == 128);
  for (int r = 0; r < 128; ++r) REQUIRE(s->timeline.laneOf(r) >= 0);
  std::size_t complete = 0;
  for (const core::TraceEvent& e : s->result.trace) complete += e.ph == 'X' ? 1 : 0;
  REQUIRE(s->timeline.events.size() == complete);  // the trace holds the simulated ranks only
  // Shard map: descriptions only; one replica of 8 ranks built on demand.
  REQUIRE_FALSE(s->shards.complete());
  REQUIRE(s->shards.replicas == 16);
  REQUIRE(s->shards.layer(1, 15).shards.size() == 8);
  REQUIRE(s->memory.size() == 128);
  std::size_t grouped = 0;
  for (const MemoryBar& b : s->memoryGroups) grouped += 1 + b.alike.size();
  REQUIRE(grouped == 128);
  REQUIRE(s->memoryGroups.size() < 128);
  REQUIRE(s->topologyAggregate.has_value());
  // Topology: the cached base with this result's figures equals the graph built whole.
  const ResolvedConfig rc = resolveConfig(c);
  const TopologyGraph whole = buildTopologyGraph(rc.topology, s->result, s->numRanks);
  REQUIRE(whole.links.size() == s->topology.links.size());
  REQUIRE(whole.nodes.size() == s->topology.nodes.size());
  int used = 0;
  for (std::size_t i = 0; i < whole.links.size(); ++i) {
    const GraphLink& a = whole.links[i];
    const GraphLink& b = s->topology.links[i];
    REQUIRE((a.bytes[0] == b.bytes[0] && a.bytes[1] == b.bytes[1]));
    REQUIRE(a.utilisation[0] == b.utilisation[0]);
    REQUIRE(a.transfers.size() == b.transfers.size());
    REQUIRE(a.collectives.size() == b.collectives.size());
    used += a.bytes[0] + a.bytes[1] > 0 ? 1 : 0;
  }
  REQUIRE(used > 0);
  for (std::size_t i = 0; i < whole.nodes.size(); ++i)
    REQUIRE(whole.nodes[i].rank == s->topology.nodes[i].rank);
  // Built once per topology: again for the same one (resolved anew), not for another batch.
  c.batch = 32;
  REQUIRE(simulate(c, &cache)->ok());
  REQUIRE(cache.builds() == 1);
  c.topology = "dgx-a100:16:fat-tree";
  REQUIRE(simulate(c, &cache)->ok());
  REQUIRE(cache.builds() == 2);
}

// Not timed tests (hidden): `tessera_tests_gui "[.scale]" -s` prints how long the studio's own
// model code takes on an 8,192-GPU result and its whole re-simulation path at 8,192 GPUs.
TEST_CASE("the studio's model code on 8,192 GPUs", "[.scale]") {
  const StudioConfig c = clusterConfig("dgx-a100:1024", 1024);
  const auto t0 = std::chrono::steady_clock::now();
  const run::SimRun r = run::simulate(resolveConfig(c), /*every_rank=*/false, /*keep_trace=*/false);
  const auto t1 = std::chrono::steady_clock::now();
  const TopologyGraph g = buildTopologyGraph(r.setup.topology, r.result, r.setup.mesh.size());
  const auto t2 = std::chrono::steady_clock::now();
  const AggregatedTopology a = aggregateTopology(g);
  const HostView h = hostSubgraph(g, 1000);
  const auto t3 = std::chrono::steady_clock::now();
  const std::vector<MemoryBar> bars = buildMemoryBars(r.result, r.setup.catalog);
  const auto t4 = std::chrono::steady_clock::now();
  const ShardMap map = buildShardMap(r.setup.train, r.setup.mesh);
  const auto t5 = std::chrono::steady_clock::now();
  auto s = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  WARN("simulate (folded) " << s(t0, t1) << " s; buildTopologyGraph " << s(t1, t2) << " s ("
                            << g.links.size() << " links); aggregate + zoom " << s(t2, t3) << " s ("
                            << a.boxes.size() << " boxes, " << a.lines.size()
                            << " lines); memory bars " << s(t3, t4) << " s; shard map " << s(t4, t5)
                            << " s (" << map.layers.size() << " layers)");
  REQUIRE(bars.size() == 8192);
  REQUIRE(h.graph.nodes.size() == 34);
}

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void printTimings(const char* what, const Snapshot& s) {
  const SnapshotTimings& t = s.timings;
  WARN(what << ": " << s.wallS << " s in all = resolve " << t.resolveS << " + run::simulate "
            << t.simulateS << " (" << s.result.simulated_ranks << " of " << s.numRanks
            << " ranks simulated, " << s.result.trace.size() << " trace events) + studio "
            << t.studioS() << " (shard map " << t.shardMapS << " [" << s.shards.layers.size()
            << " layers, " << s.shards.replicas << " replicas of " << s.shards.ranksPerReplica
            << "], timeline " << t.timelineS << " [" << s.timeline.lanes.size() << " lanes, "
            << s.timeline.events.size() << " events], memory " << t.memoryS << ", topology "
            << t.topologyS << " [" << s.topology.links.size() << " links], aggregate "
            << t.aggregateS << ")");
}

/// The GUI thread's part: each data view given the snapshot and painted once.
template <typename View>
double showOnGuiThread(const std::shared_ptr<const Snapshot>& s) {
  const auto t0 = std::chrono::steady_clock::now();
  View v;
  v.resize(1200, 700);
  v.setSnapshot(s);
  const QImage image = v.grab().toImage();
  REQUIRE_FALSE(image.isNull());
  return secondsSince(t0);
}

}  // namespace

// The studio's whole path for one configuration change at 8,192 GPUs, from the configuration to
// every view's data, split into the run layer's simulation and the studio's own steps; then the
// same topology re-simulated (its graph's base from the cache), and the GUI thread's part.
TEST_CASE("the studio's re-simulation of 8,192 GPUs", "[.scale]") {
  guiApp();
  StudioConfig c = clusterConfig("dgx-a100:1024", 1024);
  TopologyCache cache;
  const auto first = simulate(c, &cache);
  INFO(first->error.toStdString());
  REQUIRE(first->ok());
  printTimings("first simulation (topology cache cold)", *first);
  c.batch = 2048;  // a configuration change on the same topology
  const auto again = simulate(c, &cache);
  REQUIRE(again->ok());
  REQUIRE(cache.builds() == 1);
  printTimings("re-simulation (batch 2048, same topology)", *again);
  const auto t0 = std::chrono::steady_clock::now();
  const ShardLayer shown = again->shards.layer(1, 1000);
  const double layerS = secondsSince(t0);
  REQUIRE(shown.shards.size() == 8);
  WARN("GUI thread: one shard-map layer of one replica "
       << layerS << " s; views given the "
       << "snapshot and painted: shard map " << showOnGuiThread<ShardMapView>(again)
       << " s, timeline " << showOnGuiThread<TimelineView>(again) << " s, memory "
       << showOnGuiThread<MemoryView>(again) << " s, topology "
       << showOnGuiThread<TopologyView>(again) << " s");
}

// For comparison, the studio's builders as they ran before issue 34 on the same folded result:
// every layer's halo plans for every rank up front, a lane pair per rank, the JSON with the
// snapshot. (Before, the studio also simulated every rank with the trace: at 8,192 GPUs that ran
// out of 23 GB after 160 s.)
TEST_CASE("the studio's old path at 8,192 GPUs, for comparison", "[.scale]") {
  const StudioConfig c = clusterConfig("dgx-a100:1024", 1024);
  const auto t0 = std::chrono::steady_clock::now();
  const run::SimRun r = run::simulate(resolveConfig(c), /*every_rank=*/false, /*keep_trace=*/true);
  const double simS = secondsSince(t0);
  auto at = std::chrono::steady_clock::now();
  const auto step = [&at] {
    const double d = secondsSince(at);
    at = std::chrono::steady_clock::now();
    return d;
  };
  const std::string json = r.to_json();
  const double jsonS = step();
  const ShardMap map = buildShardMap(r.setup.train, r.setup.mesh, /*fullMaxRanks=*/1 << 30);
  const double mapS = step();
  const TimelineData t = buildTimeline(r.result.trace, r.setup.mesh.size());
  const double timelineS = step();
  WARN("old builders on the folded result (run::simulate "
       << simS << " s): json " << jsonS << " s, shard map of every layer and rank " << mapS
       << " s, timeline with a lane pair per "
       << "rank " << timelineS << " s (" << t.lanes.size() << " lanes)");
  REQUIRE(map.complete());
}
