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

#include <functional>
#include <string>

namespace tessera::test {

/// Registers a test case at run time (before Catch2's session starts: call it from a static
/// initializer of a test executable), for suites whose cases come from a list such as the compute
/// backends of a registry. `file` must outlive the program (pass __FILE__). Catch2 v2's AutoReg
/// takes ownership of the invoker; with v3 it takes a Catch::Detail::unique_ptr instead.
inline void register_test_case(std::string name, std::string tags, std::function<void()> body,
                               const char* file, std::size_t line) {
  struct Invoker : Catch::ITestInvoker {
    explicit Invoker(std::function<void()> f) : fn(std::move(f)) {}
    void invoke() const override { fn(); }
    std::function<void()> fn;
  };
  Catch::AutoReg reg(new Invoker(std::move(body)), Catch::SourceLineInfo(file, line), Catch::StringRef(),
                     Catch::NameAndTags{Catch::StringRef(name), Catch::StringRef(tags)});
}

}  // namespace tessera::test
