// `tessera studio`: runs the tessera-studio executable built next to this one (gui/, Qt 6), passing
// every argument on; the command line itself never links Qt.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "commands.hpp"

namespace tessera::tools {

namespace {

int run_studio(const std::vector<std::string>& args) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path studio = (ec ? std::filesystem::path(".") : self.parent_path()) / "tessera-studio";
  if (!std::filesystem::exists(studio)) {
    std::cerr << "tessera: error: tessera studio is not built (" << studio.string()
              << " is missing): install Qt 6 Widgets (tools/setup.sh installs qt6-base-dev) and reconfigure\n";
    return 1;
  }
  std::vector<char*> argv;
  std::string path = studio.string();
  argv.push_back(path.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(path.c_str(), argv.data());
  std::cerr << "tessera: error: cannot run " << path << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

void add_studio_command(CLI::App& app, Action& action) {
  CLI::App* c = app.add_subcommand(
      "studio", "The desktop app (Qt 6): shard map, timeline, memory, topology, planner; "
                "--screenshot DIR [--config FILE] renders every view to PNG headless");
  c->prefix_command();  // everything after `studio` goes to tessera-studio unparsed
  c->callback([&action, c] {
    const std::vector<std::string> rest = c->remaining();
    action = [rest] { return run_studio(rest); };
  });
}

}  // namespace tessera::tools
