// Byte sizes and durations as people write them ("64MiB", "1.5G") and as the simulator prints them.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/sim/topology.hpp"

namespace tessera::sim {

/// Parses a byte count: a non-negative number with an optional suffix, case-insensitive:
/// B; K, KB, M, MB, G, GB, T, TB (powers of 1000); KiB, MiB, GiB, TiB (powers of 1024).
/// "64MiB" = 67108864, "1.5G" = 1500000000. A fractional result is refused. Throws
/// InvalidArgument naming the text and the accepted forms.
std::int64_t parse_byte_size(const std::string& text);
/// "64 MiB", "1.5 GB", "512 B": binary units for exact powers of 1024, else decimal, 4 digits.
std::string format_bytes(std::int64_t bytes);
/// "12.34 us", "1.234 ms", "2.5 s", "850 ps": 4 significant digits.
std::string format_duration(Picos t_ps);

}  // namespace tessera::sim
