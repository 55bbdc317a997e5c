// Byte sizes as people write them, and the printed forms of sizes and durations.
#include "sim_test_util.hpp"
#include "tessera/sim/units.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;

TEST_CASE("byte sizes accept decimal and binary suffixes", "[sim]") {
  REQUIRE(parse_byte_size("4096") == 4096);
  REQUIRE(parse_byte_size("64MiB") == 64 << 20);
  REQUIRE(parse_byte_size("64mib") == 64 << 20);
  REQUIRE(parse_byte_size("1GiB") == std::int64_t{1} << 30);
  REQUIRE(parse_byte_size("8KiB") == 8192);
  REQUIRE(parse_byte_size("8K") == 8000);
  REQUIRE(parse_byte_size("1.5G") == 1'500'000'000);
  REQUIRE(parse_byte_size("2 MB") == 2'000'000);
  REQUIRE(parse_byte_size("10B") == 10);
  REQUIRE(lacks(error_of([] { parse_byte_size("64XB"); }), {"\"64XB\"", "unknown suffix", "MiB"}) == "");
  REQUIRE(lacks(error_of([] { parse_byte_size("lots"); }), {"does not start with a number"}) == "");
  REQUIRE(lacks(error_of([] { parse_byte_size("-1K"); }), {"negative"}) == "");
  REQUIRE(lacks(error_of([] { parse_byte_size("0.5"); }), {"whole number"}) == "");
}

TEST_CASE("sizes and durations print with their units", "[sim]") {
  REQUIRE(format_bytes(64 << 20) == "64 MiB");
  REQUIRE(format_bytes(1'500'000'000) == "1.5 GB");
  REQUIRE(format_bytes(100) == "100 B");
  REQUIRE(format_duration(850) == "850 ps");
  REQUIRE(format_duration(12'340'000) == "12.34 us");
  REQUIRE(format_duration(2'500'000'000'000) == "2.5 s");
}
