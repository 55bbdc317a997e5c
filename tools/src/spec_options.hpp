// The translation from CLI11 options to a run::RunSpec: one --option per field (--weight-decay for
// weight_decay, --timeout for timeout_s, the flags --no-overlap, --no-shuffle, --no-augment,
// --no-flip, --skip-bad-samples and --tf32), an optional
// --config FILE holding the description's JSON, explicit options over it.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "tessera/run/spec.hpp"

namespace tessera::tools {

class SpecOptions {
 public:
  /// `defaults`: the command's own defaults (RunSpec{} for train, for_simulation() for sim run).
  explicit SpecOptions(run::RunSpec defaults) : defaults_(std::move(defaults)) {}
  /// Adds an option for each field in `fields` to `cmd`, and --config when `with_config`.
  void add(CLI::App& cmd, const std::vector<std::string>& fields, bool with_config);
  /// The defaults, then --config's fields, then the options given on the command line (each
  /// parsed and checked by RunSpec::set, whose errors name the field).
  run::RunSpec spec() const;

 private:
  run::RunSpec defaults_;
  std::string config_;
  std::map<std::string, std::string> text_;  ///< field -> the option's text (stable addresses)
  std::map<std::string, bool> flags_;        ///< field -> its flag (--no-overlap, --tf32)
  std::vector<std::pair<std::string, CLI::Option*>> options_;
};

/// The fields a simulated run reads, in the order of their options: `tessera sim compare` takes
/// them all, `tessera sim run` adds "trace". One list, so the two commands cannot drift apart.
std::vector<std::string> simulation_fields();

}  // namespace tessera::tools
