// The subcommands of the `tessera` command line; each file adds one to the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace tessera::tools {

/// A subcommand's work, run after parsing; returns the process exit code.
using Action = std::function<int()>;

/// Each adds its subcommand to `app` and stores what to run in `action` when it is chosen.
void add_halo_command(CLI::App& app, Action& action);
void add_verify_command(CLI::App& app, Action& action);
void add_backends_command(CLI::App& app, Action& action);
void add_train_command(CLI::App& app, Action& action);
/// `tessera sim`: a parent command (`--list`) with subcommands (`collective`).
void add_sim_command(CLI::App& app, Action& action);

/// Parses "W", "H" or "HW" (case-insensitive) into the tensor dimensions to shard.
std::vector<int> parse_shard_dims(const std::string& s);

}  // namespace tessera::tools
