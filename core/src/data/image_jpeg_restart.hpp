// Internal to the JPEG decoder: decoding from a restart marker instead of from the top.
//
// A baseline JPEG is one entropy-coded stream: to reach row r a decoder must Huffman-decode every
// row above it (jpeg_skip_scanlines saves only their IDCT and colour conversion). A restart marker
// (RSTn, every DRI interval of MCUs) resets the decoder's state, so the bytes after a marker that
// begins an MCU row decode on their own. restart_substream() cuts such a run of rows out of the
// file as a JPEG of its own; decoding it gives the same coefficients, hence the same pixels, as
// the full decode gives those rows (image_jpeg.cpp keeps one MCU row of margin on either side for
// the chroma upsampler's context). index_restarts() finds where the segments that begin rows lie,
// in one walk over the file's bytes (nothing is Huffman-decoded); kept in a RestartSlot, it lets
// later decodes read only the file's header and their own segments.
#pragma once

// jpeglib.h uses size_t and FILE without including their headers.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <jpeglib.h>

namespace tessera::data::internal {

/// The MCU grid of a JPEG's scan and where its restart segments begin rows.
struct RestartLayout {
  int mcu_rows = 0;      ///< MCU rows of the image
  int mcus_per_row = 0;  ///< MCUs in each row
  int mcu_height = 0;    ///< image rows per MCU row (8 × the largest vertical sampling factor)
  int interval = 0;      ///< MCUs per restart segment (the DRI marker's value)
  /// Segments begin an MCU row every `row_step` rows (interval / gcd(interval, mcus_per_row));
  /// 0 when there are no restart markers, the JPEG is not a single sequential Huffman scan of
  /// every component, or no segment but the first begins a row.
  int row_step = 0;
};

/// The layout of a JPEG whose header libjpeg has read (jpeg_read_header).
RestartLayout restart_layout(const jpeg_decompress_struct& c);

/// Where, in one JPEG file, the segments that begin MCU rows lie.
struct RestartIndex {
  std::int64_t file_bytes = 0;  ///< the size of the file it was made from
  std::size_t height_at = 0;    ///< offset of the frame header's height field
  std::size_t scan_start = 0;   ///< the first entropy-coded byte: the header is [0, scan_start)
  std::size_t scan_end = 0;     ///< the EOI marker after the last segment
  /// row_begin[k]: the first byte of the segment that begins MCU row k·row_step (just past its
  /// RSTn; row_begin[0] is scan_start). Empty: the file's markers are not where its header says
  /// (damaged), and it is decoded from the top.
  std::vector<std::size_t> row_begin;
};

/// Walks the whole file `data` once: the markers before the scan (a baseline or extended
/// sequential Huffman frame), every RSTn in sequence, EOI after the last segment.
RestartIndex index_restarts(const std::uint8_t* data, std::size_t size,
                            const RestartLayout& layout);

/// The bytes [begin, end) of the file holding the segments of MCU rows [row0, row1): from the
/// segment that begins row0 to the RSTn that begins row1 (or EOI when row1 >= mcu_rows). row0
/// and row1 (unless it is >= mcu_rows) must be multiples of layout.row_step.
struct RestartSpan {
  std::size_t begin = 0, end = 0;
};
RestartSpan restart_span(const RestartIndex& index, const RestartLayout& layout, int row0,
                         int row1);

/// MCU rows [row0, row1) as a JPEG of their own, from the file's header (`header`: its first
/// index.scan_start bytes) and the span's bytes (`segments`): the header with the frame's height
/// cut to those rows, the segments with their RSTn renumbered from RST0, then EOI. Empty when the
/// segments do not hold the markers the index promises (the file changed since it was indexed).
std::vector<std::uint8_t> restart_substream(const std::uint8_t* header, const RestartIndex& index,
                                            const std::uint8_t* segments, std::size_t size,
                                            const RestartLayout& layout, int image_height, int row0,
                                            int row1);

}  // namespace tessera::data::internal
