// The studio's main window: Configuration panel beside the views (Shard map, Timeline, Memory,
// Topology, Planner, Compare, Teaching); every configuration change re-simulates in the background.
#pragma once

#include <QMainWindow>
#include <memory>

#include "simulation.hpp"

class QTabWidget;

namespace tessera::studio {

class ConfigPanel;
class ShardMapView;
class TimelineView;
class MemoryView;
class TopologyView;
class PlannerView;
class CompareView;
class TeachingView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  /// Shows `c` in the panel and, with `simulate`, re-simulates in the background.
  void setConfig(const StudioConfig& c, bool simulate = true);
  /// Shows a finished snapshot in every view (also used synchronously by --screenshot).
  void showSnapshot(std::shared_ptr<const Snapshot> s);
  const Snapshot* snapshot() const { return snap_.get(); }
  SimulationRunner& runner() { return runner_; }
  QTabWidget* tabs() { return tabs_; }
  PlannerView* planner() { return planner_; }
  ShardMapView* shardMap() { return shardMap_; }
  CompareView* compare() { return compare_; }
  TeachingView* teaching() { return teaching_; }
  ConfigPanel* panel() { return panel_; }
  /// File names of the views, in tab order ("shard_map", "timeline", ...).
  static QStringList viewNames();

  /// Session: {"tessera_studio_session": 1, "config": {...}, "view": tab, "layer": n}.
  QJsonObject sessionJson() const;
  /// Throws InvalidArgument for a malformed session.
  void applySession(const QJsonObject& o, const QString& origin);

 private:
  void onConfigChanged(const StudioConfig& c);
  void buildMenus();
  void openSession();
  void saveSession();
  void exportPng();
  void exportTrace();
  void exportConfig();
  void openMeasured();

  SimulationRunner runner_;
  std::shared_ptr<const Snapshot> snap_;
  ConfigPanel* panel_;
  QTabWidget* tabs_;
  ShardMapView* shardMap_;
  TimelineView* timeline_;
  MemoryView* memory_;
  TopologyView* topology_;
  PlannerView* planner_;
  CompareView* compare_;
  TeachingView* teaching_;
};

}  // namespace tessera::studio
