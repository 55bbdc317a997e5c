// Runs the ranks of a comm backend as separate processes (fork), rendezvousing through a TCP
// store served by the test process; carries each rank's outcome back and rethrows the root cause.
#pragma once

#include <chrono>
#include <string>

#include "comm/conformance.hpp"

namespace tessera::test {

/// The plugin library the tests were built against (`built`, an absolute path in the build tree)
/// or, where that file is not there (a copied bundle: tests/gpu/make_bundle.sh), the file of the
/// same name on tessera::plugin_search_path() (TESSERA_PLUGIN_PATH first); `built` unchanged when
/// neither exists, so loading it reports the path.
std::string built_plugin(const std::string& built);

/// Forks `size` processes; each joins the store, creates backend `name` from the plugin library
/// at `plugin_path`, runs `fn`, and reports. A rank that throws aborts the job (others are
/// released). Rethrows the first root-cause failure (CheckFailure, TimeoutError, InternalError,
/// InvalidArgument, or std::runtime_error), never a secondary "aborted" one when a root cause exists.
void run_in_processes(const std::string& plugin_path, int size, std::chrono::milliseconds timeout,
                      const conformance::RankFn& fn);

}  // namespace tessera::test
