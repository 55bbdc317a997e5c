// The studio's model library, headless: configuration JSON, the views' data for a known
// configuration (equal to the simulator's and core's figures), time↔pixel geometry, and the
// background runner where the latest request wins.
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <cmath>
#include <random>
#include <set>

#include "gui_app.hpp"
#include "simulation.hpp"
#include "support/catch.hpp"
#include "tessera/core/error.hpp"

using namespace tessera;
using namespace tessera::studio;

namespace {

/// ConvNeXt-T at 3×512×2048, batch 1, sp=4 along W on a DGX-A100 (the docs' configuration).
StudioConfig docsConfig() {
  StudioConfig c;
  c.model = "convnext-t";
  c.input = "3x512x2048";
  c.batch = 1;
  c.mesh = "sp=4";
  c.shard = "W";
  c.topology = "dgx-a100";
  return c;
}

}  // namespace

TEST_CASE("studio config round-trips through JSON and rejects bad input with a message", "[gui]") {
  StudioConfig c = docsConfig();
  c.batch = 3;
  c.overlap = false;
  c.dtype = "f64";
  c.microBatches = 3;
  c.schedule = "gpipe";
  c.stageStarts = "4,9";
  const QByteArray text = QJsonDocument(c.toJson()).toJson();
  REQUIRE(StudioConfig::fromJsonText(text) == c);
  const run::RunSpec spec = c.toSpec();  // what the studio simulates
  REQUIRE(spec.micro_batches == 3);
  REQUIRE(spec.schedule == "gpipe");
  REQUIRE(spec.stage_starts == "4,9");
  REQUIRE(StudioConfig::fromSpec(spec) == c);
  auto message = [](const QByteArray& t) {
    try {
      StudioConfig::fromJsonText(t, "test.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  REQUIRE(message("{\"model\": ") .find("test.json: not valid JSON") != std::string::npos);
  REQUIRE(message("[1, 2]").find("expected a JSON object") != std::string::npos);
  REQUIRE(message("{\"meshh\": \"sp=2\"}").find("unknown field \"meshh\"") != std::string::npos);
  REQUIRE(message("{\"batch\": 0}").find("field \"batch\" is 0: must be a positive integer") != std::string::npos);
  REQUIRE(message("{\"schedule\": \"zigzag\"}").find("expected one of: 1f1b, gpipe") !=
          std::string::npos);
  REQUIRE(message("{\"mesh\": 4}").find("\"mesh\" must be a string") != std::string::npos);
  // A dtype the trainer cannot train in: the field, the value and the dtypes that work.
  const std::string bf16 = message("{\"dtype\": \"bf16\"}");
  INFO(bf16);
  REQUIRE(bf16.find("test.json: field \"dtype\" is \"bf16\"") != std::string::npos);
  REQUIRE(bf16.find("use one of: " + trainableDtypes().join(", ").toStdString()) != std::string::npos);
  REQUIRE(trainableDtypes().contains("f32"));
  REQUIRE_FALSE(trainableDtypes().contains("bf16"));  // until core trains in it (nn::training_dtypes)
}

TEST_CASE("an impossible configuration gives a snapshot with the simulator's error", "[gui]") {
  StudioConfig c = docsConfig();
  c.mesh = "sp=128";  // more shards than the 2048 columns have blocks of the model's stride 32
  c.topology = "dgx-a100:16";
  auto s = simulate(c);
  REQUIRE_FALSE(s->ok());
  REQUIRE(s->error.contains("sp"));
  c = docsConfig();
  c.mesh = "sp=16";  // more ranks than the 8 GPUs of one DGX
  s = simulate(c);
  REQUIRE_FALSE(s->ok());
  REQUIRE(s->error.contains("has 8"));
  c = docsConfig();
  c.model = "convnext-zzz";
  REQUIRE(simulate(c)->error.contains("convnext-t"));  // the message lists the presets
}

TEST_CASE("the views' data for ConvNeXt-T on 4 GPUs equals core's and the simulator's figures", "[gui]") {
  const auto s = simulate(docsConfig());
  INFO(s->error.toStdString());
  REQUIRE(s->ok());
  REQUIRE(s->numRanks == 4);

  SECTION("shard map: every convolution, 4 shards each, halos only for the 7×7 depthwise ones") {
    // ConvNeXt-T: stem, 3 downsamplings, 18 blocks of (dw 7×7, 1×1, 1×1).
    REQUIRE(s->shards.layers.size() == 1 + 3 + 18 * 3);
    int withHalo = 0;
    for (const ShardLayer& l : s->shards.layers) {
      REQUIRE(l.shards.size() == 4);
      if (l.haloRegions() == 0) continue;
      ++withHalo;
      REQUIRE(l.name.endsWith("dwconv"));
      // Along W over 4 ranks: the two border ranks receive one piece, the two inner ones two.
      REQUIRE(l.haloRegions() == 6);
      for (const ShardInfo& sh : l.shards) {
        REQUIRE(sh.recvs.size() == (sh.rank == 0 || sh.rank == 3 ? 1u : 2u));
        for (const HaloRegion& h : sh.recvs) {
          // 7×7 with padding 3: 3 columns of every row and channel, fp32.
          REQUIRE(h.box.r[3].size() == 3);
          REQUIRE(h.bytes == 3 * l.shape[2] * l.shape[1] * 4);
        }
      }
    }
    REQUIRE(withHalo == 18);
    // The first dwconv reads 1×96×128×512: each rank owns 128 columns; a halo is 147456 bytes.
    const ShardLayer& dw = s->shards.layers[1];
    REQUIRE(dw.name == "stages.0.blocks.0.dwconv");
    REQUIRE(dw.shape == core::Shape{1, 96, 128, 512});
    REQUIRE(dw.shards[1].own.r[3].begin == 128);
    REQUIRE(dw.shards[1].own.r[3].end == 256);
    REQUIRE(dw.shards[1].recvs[0].bytes == 147456);
  }

  SECTION("timeline: two lanes per device, every complete event of the trace, one arrow per halo send") {
    const TimelineData& t = s->timeline;
    REQUIRE(t.lanes.size() == 8);
    std::size_t complete = 0, sends = 0;
    tessera::sim::Picos end = 0;
    for (const core::TraceEvent& e : s->result.trace) {
      if (e.ph != 'X') continue;
      ++complete;
      sends += e.flow_out ? 1 : 0;
      end = std::max<tessera::sim::Picos>(end, std::llround((e.ts_us + e.dur_us) * 1e6));
    }
    REQUIRE(complete > 1000);
    REQUIRE(t.events.size() == complete);
    REQUIRE(sends > 0);
    REQUIRE(t.arrows.size() == sends);
    for (const TimelineArrow& a : t.arrows) {
      REQUIRE(t.events[a.from].cat == "halo");
      REQUIRE(t.events[a.to].lane % 2 == 1);  // receives are on a comm lane
    }
    REQUIRE(std::llabs(t.endPs - end) <= 1);
    REQUIRE(t.endPs <= s->result.iteration_ps + 1);
  }

  SECTION("memory: one bar per device, totals equal to the simulator's") {
    REQUIRE(s->memory.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
      const MemoryBar& b = s->memory[i];
      const auto& m = s->result.devices[i].memory;
      REQUIRE(b.peakTotalBytes == static_cast<std::int64_t>(m.peak_total));
      for (int c = 0; c < core::kNumMemCategories; ++c) REQUIRE(b.peakBytes[c] == static_cast<std::int64_t>(m.peak[c]));
      REQUIRE(b.device == "a100-80gb");
      REQUIRE(b.capacityBytes == Approx(80.0 * (1LL << 30)));  // a100-80gb
      REQUIRE_FALSE(b.oom());
    }
  }

  SECTION("topology: every node and link of the preset, the simulator's link use, halo transfers routed") {
    const sim::Topology topo = sim::Topology::preset("dgx-a100");
    REQUIRE(s->topology.nodes.size() == topo.nodes().size());
    REQUIRE(s->topology.links.size() == topo.links().size());
    int ranked = 0;
    for (const GraphNode& n : s->topology.nodes) ranked += n.rank >= 0;
    REQUIRE(ranked == 4);
    double used = 0, shown = 0;
    for (const auto& l : s->result.links) used += l.bytes;
    std::size_t transfers = 0;
    for (const GraphLink& l : s->topology.links) {
      shown += l.bytes[0] + l.bytes[1];
      transfers += l.transfers.size();
    }
    REQUIRE(shown == Approx(used));
    REQUIRE(transfers > 0);
  }

  SECTION("topology: each link's bytes are its halo transfers plus the collectives listed on it") {
    REQUIRE_FALSE(s->result.collectives.empty());
    std::size_t listed = 0;
    for (const GraphLink& l : s->topology.links) {
      double sum[2] = {0, 0};
      for (const LinkTransfer& x : l.transfers) sum[x.forward ? 0 : 1] += static_cast<double>(x.bytes);
      for (const LinkCollective& c : l.collectives) {
        sum[0] += c.bytes[0];
        sum[1] += c.bytes[1];
        REQUIRE(c.ranks == 4);
        REQUIRE(c.name == "all_reduce");
        // A ring all-reduce sends 2(p−1) chunks of ⌈n/p⌉ each way over every GPU's NVSwitch link.
        if (c.algorithm == "ring" && l.kind == "nvlink")
          for (double b : c.bytes) REQUIRE(b == Approx(2.0 * 3 * std::ceil(c.size / 4.0)));
      }
      listed += l.collectives.size();
      REQUIRE(sum[0] == Approx(l.bytes[0]));
      REQUIRE(sum[1] == Approx(l.bytes[1]));
    }
    REQUIRE(listed > 0);
  }
}

TEST_CASE("the time axis maps times to pixels and back exactly", "[gui]") {
  std::mt19937_64 rng(7);
  for (sim::Picos psPerPx : {1LL, 3LL, 1000LL, 123457LL, 25'000'000LL}) {
    for (sim::Picos origin : {0LL, -5000LL, 987654321LL}) {
      const TimeAxis a(origin, psPerPx);
      std::uniform_int_distribution<sim::Picos> t(origin - 1'000'000'000'000LL, origin + 1'000'000'000'000LL);
      for (int i = 0; i < 2000; ++i) {
        const sim::Picos v = t(rng);
        REQUIRE(a.timeAt(a.x(v)) == v);
      }
      for (int px = -500; px <= 5000; px += 7) REQUIRE(a.x(a.timeAt(px)) == px);
    }
  }
  SECTION("fit shows the whole iteration; zoom keeps the time under the cursor; pan moves whole pixels") {
    TimeAxis a = TimeAxis::fit(24'160'000'000LL, 1000);
    REQUIRE(a.x(24'160'000'000LL) <= 1000);
    REQUIRE(a.x(24'160'000'000LL) > 999);
    const sim::Picos anchor = a.timeAt(400);
    a.zoom(8, 400);
    REQUIRE(std::llabs(a.timeAt(400) - anchor) < a.psPerPixel());
    const sim::Picos before = a.timeAt(0);
    a.pan(25);
    REQUIRE(a.timeAt(0) == before + 25 * a.psPerPixel());
    for (int i = 0; i < 80; ++i) a.zoom(4, 10);  // clamps at 1 ps per pixel
    REQUIRE(a.psPerPixel() == 1);
  }
}

TEST_CASE("shard geometry: boxes scale uniformly into the plane and points map back", "[gui]") {
  PlaneGeometry g;
  g.area = QRectF(10, 20, 1024, 400);
  g.height = 128;
  g.width = 512;
  REQUIRE(g.scale() == 2.0);
  nn::Box b;
  b.r = {core::Range{0, 1}, core::Range{0, 96}, core::Range{0, 128}, core::Range{128, 256}};
  REQUIRE(g.rectOf(b) == QRectF(10 + 256, 20, 256, 256));
  REQUIRE(g.elementAt(QPointF(10 + 257, 21)) == std::pair<std::int64_t, std::int64_t>{0, 128});
  REQUIRE(g.elementAt(QPointF(5, 21)).first == -1);
  REQUIRE(g.elementAt(QPointF(100, 20 + 256.5)).first == -1);  // below the plane
}

TEST_CASE("the background runner re-simulates and only the latest request is delivered", "[gui]") {
  guiApp();
  SimulationRunner runner;
  std::vector<std::shared_ptr<const Snapshot>> got;
  QObject::connect(&runner, &SimulationRunner::finished, [&](std::shared_ptr<const Snapshot> s) { got.push_back(s); });
  StudioConfig a = docsConfig(), b = docsConfig(), c = docsConfig();
  a.mesh = "sp=1";
  b.mesh = "sp=2";
  c.mesh = "sp_h=2,sp_w=2";
  runner.request(a);
  runner.request(b);
  const quint64 last = runner.request(c);
  QElapsedTimer timer;
  timer.start();
  while (got.empty() && timer.elapsed() < 60000) QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
  for (int i = 0; i < 20; ++i) QCoreApplication::processEvents(QEventLoop::AllEvents, 10);  // nothing else may come
  REQUIRE(got.size() == 1);
  REQUIRE(got[0]->generation == last);
  REQUIRE(got[0]->config == c);
  REQUIRE(got[0]->ok());
  REQUIRE(got[0]->numRanks == 4);
  REQUIRE(got[0]->wallS < 10);
}

namespace {

/// Everything of two shards that the views draw.
void requireSameShard(const ShardInfo& a, const ShardInfo& b) {
  REQUIRE(a.rank == b.rank);
  REQUIRE(a.coords == b.coords);
  REQUIRE(a.own == b.own);
  REQUIRE(a.need == b.need);
  REQUIRE(a.recvs.size() == b.recvs.size());
  REQUIRE(a.sends.size() == b.sends.size());
  for (std::size_t k = 0; k < a.recvs.size(); ++k) {
    REQUIRE(a.recvs[k].peer == b.recvs[k].peer);
    REQUIRE(a.recvs[k].box == b.recvs[k].box);
    REQUIRE(a.recvs[k].bytes == b.recvs[k].bytes);
  }
  for (std::size_t k = 0; k < a.sends.size(); ++k) {
    REQUIRE(a.sends[k].peer == b.sends[k].peer);
    REQUIRE(a.sends[k].bytes == b.sends[k].bytes);
  }
}

}  // namespace

TEST_CASE("a shard map built per replica equals the complete one and loses no rank", "[gui]") {
  const auto [mesh, replicas] = GENERATE(std::pair("dp=2,sp=4", 2), std::pair("sp=4,dp=2", 2),
                                         std::pair("sp=8", 1), std::pair("dp=8", 8));
  StudioConfig c = docsConfig();
  c.model = "convnext-atto";
  c.input = "3x256x1024";
  c.batch = 8;
  c.mesh = mesh;
  const ResolvedConfig rc = resolveConfig(c);
  const ShardMap full = buildShardMap(rc.train, rc.mesh);
  const ShardMap lazy = buildShardMap(rc.train, rc.mesh, /*fullMaxRanks=*/0);
  INFO(mesh);
  REQUIRE(full.complete());
  REQUIRE_FALSE(lazy.complete());
  REQUIRE(lazy.layers.size() == full.layers.size());
  REQUIRE(lazy.replicas == replicas);
  REQUIRE(lazy.replicas * lazy.ranksPerReplica == 8);
  for (std::size_t i = 0; i < full.layers.size(); ++i) {
    REQUIRE(lazy.layers[i].shards.empty());  // nothing built up front
    REQUIRE(lazy.layers[i].name == full.layers[i].name);
    std::vector<int> seen(8, 0);
    std::size_t halos = 0;
    for (int k = 0; k < lazy.replicas; ++k) {
      const ShardLayer l = lazy.layer(static_cast<int>(i), k);
      REQUIRE(static_cast<int>(l.shards.size()) == lazy.ranksPerReplica);
      for (const ShardInfo& s : l.shards) {
        ++seen[s.rank];
        requireSameShard(s, full.layers[i].shards[s.rank]);
        // One replica: one batch slice.
        REQUIRE(s.own.r[0] == l.shards[0].own.r[0]);
      }
      halos += l.haloRegions();
    }
    REQUIRE(seen == std::vector<int>(8, 1));  // every rank in exactly one replica
    REQUIRE(halos == full.layers[i].haloRegions());
  }
  REQUIRE(lazy.layer(0, lazy.replicas).shards.empty());  // past the last replica: none
}

TEST_CASE("a folded timeline has lanes for the simulated ranks and counts the others", "[gui]") {
  // Four ranks, ranks 2 and 3 the same as 0 and 1: their events are not in the trace.
  std::vector<sim::DeviceResult> devices(4);
  for (int r = 0; r < 4; ++r) devices[r].rank = r, devices[r].simulated_as = r % 2;
  std::vector<core::TraceEvent> trace;
  for (int r = 0; r < 2; ++r) {
    core::TraceEvent e;
    e.ph = 'X';
    e.pid = r;
    e.tid = core::kLaneCompute;
    e.name = "conv2d";
    e.ts_us = r;
    e.dur_us = 1;
    trace.push_back(e);
  }
  const TimelineData t = buildTimeline(trace, devices);
  REQUIRE(t.lanes.size() == 4);
  REQUIRE(t.lanes[2].rank == 1);
  REQUIRE(t.lanes[2].mirrors == 1);
  REQUIRE(t.events.size() == 2);
  REQUIRE(t.events[1].lane == 2);
  REQUIRE(t.laneOf(3) == 2);
  REQUIRE(t.rankText(3) == "rank 3: same as rank 1");
  REQUIRE(t.rankText(1) == "rank 1");
  REQUIRE(t.rankText(4).isEmpty());
  int ranks = 0;  // nothing lost: every rank is a lane's own or one of its mirrors
  for (const TimelineLane& l : t.lanes) ranks += l.comm ? 0 : 1 + l.mirrors;
  REQUIRE(ranks == 4);
  // Every rank simulated: the same lanes and events as one lane pair per rank.
  const auto s = simulate(docsConfig());
  REQUIRE(s->result.simulated_ranks == 4);
  const TimelineData all = buildTimeline(s->result.trace, s->numRanks);
  REQUIRE(s->timeline.lanes.size() == all.lanes.size());
  for (std::size_t i = 0; i < all.lanes.size(); ++i) {
    REQUIRE(s->timeline.lanes[i].label == all.lanes[i].label);
    REQUIRE(s->timeline.lanes[i].mirrors == 0);
  }
  REQUIRE(s->timeline.events.size() == all.events.size());
  REQUIRE(s->timeline.arrows.size() == all.arrows.size());
}

TEST_CASE("memory bars grouped by equal figures keep every rank and figure", "[gui]") {
  std::vector<MemoryBar> bars(10);
  for (int r = 0; r < 10; ++r) {
    bars[r].rank = r;
    bars[r].device = r < 8 ? "a100" : "h100";
    bars[r].peakBytes[0] = 100 * (r % 3);
    bars[r].peakTotalBytes = 100 * (r % 3);
    bars[r].capacityBytes = 1000;
  }
  const std::vector<MemoryBar> groups = groupMemoryBars(bars);
  // a100 with 0, 100, 200 bytes; h100 with 200 (rank 8) and 0 (rank 9).
  REQUIRE(groups.size() == 5);
  REQUIRE(groups[0].rank == 0);
  REQUIRE(groups[0].alike == std::vector<int>{3, 6});
  REQUIRE(groups[3].rank == 8);
  REQUIRE(groups[3].alike.empty());
  std::vector<int> seen(10, 0);
  for (const MemoryBar& g : groups) {
    ++seen[g.rank];
    for (int r : g.alike) {
      ++seen[r];
      REQUIRE(bars[r].device == g.device);
      REQUIRE(bars[r].peakBytes == g.peakBytes);
      REQUIRE(bars[r].peakTotalBytes == g.peakTotalBytes);
    }
  }
  REQUIRE(seen == std::vector<int>(10, 1));  // every rank in exactly one group
}

TEST_CASE("a pipelined run's timeline names each lane's stage and each kernel's micro-batch",
          "[gui]") {
  StudioConfig c = docsConfig();
  c.model = "convnext-atto";
  c.input = "3x64x256";
  c.batch = 4;
  c.microBatches = 2;
  c.mesh = "pp=2,sp=2";
  const auto s = simulate(c);
  INFO(s->error.toStdString());
  REQUIRE(s->ok());
  const TimelineData& t = s->timeline;
  const core::DeviceMesh mesh = core::DeviceMesh::parse("pp=2,sp=2");
  REQUIRE(t.stages == 2);
  REQUIRE(t.microBatches == 2);
  REQUIRE(t.lanes.size() == 8);
  for (const TimelineLane& l : t.lanes) {
    REQUIRE(l.stage == mesh.coord(l.rank, mesh.dim_index("pp")));
    REQUIRE(l.label == QStringLiteral("r%1 · stage %2 %3")
                           .arg(l.rank)
                           .arg(l.stage)
                           .arg(l.comm ? QStringLiteral("comm") : QStringLiteral("compute")));
  }
  // Every rank's kernels of both micro-batches, and arrows between the stages.
  std::vector<std::set<int>> micro(4);
  for (const TimelineEvent& e : t.events)
    if (e.cat == QLatin1String("compute") && e.micro >= 0)
      micro[t.lanes[e.lane].rank].insert(e.micro);
  for (int r = 0; r < 4; ++r) REQUIRE(micro[r] == std::set<int>{0, 1});
  int stageArrows = 0;
  for (const TimelineArrow& a : t.arrows) {
    if (!t.events[a.from].pipeline()) continue;
    ++stageArrows;
    REQUIRE(t.lanes[t.events[a.from].lane].stage != t.lanes[t.events[a.to].lane].stage);
  }
  // Per rank pair across the cut: 2 activations forward and 2 gradients back.
  REQUIRE(stageArrows == 2 * 2 * 2);
  // Without pipeline stages or micro-batches nothing changes.
  const auto plain = simulate(docsConfig());
  REQUIRE(plain->timeline.stages == 0);
  REQUIRE(plain->timeline.microBatches == 0);
  REQUIRE(plain->timeline.lanes[0].label == "rank 0 compute");
  REQUIRE(plain->shards.stages.empty());
  REQUIRE(plain->shards.stageOf(0) == -1);
}

TEST_CASE("a pipelined run's shard map says which stage each rank holds and its units", "[gui]") {
  StudioConfig c = docsConfig();
  c.model = "convnext-atto";
  c.input = "3x64x256";
  c.batch = 4;
  c.microBatches = 2;
  c.mesh = "pp=2,sp=2";
  const auto s = simulate(c);
  INFO(s->error.toStdString());
  REQUIRE(s->ok());
  const ShardMap& m = s->shards;
  REQUIRE(m.stages.size() == 2);
  // The stages tile the trainer's units in order.
  REQUIRE(m.stages[0].first == 0);
  REQUIRE(m.stages[0].end == m.stages[1].first);
  REQUIRE(m.stages[1].end > m.stages[1].first);
  for (const ShardStage& st : m.stages) REQUIRE(st.units.size() == st.end - st.first);
  const core::DeviceMesh mesh = core::DeviceMesh::parse("pp=2,sp=2");
  for (int r = 0; r < 4; ++r) REQUIRE(m.stageOf(r) == mesh.coord(r, mesh.dim_index("pp")));
  const QString prefix = QStringLiteral("stage 1 of 2: units %1–").arg(m.stages[1].first);
  REQUIRE(m.stageText(1).startsWith(prefix));
  REQUIRE(m.stageText(2).isEmpty());
  // Each convolution is run by one stage, stage 0's first; the stem on stage 0, the last on 1.
  REQUIRE(m.layers.front().stage == 0);
  REQUIRE(m.layers.back().stage == 1);
  for (std::size_t i = 1; i < m.layers.size(); ++i)
    REQUIRE(m.layers[i].stage >= m.layers[i - 1].stage);
  // One micro-batch's activations: batch 4 in 2 micro-batches.
  REQUIRE(m.layers.front().shape[0] == 2);
}
