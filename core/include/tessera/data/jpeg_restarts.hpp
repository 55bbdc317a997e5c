// Restart markers in JPEGs: what lets a rank decode only its rows of an image split along H.
//
// A baseline JPEG is one entropy-coded stream, so a rank whose shard starts at row r must
// Huffman-decode every row above r to find where its own rows begin. A JPEG with a restart marker
// at the start of every MCU row (or every few) can be entered at the marker above the shard
// instead: the image folders' decoder does so by itself, and per-rank decode time then falls as
// 1/sp. add_jpeg_restarts() puts such markers into a JPEG without re-encoding it (jpegtran's
// `-restart`): the DCT coefficients are copied, so every pixel stays the same.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::data {

/// What a JPEG's restart markers allow.
struct JpegRestarts {
  bool sequential = false;  ///< a single sequential Huffman scan (not progressive or multi-scan)
  int interval = 0;         ///< MCUs per restart segment (0: no restart markers)
  int mcus_per_row = 0;
  int mcu_rows = 0;
  /// A segment begins an MCU row every this many MCU rows (0: none below the first row does):
  /// a rank starts decoding at most this many rows above its shard.
  int row_step = 0;
};

/// Reads the header of the JPEG `path` (not its entropy-coded data). Throws InvalidArgument naming
/// the path when it cannot be read or is not a JPEG.
JpegRestarts jpeg_restarts(const std::string& path);

/// What add_jpeg_restarts() did.
struct RestartRewrite {
  std::int64_t bytes_in = 0, bytes_out = 0;
  bool was_progressive = false;  ///< the input was progressive (the output is sequential)
};

/// Writes the JPEG `in` to `out` as a sequential JPEG with a restart marker every `rows` MCU rows
/// (1..65535), losslessly: the DCT coefficients, quantisation tables and APPn/COM markers (EXIF,
/// ICC profiles) are copied, the Huffman tables optimised, and a progressive input becomes
/// sequential. `out` is written atomically, then decoded and compared with `in` pixel by pixel.
/// `in` may equal `out`. Throws InvalidArgument naming the file for an unreadable or corrupt
/// input, a failed write or a mismatch (which would be a bug).
RestartRewrite add_jpeg_restarts(const std::string& in, const std::string& out, int rows = 1);

}  // namespace tessera::data
