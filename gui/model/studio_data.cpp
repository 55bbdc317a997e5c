// Builders of the studio's plain data: every figure comes from core (layouts, halo plans) or from
// sim (SimResult, trace, topology routes); nothing here re-derives a shape, a halo or a time.
#include "studio_data.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>

#include "tessera/sim/units.hpp"

namespace tessera::studio {

// ---- shard map ---------------------------------------------------------------------------------

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

namespace {

TimelineEvent timelineEvent(const core::TraceEvent& e, int lane,
                            const std::function<QString(const std::string&)>& intern) {
  TimelineEvent t;
  t.lane = lane + (e.tid == core::kLaneCompute ? 0 : 1);
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
  t.micro = e.micro;
  return t;
}

/// Two lanes per rank r with sameAs[r] == r, the others counted as their mirrors; the events of
/// the ranks with lanes.
TimelineData timelineOf(const std::vector<core::TraceEvent>& trace, std::vector<int> sameAs) {
  TimelineData d;
  const int numRanks = static_cast<int>(sameAs.size());
  std::vector<int> laneOfRank(numRanks, -1);
  for (int r = 0; r < numRanks; ++r) {
    if (sameAs[r] != r) continue;
    laneOfRank[r] = static_cast<int>(d.lanes.size());
    d.lanes.push_back({r, false, QStringLiteral("rank %1 compute").arg(r)});
    d.lanes.push_back({r, true, QStringLiteral("rank %1 comm").arg(r)});
  }
  for (int r = 0; r < numRanks; ++r) {
    const int s = sameAs[r];
    if (s == r || s < 0 || s >= numRanks || laneOfRank[s] < 0) continue;
    ++d.lanes[laneOfRank[s]].mirrors;
    ++d.lanes[laneOfRank[s] + 1].mirrors;
  }
  d.sameAs = std::move(sameAs);
  std::unordered_map<std::string, int> sends;
  std::vector<std::pair<std::string, int>> recvs;
  // Names, categories, ops and layers repeat on every rank: one shared QString each (implicitly
  // shared copies) instead of a conversion and an allocation per event.
  std::unordered_map<std::string, QString> interned;
  const std::function<QString(const std::string&)> intern = [&](const std::string& text) {
    auto it = interned.find(text);
    if (it == interned.end()) it = interned.emplace(text, QString::fromStdString(text)).first;
    return it->second;
  };
  for (const core::TraceEvent& e : trace) {
    if (e.ph != 'X' || e.pid < 0 || e.pid >= numRanks || laneOfRank[e.pid] < 0) continue;
    const int idx = static_cast<int>(d.events.size());
    if (!e.flow_id.empty() && e.flow_out) sends[e.flow_id] = idx;
    if (!e.flow_id.empty() && e.flow_in) recvs.emplace_back(e.flow_id, idx);
    d.events.push_back(timelineEvent(e, laneOfRank[e.pid], intern));
    d.endPs = std::max(d.endPs, d.events.back().endPs());
    d.microBatches = std::max(d.microBatches, e.micro + 1);
  }
  for (const auto& [id, to] : recvs) {
    auto it = sends.find(id);
    if (it != sends.end()) d.arrows.push_back({it->second, to});
  }
  return d;
}

}  // namespace

int TimelineData::laneOf(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(sameAs.size())) return -1;
  for (int i = 0; i < static_cast<int>(lanes.size()); i += 2)
    if (lanes[i].rank == sameAs[rank]) return i;
  return -1;
}

QString TimelineData::rankText(int rank) const {
  if (laneOf(rank) < 0) return {};
  return sameAs[rank] == rank
             ? QStringLiteral("rank %1").arg(rank)
             : QStringLiteral("rank %1: same as rank %2").arg(rank).arg(sameAs[rank]);
}

TimelineData buildTimeline(const std::vector<core::TraceEvent>& trace, int numRanks) {
  std::vector<int> sameAs(std::max(0, numRanks));
  for (int r = 0; r < numRanks; ++r) sameAs[r] = r;
  return timelineOf(trace, std::move(sameAs));
}

TimelineData buildTimeline(const std::vector<core::TraceEvent>& trace,
                           const std::vector<sim::DeviceResult>& devices) {
  std::vector<int> sameAs(devices.size());
  for (std::size_t r = 0; r < devices.size(); ++r) sameAs[r] = devices[r].simulated_as;
  return timelineOf(trace, std::move(sameAs));
}

void setLaneStages(TimelineData& d, const core::DeviceMesh& mesh) {
  const int pp = mesh.find_dim("pp");
  if (pp < 0 || mesh.dim_size(pp) < 2) return;
  d.stages = mesh.dim_size(pp);
  for (TimelineLane& l : d.lanes) {
    if (l.rank < 0 || l.rank >= mesh.size()) continue;
    l.stage = mesh.coord(l.rank, pp);
    l.label = QStringLiteral("r%1 · stage %2 %3")
                  .arg(l.rank)
                  .arg(l.stage)
                  .arg(l.comm ? QStringLiteral("comm") : QStringLiteral("compute"));
  }
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
  bars.reserve(r.devices.size());
  std::unordered_map<std::string, std::pair<QString, double>> devices;  // name → label, capacity
  for (const sim::DeviceResult& d : r.devices) {
    auto dev = devices.find(d.device);
    if (dev == devices.end())
      dev = devices
                .emplace(d.device, std::pair(QString::fromStdString(d.device),
                                             catalog.get(d.device).capacity_bytes))
                .first;
    MemoryBar b;
    b.rank = d.rank;
    b.device = dev->second.first;
    for (int c = 0; c < core::kNumMemCategories; ++c)
      b.peakBytes[c] = static_cast<std::int64_t>(d.memory.peak[c]);
    b.peakTotalBytes = static_cast<std::int64_t>(d.memory.peak_total);
    b.capacityBytes = dev->second.second;
    bars.push_back(b);
  }
  return bars;
}

std::vector<MemoryBar> groupMemoryBars(const std::vector<MemoryBar>& bars) {
  using Key =
      std::tuple<QString, std::array<std::int64_t, core::kNumMemCategories>, std::int64_t, double>;
  std::map<Key, int> groupOf;  // figures → index into `groups`
  std::vector<MemoryBar> groups;
  for (const MemoryBar& b : bars) {
    const auto [it, added] =
        groupOf.try_emplace(Key{b.device, b.peakBytes, b.peakTotalBytes, b.capacityBytes},
                            static_cast<int>(groups.size()));
    if (added)
      groups.push_back(b);
    else
      groups[it->second].alike.push_back(b.rank);
  }
  return groups;
}

QString memCategoryLabel(int c) {
  static const char* labels[] = {"parameters",  "gradients",    "optimizer state",
                                 "activations", "halo buffers", "workspace"};
  return c >= 0 && c < core::kNumMemCategories ? QString::fromLatin1(labels[c])
                                               : QStringLiteral("?");
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
