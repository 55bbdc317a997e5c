// Builders of the studio's plain data: every figure comes from core (layouts, halo plans) or from
// sim (SimResult, trace, topology routes); nothing here re-derives a shape, a halo or a time.
#include "studio_data.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <unordered_map>

#include "tessera/core/allocator.hpp"
#include "tessera/nn/layers.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/nn/precision.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::studio {

// ---- shard map ---------------------------------------------------------------------------------

std::int64_t ShardInfo::recvBytes() const {
  std::int64_t s = 0;
  for (const HaloRegion& h : recvs) s += h.bytes;
  return s;
}

std::int64_t ShardInfo::sendBytes() const {
  std::int64_t s = 0;
  for (const HaloRegion& h : sends) s += h.bytes;
  return s;
}

std::size_t ShardLayer::haloRegions() const {
  std::size_t n = 0;
  for (const ShardInfo& s : shards) n += s.recvs.size();
  return n;
}

ShardMap buildShardMap(const nn::TrainOptions& train, const core::DeviceMesh& mesh) {
  const core::Layout in =
      nn::input_layout(mesh, train.shard, train.batch, train.input, train.model.total_stride());
  std::unique_ptr<nn::Sequential> model = nn::build_model(train.model, train.checkpointing);
  nn::SetupContext ctx;
  ctx.rank = 0;
  ctx.allocator = std::make_shared<core::Allocator>("studio-meta", /*meta=*/true);
  ctx.seed = train.seed;
  ctx.dtype = train.dtype;
  model->setup(in, ctx);  // layouts are global: rank 0's setup gives every layer's
  std::vector<nn::Conv2d*> convs;
  std::function<void(nn::Module&)> walk = [&](nn::Module& m) {
    if (auto* c = dynamic_cast<nn::Conv2d*>(&m)) convs.push_back(c);
    std::vector<nn::Module*> kids;
    m.children(kids);
    for (nn::Module* k : kids) walk(*k);
  };
  walk(*model);
  // Halos travel in the activations' dtype: the 16-bit one in mixed precision.
  const std::int64_t esize = static_cast<std::int64_t>(
      core::dtype_size(nn::precision_dtype(train.precision, train.dtype)));
  std::vector<std::vector<int>> coords(mesh.size());  // once, not once per convolution
  for (int r = 0; r < mesh.size(); ++r) coords[r] = mesh.coords_of(r);
  ShardMap map;
  for (nn::Conv2d* c : convs) {
    ShardLayer layer;
    layer.name = QString::fromStdString(c->name());
    layer.conv = QString::fromStdString(c->spec().describe());
    layer.shape = c->input_layout().global_shape();
    layer.layout = QString::fromStdString(c->input_layout().to_string());
    for (int r = 0; r < mesh.size(); ++r) {
      const nn::HaloPlan p =
          nn::make_halo_plan(c->spec(), c->input_layout(), c->output_layout(), r, ctx.halo);
      ShardInfo s;
      s.rank = r;
      s.coords = coords[r];
      s.own = p.own;
      s.need = p.need;
      for (const nn::HaloPiece& h : p.recvs)
        s.recvs.push_back({h.peer, h.box, h.box.numel() * esize});
      for (const nn::HaloPiece& h : p.sends)
        s.sends.push_back({h.peer, h.box, h.box.numel() * esize});
      layer.shards.push_back(std::move(s));
    }
    map.layers.push_back(std::move(layer));
  }
  return map;
}

double PlaneGeometry::scale() const {
  return std::min(area.width() / static_cast<double>(std::max<std::int64_t>(width, 1)),
                  area.height() / static_cast<double>(std::max<std::int64_t>(height, 1)));
}

QRectF PlaneGeometry::rectOf(const nn::Box& b) const {
  const double s = scale();
  return QRectF(area.left() + b.r[3].begin * s, area.top() + b.r[2].begin * s, b.r[3].size() * s,
                b.r[2].size() * s);
}

std::pair<std::int64_t, std::int64_t> PlaneGeometry::elementAt(QPointF p) const {
  const double s = scale();
  const auto row = static_cast<std::int64_t>(std::floor((p.y() - area.top()) / s));
  const auto col = static_cast<std::int64_t>(std::floor((p.x() - area.left()) / s));
  if (row < 0 || col < 0 || row >= height || col >= width) return {-1, -1};
  return {row, col};
}

// ---- timeline ----------------------------------------------------------------------------------

TimelineData buildTimeline(const std::vector<core::TraceEvent>& trace, int numRanks) {
  TimelineData d;
  for (int r = 0; r < numRanks; ++r) {
    d.lanes.push_back({r, false, QStringLiteral("rank %1 compute").arg(r)});
    d.lanes.push_back({r, true, QStringLiteral("rank %1 comm").arg(r)});
  }
  std::map<std::string, int> sends;
  std::vector<std::pair<std::string, int>> recvs;
  // Names, categories, ops and layers repeat on every rank: one shared QString each (implicitly
  // shared copies) instead of a conversion and an allocation per event, millions at 1,000 GPUs.
  std::unordered_map<std::string, QString> interned;
  const auto intern = [&](const std::string& text) {
    auto it = interned.find(text);
    if (it == interned.end()) it = interned.emplace(text, QString::fromStdString(text)).first;
    return it->second;
  };
  for (const core::TraceEvent& e : trace) {
    if (e.ph != 'X' || e.pid < 0 || e.pid >= numRanks) continue;
    TimelineEvent t;
    t.lane = 2 * e.pid + (e.tid == core::kLaneCompute ? 0 : 1);
    t.startPs = std::llround(e.ts_us * 1e6);
    t.durPs = std::llround(e.dur_us * 1e6);
    t.name = intern(e.name);
    t.cat = intern(e.cat);
    t.op = intern(e.op);
    t.layer = intern(e.layer);
    t.bytes = e.bytes;
    t.flops = e.flops;
    t.peer = e.peer;
    t.critical = e.critical;
    const int idx = static_cast<int>(d.events.size());
    if (!e.flow_id.empty() && e.flow_out) sends[e.flow_id] = idx;
    if (!e.flow_id.empty() && e.flow_in) recvs.emplace_back(e.flow_id, idx);
    d.endPs = std::max(d.endPs, t.endPs());
    d.events.push_back(std::move(t));
  }
  for (const auto& [id, to] : recvs) {
    auto it = sends.find(id);
    if (it != sends.end()) d.arrows.push_back({it->second, to});
  }
  return d;
}

TimeAxis::TimeAxis(sim::Picos originPs, sim::Picos psPerPixel)
    : origin_(originPs), psPerPx_(std::max<sim::Picos>(1, psPerPixel)) {}

double TimeAxis::x(sim::Picos t) const {
  return static_cast<double>(t - origin_) / static_cast<double>(psPerPx_);
}

sim::Picos TimeAxis::timeAt(double px) const {
  return origin_ + std::llround(px * static_cast<double>(psPerPx_));
}

TimeAxis TimeAxis::fit(sim::Picos endPs, double pixels) {
  const double px = std::max(1.0, pixels);
  return TimeAxis(0, static_cast<sim::Picos>(
                         std::ceil(static_cast<double>(std::max<sim::Picos>(endPs, 1)) / px)));
}

void TimeAxis::zoom(double factor, double anchorX) {
  if (!(factor > 0)) return;
  const sim::Picos anchor = timeAt(anchorX);
  psPerPx_ = std::max<sim::Picos>(1, std::llround(static_cast<double>(psPerPx_) / factor));
  origin_ = anchor - std::llround(anchorX * static_cast<double>(psPerPx_));
}

void TimeAxis::pan(double dx) { origin_ += std::llround(dx * static_cast<double>(psPerPx_)); }

// ---- memory ------------------------------------------------------------------------------------

std::vector<MemoryBar> buildMemoryBars(const sim::SimResult& r, const sim::DeviceCatalog& catalog) {
  std::vector<MemoryBar> bars;
  for (const sim::DeviceResult& d : r.devices) {
    MemoryBar b;
    b.rank = d.rank;
    b.device = QString::fromStdString(d.device);
    for (int c = 0; c < core::kNumMemCategories; ++c)
      b.peakBytes[c] = static_cast<std::int64_t>(d.memory.peak[c]);
    b.peakTotalBytes = static_cast<std::int64_t>(d.memory.peak_total);
    b.capacityBytes = catalog.get(d.device).capacity_bytes;
    bars.push_back(b);
  }
  return bars;
}

QString memCategoryLabel(int c) {
  static const char* labels[] = {"parameters",  "gradients",    "optimizer state",
                                 "activations", "halo buffers", "workspace"};
  return c >= 0 && c < core::kNumMemCategories ? QString::fromLatin1(labels[c])
                                               : QStringLiteral("?");
}

// ---- topology ----------------------------------------------------------------------------------

namespace {

int rowOf(sim::NodeKind k) {
  switch (k) {
    case sim::NodeKind::Gpu:
    case sim::NodeKind::Cpu:
      return 4;
    case sim::NodeKind::NvSwitch:
      return 3;
    case sim::NodeKind::PcieSwitch:
    case sim::NodeKind::HostBridge:
      return 2;
    case sim::NodeKind::Nic:
      return 1;
    case sim::NodeKind::NetSwitch:
      return 0;
  }
  return 0;
}

}  // namespace

TopologyGraph buildTopologyGraph(const sim::Topology& topo, const sim::SimResult& r, int numRanks) {
  TopologyGraph g;
  g.name = QString::fromStdString(topo.name);
  g.description = QString::fromStdString(topo.describe());
  const std::vector<sim::Node>& nodes = topo.nodes();
  const std::vector<int> devices = topo.devices();
  std::vector<std::vector<int>> rows(5);
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) rows[rowOf(nodes[i].kind)].push_back(i);
  g.nodes.resize(nodes.size());
  for (int row = 0; row < 5; ++row) {
    auto& ids = rows[row];
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int a, int b) { return nodes[a].host < nodes[b].host; });
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const sim::Node& n = nodes[ids[k]];
      GraphNode& gn = g.nodes[ids[k]];
      gn.name = QString::fromStdString(n.name);
      gn.kind = QString::fromStdString(sim::node_kind_name(n.kind));
      gn.device = QString::fromStdString(n.device);
      gn.host = n.host;
      gn.pos = QPointF((k + 0.5) / static_cast<double>(ids.size()), 0.05 + 0.9 * row / 4.0);
    }
  }
  for (int rank = 0; rank < numRanks && rank < static_cast<int>(devices.size()); ++rank)
    g.nodes[devices[rank]].rank = rank;
  for (const sim::Link& l : topo.links()) {
    GraphLink gl;
    gl.a = l.a;
    gl.b = l.b;
    gl.kind = QString::fromStdString(l.kind);
    gl.bwBytesPerS = l.bw_bytes_per_s;
    g.links.push_back(gl);
  }
  // (from, to) → the first link joining them and the direction: one hash lookup per link use
  // and collective step instead of a scan of every link (O(links²) at thousands of GPUs).
  std::unordered_map<std::uint64_t, std::pair<int, int>> linkOf;
  const auto key = [](int from, int to) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(from)) << 32) |
           static_cast<std::uint32_t>(to);
  };
  for (int i = 0; i < static_cast<int>(g.links.size()); ++i) {
    linkOf.emplace(key(g.links[i].a, g.links[i].b), std::pair(i, 0));
    linkOf.emplace(key(g.links[i].b, g.links[i].a), std::pair(i, 1));
  }
  const auto find = [&](const std::string& from, const std::string& to) -> std::pair<int, int> {
    const auto it = linkOf.find(key(topo.find_node(from), topo.find_node(to)));
    return it == linkOf.end() ? std::pair(-1, -1) : it->second;
  };
  for (const sim::LinkUse& u : r.links) {
    const auto [link, dir] = find(u.from, u.to);
    if (link < 0) continue;
    g.links[link].utilisation[dir] = u.utilisation;
    g.links[link].bytes[dir] = u.bytes;
  }
  // Halo transfers: each send of the trace along the topology's own route between the two ranks.
  std::unordered_map<std::string, QString> layers;  // one shared QString per layer name
  for (const core::TraceEvent& e : r.trace) {
    if (e.ph != 'X' || e.cat != "halo" || !e.flow_out || e.peer < 0) continue;
    if (e.pid >= static_cast<int>(devices.size()) || e.peer >= static_cast<int>(devices.size()))
      continue;
    auto layer = layers.find(e.layer);
    if (layer == layers.end())
      layer = layers.emplace(e.layer, QString::fromStdString(e.layer)).first;
    for (int edge : topo.route(devices[e.pid], devices[e.peer])) {
      const sim::DirectedEdge de = topo.edge(edge);
      g.links[de.link].transfers.push_back(
          {e.pid, e.peer, layer->second, e.bytes, de.from == g.links[de.link].a});
    }
  }
  // Collectives: the bytes sim's collective model put on each direction, one entry per collective.
  std::unordered_map<int, int> entry;  // link → its entry for the current collective
  for (const sim::CollectiveUse& c : r.collectives) {
    entry.clear();
    for (const sim::CollectiveLinkBytes& lb : c.links) {
      const auto [link, dir] = find(lb.from, lb.to);
      if (link < 0) continue;
      GraphLink& gl = g.links[link];
      auto [it, added] = entry.emplace(link, static_cast<int>(gl.collectives.size()));
      if (added)
        gl.collectives.push_back({QString::fromStdString(c.name), QString::fromStdString(c.layer),
                                  QString::fromStdString(c.algorithm),
                                  static_cast<int>(c.ranks.size()), c.bytes});
      gl.collectives[it->second].bytes[dir] += lb.bytes;
    }
  }
  return g;
}

QString formatBytes(double bytes) {
  // Powers of 1000 (GB = 1e9 bytes), as the CLI's tables.
  static const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  double v = bytes;
  while (std::abs(v) >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return u == 0 ? QStringLiteral("%1 B").arg(std::llround(v))
                : QStringLiteral("%1 %2")
                      .arg(v, 0, 'f',
                           v < 10    ? 2
                           : v < 100 ? 1
                                     : 0)
                      .arg(units[u]);
}

QString formatPs(sim::Picos ps) { return QString::fromStdString(sim::format_duration(ps)); }

}  // namespace tessera::studio
