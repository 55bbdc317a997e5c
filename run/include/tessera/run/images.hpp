// Image folders outside training: what a folder holds, and restart markers added to its JPEGs so
// that ranks splitting an image along H each decode only their rows (docs/training.md, "A rank
// decodes only what its shard needs").
#pragma once

#include <cstdint>
#include <string>

namespace tessera::run {

/// What a folder (walked recursively) holds, as the image folders read it.
struct ImagesSummary {
  std::string folder;
  std::int64_t jpegs = 0;
  std::int64_t jpegs_from_top = 0;  ///< JPEGs decoded from the top (no restart marker begins a row)
  std::int64_t progressive = 0;     ///< of those, progressive ones
  int restart_rows_max = 0;         ///< the widest restart spacing among the others, in MCU rows
  std::int64_t pngs = 0;
  std::int64_t other_files = 0;  ///< files that are not .jpg, .jpeg or .png
  std::int64_t bytes = 0;        ///< of the JPEGs and PNGs
  std::string to_json() const;
};

/// Reads the header of every JPEG under `folder` (not its pixels). Throws InvalidArgument naming
/// the folder when it is not one, or a JPEG whose header cannot be read.
ImagesSummary summarize_images(const std::string& folder);

struct AddRestartsOptions {
  std::string source;  ///< a folder (walked recursively) or one JPEG
  std::string target;  ///< where the copy goes: the same relative paths (may equal source)
  int rows = 1;        ///< a restart marker every this many MCU rows
  int jobs = 0;        ///< files rewritten at once (0: the machine's cores)
};

struct AddRestartsResult {
  std::int64_t jpegs = 0;        ///< rewritten with restart markers
  std::int64_t progressive = 0;  ///< of them, progressive inputs (now sequential)
  std::int64_t copied = 0;       ///< other files copied unchanged (PNGs, masks, anything else)
  std::int64_t bytes_in = 0, bytes_out = 0;  ///< of the JPEGs
  double seconds = 0;
  std::string to_json() const;
};

/// Writes `source` to `target` with every JPEG (.jpg/.jpeg, any case) given restart markers
/// losslessly (data::add_jpeg_restarts: same pixels, checked per file) and every other file
/// copied as it is, so an image folder's layout, masks and labels come along. Each file is written
/// atomically; the first failure stops the work and throws InvalidArgument naming the file (the
/// files written before it are complete). Hidden files and folders (".name") are left out.
AddRestartsResult add_restarts(const AddRestartsOptions& options);

}  // namespace tessera::run
