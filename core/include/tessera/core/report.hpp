// Libraries report, front ends print. Code below the front ends (core, backends, sim, run) never
// writes to stdout or stderr itself: what a person should read that is not an error (a notice such
// as "live metrics on http://...", a warning such as a store still holding connections) goes to
// report(), and the process's front end decides where it is shown (the CLI prints it to stderr,
// Python to sys.stderr, the studio to its log, a test binary to stderr). Errors are exceptions.
#pragma once

#include <functional>
#include <string_view>

namespace tessera::core {

enum class ReportLevel { Info, Warning };

/// Where reported messages go; called with one complete message (no trailing newline), from any
/// thread, one call at a time.
using ReportSink = std::function<void(ReportLevel level, std::string_view message)>;

/// Installs the process's sink and returns the previous one. Without a sink (the default in a
/// library), messages are dropped: a front end installs one at start (tests/lint_layering.sh
/// refuses prints below the front ends).
ReportSink set_report_sink(ReportSink sink);

/// Hands one message to the sink (thread-safe; a sink that throws is ignored).
void report(ReportLevel level, std::string_view message);

/// The level as a word ("info", "warning").
std::string_view report_level_name(ReportLevel level);

}  // namespace tessera::core
