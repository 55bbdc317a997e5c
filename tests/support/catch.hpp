// The one Catch2 include of the test suites (Debian ships v2.13; a move to v3 changes this file).
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <sstream>

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

/// Ends the running test case as skipped, with the reason: prints one line that ctest recognises
/// (every test registered by tessera_discover_tests has SKIP_REGULAR_EXPRESSION
/// "TESSERA_TEST_SKIPPED"), so the summary counts the test as skipped, not passed. Use it only at
/// the top level of a TEST_CASE, before or instead of any failing check: ctest's skip expression
/// wins over a failure, so nothing may fail in a test that prints it. (Catch2 v2 has no SKIP();
/// with v3 this becomes SKIP(reason).)
#define TESSERA_SKIP(reason)                                                   \
  do {                                                                         \
    std::ostringstream tessera_skip_os_;                                       \
    tessera_skip_os_ << reason;                                                \
    std::printf("TESSERA_TEST_SKIPPED: %s\n", tessera_skip_os_.str().c_str()); \
    std::fflush(stdout);                                                       \
    return;                                                                    \
  } while (0)
