// The project version and what this build was configured with: the one source of what
// `tessera --version`, tessera.__version__, every trace's metadata and every bench header show.
#pragma once

#include <string>
#include <string_view>

namespace tessera::core {

/// The project version, "0.1.0": CMake's project(VERSION), which pyproject.toml reads too.
std::string_view version();

/// The optional parts this build has, as found when it was configured, space-separated in a fixed
/// order: "ucx nccl cuda qt python" ("cuda": the cuda compute backend); "" when none.
std::string_view build_parts();

/// The short git commit the build tree was configured at; "" when unknown (no git, an sdist).
/// Not refreshed by later commits until the next configure.
std::string_view build_commit();

/// build_parts() and build_commit() in one phrase, for trace metadata and bench headers:
/// "ucx cuda python, configured at commit 98fefa8e1f2c"; "no optional parts" when none.
std::string build_description();

/// "tessera 0.1.0 (ucx cuda python, configured at commit 98fefa8e1f2c)": one line.
std::string version_line();

}  // namespace tessera::core
