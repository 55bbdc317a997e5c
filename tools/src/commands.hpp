// The subcommands of the `tessera` command line; each file adds one to the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "tessera/run/resolve.hpp"  // run::load_topology
#include "tessera/sim/topology.hpp"

namespace tessera::tools {

/// A subcommand's work, run after parsing; returns the process exit code.
using Action = std::function<int()>;

/// Each adds its subcommand to `app` and stores what to run in `action` when it is chosen.
void add_halo_command(CLI::App& app, Action& action);
void add_verify_command(CLI::App& app, Action& action);
void add_backends_command(CLI::App& app, Action& action);
void add_train_command(CLI::App& app, Action& action);
void add_export_command(CLI::App& app, Action& action);
/// `tessera images` (cmd_images.cpp): `info` and `add-restarts`.
void add_images_command(CLI::App& app, Action& action);
/// `tessera launch` (cmd_launch.cpp).
void add_launch_command(CLI::App& app, Action& action);
/// `tessera sim`: a parent command (`--list`) with subcommands (`collective`, `run`, `memory`).
void add_sim_command(CLI::App& app, Action& action);
/// `tessera sim run` (cmd_sim_run.cpp) and `tessera sim memory` (cmd_sim_memory.cpp), added to `sim`.
void add_sim_run_command(CLI::App& sim, Action& action);
void add_sim_memory_command(CLI::App& sim, Action& action);
/// `tessera sim compare` (cmd_sim_compare.cpp): a measured trace beside a simulated one.
void add_sim_compare_command(CLI::App& sim, Action& action);
/// `tessera calibrate` (cmd_calibrate.cpp).
void add_calibrate_command(CLI::App& app, Action& action);
/// `tessera plan` (cmd_plan.cpp).
void add_plan_command(CLI::App& app, Action& action);
/// `tessera studio` (cmd_studio.cpp): runs tessera-studio from the same folder.
void add_studio_command(CLI::App& app, Action& action);

}  // namespace tessera::tools
