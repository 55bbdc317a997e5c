// The tsan preset can fail: a deliberate data race, run by ctest as tsan.selftest.race_is_reported,
// which passes only when ThreadSanitizer reports it (tests/CMakeLists.txt, docs/sanitizers.md).
#include <thread>

#include "support/catch.hpp"

// Hidden tag: never part of a normal run; the tsan executable alone is built with this file.
TEST_CASE("an unguarded counter written by two threads is reported", "[.tsan_selftest]") {
  int shared = 0;  // deliberately unguarded: both threads write it with nothing ordering them
  std::thread other([&] { ++shared; });
  ++shared;
  other.join();
  REQUIRE(shared >= 1);
}
