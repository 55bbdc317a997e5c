// The version the build reports is the top-level CMakeLists.txt's project(VERSION) (the one
// pyproject.toml reads too), its optional parts come in their fixed order, and every trace
// written carries both in its metadata without displacing a trace's own.
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "support/catch.hpp"
#include "tessera/core/trace.hpp"
#include "tessera/core/version.hpp"

using namespace tessera;

namespace {

/// The version in the source tree's project() line, read as pyproject.toml's regex reads it.
std::string project_version() {
  std::ifstream in(std::string(TESSERA_TEST_DATA_DIR) + "/../../CMakeLists.txt");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  REQUIRE(
      std::regex_search(s, m, std::regex(R"(project\(tessera VERSION ([0-9]+\.[0-9]+\.[0-9]+))")));
  return m[1];
}

}  // namespace

TEST_CASE("version: the build reports the project version of CMakeLists.txt", "[core][version]") {
  REQUIRE(std::string(core::version()) == project_version());
  REQUIRE(core::version_line().rfind("tessera " + project_version() + " (", 0) == 0);
  REQUIRE(core::version_line().find(core::build_description()) != std::string::npos);
}

TEST_CASE("version: the optional parts are known names in their fixed order", "[core][version]") {
  const std::string order[] = {"ucx", "nccl", "cuda", "qt", "python"};
  std::istringstream parts{std::string(core::build_parts())};
  std::string part;
  std::size_t next = 0;
  while (parts >> part) {
    INFO(part << " in '" << core::build_parts() << "'");
    while (next < std::size(order) && order[next] != part) ++next;
    REQUIRE(next < std::size(order));  // a known part, after the ones before it
    ++next;
  }
  const std::string d = core::build_description();
  REQUIRE(
      d.rfind(core::build_parts().empty() ? "no optional parts" : std::string(core::build_parts()),
              0) == 0);
  if (!core::build_commit().empty())
    REQUIRE(d.find("commit " + std::string(core::build_commit())) != std::string::npos);
}

TEST_CASE("version: every trace carries the version and the build, and a trace keeps its own",
          "[core][version][trace]") {
  std::ostringstream os;
  core::write_chrome_trace(os, {}, {}, {{"model", "convnext-atto"}});
  const core::ChromeTrace t = core::read_chrome_trace(os.str(), "written");
  REQUIRE(t.other_value("model") == "convnext-atto");
  REQUIRE(t.other_value("tessera_version") == std::string(core::version()));
  REQUIRE(t.other_value("build") == core::build_description());
  REQUIRE(t.other.size() == 3);
  // Written again (the fuzz round trip, a trace converted by a tool): one key each, the original's.
  core::ChromeTrace old = t;
  old.other[1].second = "0.0.1";
  std::ostringstream again;
  core::write_chrome_trace(again, old.events, old.process_names, old.other);
  const core::ChromeTrace back = core::read_chrome_trace(again.str(), "rewritten");
  REQUIRE(back.other.size() == 3);
  REQUIRE(back.other_value("tessera_version") == "0.0.1");
}
