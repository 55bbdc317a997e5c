// Trace events in the one schema runtime and simulator share (Chrome trace JSON, opened by
// Perfetto and drawn by the studio), a per-rank recorder and the JSON writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace tessera::core {

/// Lanes (Chrome "tid") of a rank's timeline.
enum TraceLane : int {
  kLaneCompute = 0,   ///< kernels, in program order
  kLaneComm = 1,      ///< collectives
  kLaneHaloBase = 16  ///< point-to-point: one lane per peer, kLaneHaloBase + peer
};

/// One event. ph 'X' = complete event (ts, dur), 'C' = counter (counters), flows are carried on
/// 'X' events through flow_id with flow_out (the send) / flow_in (the receive).
struct TraceEvent {
  char ph = 'X';
  std::string name;
  std::string cat;          ///< "compute", "comm", "halo", "wait", "memory", "phase"
  int pid = 0;              ///< rank
  int tid = kLaneCompute;   ///< lane
  double ts_us = 0;
  double dur_us = 0;
  // args
  std::string op;           ///< kernel or collective name ("conv2d_forward", "all_reduce")
  std::string layer;        ///< module path ("stages.1.blocks.0.dwconv")
  std::int64_t bytes = -1;  ///< bytes moved (comm) or touched (compute); -1 = not applicable
  double flops = -1;        ///< floating-point operations; -1 = not applicable
  int peer = -1;            ///< peer rank for point-to-point
  std::vector<int> coords;  ///< the rank's mesh coordinates
  std::string flow_id;      ///< "0x1a"; empty = no flow
  bool flow_out = false;
  bool flow_in = false;
  bool critical = false;    ///< on the simulated iteration's critical path (args "critical": true)
  int micro = -1;           ///< micro-batch the op belongs to (args "micro"); -1 = none (M = 1)
  std::vector<std::pair<std::string, double>> counters;  ///< for ph 'C'
};

/// Collects one run's events from every rank (thread-safe). Timestamps are microseconds since
/// the recorder's epoch, so all ranks share one clock.
class TraceRecorder {
 public:
  TraceRecorder();
  /// Microseconds since this recorder was created.
  double now_us() const;
  /// A steady-clock instant in the recorder's microseconds (now_us() for now).
  double us_at(std::chrono::steady_clock::time_point t) const;
  void add(TraceEvent e);
  std::vector<TraceEvent> events() const;
  /// Names a rank's process track ("rank 3 (1,1)").
  void set_process_name(int pid, std::string name);
  std::vector<std::pair<int, std::string>> process_names() const;

 private:
  std::chrono::steady_clock::time_point epoch_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
  std::vector<std::pair<int, std::string>> process_names_;
};

/// Writes {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}} with process and
/// thread name metadata. `other` holds string key/value pairs for otherData (e.g. model, mesh);
/// "tessera_version" and "build" (core/version.hpp) follow them unless `other` has them already.
void write_chrome_trace(std::ostream& os, const std::vector<TraceEvent>& events,
                        const std::vector<std::pair<int, std::string>>& process_names,
                        const std::vector<std::pair<std::string, std::string>>& other = {});

/// A Chrome trace read back: what write_chrome_trace was given.
struct ChromeTrace {
  std::vector<TraceEvent> events;                              ///< 'X' and 'C' events, file order
  std::vector<std::pair<int, std::string>> process_names;      ///< "process_name" metadata
  std::vector<std::pair<std::string, std::string>> other;      ///< otherData
  /// The otherData value of `key`, or "" when absent.
  std::string other_value(const std::string& key) const;
};

/// Parses the schema write_chrome_trace writes (the runtime's `tessera train --trace` and the
/// simulator's `tessera sim run --trace`), checking it on the way: a malformed document throws
/// InvalidArgument naming `origin`, the event index and the field ("trace.json: traceEvents[12]:
/// field 'dur' must be a non-negative number, got -3"). Timestamps keep the writer's precision
/// (1 ns). Metadata other than process and thread names, and phases other than X, C and M, are
/// refused: this reader is for tessera's own traces, not any Chrome trace.
ChromeTrace read_chrome_trace(const std::string& text, const std::string& origin = "trace");
/// read_chrome_trace on a file's contents (origin: the path); a missing file throws InvalidArgument.
ChromeTrace read_chrome_trace_file(const std::string& path);

/// The name of a lane: "compute", "comm", "halo <-> rank 3".
std::string trace_lane_name(int tid);

/// Escapes a string for a JSON string literal (without the quotes).
std::string json_escape(const std::string& s);

}  // namespace tessera::core
