// Files that are never half-written: write to a temporary beside the target, flush, rename.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::core {

/// Writes `data` to `path` atomically: a temporary file in the same folder is written, flushed
/// to disk (fsync) and renamed over `path`, so readers see the old file or the new one, never a
/// mix. Throws InvalidArgument naming the path and the system's reason on failure (the
/// temporary is removed; an existing file at `path` is left untouched).
void write_file_atomic(const std::string& path, std::string_view data);

/// Reads a whole file; throws InvalidArgument naming the path when it cannot.
std::string read_file(const std::string& path);

/// FNV-1a 64-bit hash of `data` (checksums for files tessera writes and verifies on read).
std::uint64_t fnv1a64(std::string_view data, std::uint64_t seed = 0xcbf29ce484222325ull) noexcept;

}  // namespace tessera::core
