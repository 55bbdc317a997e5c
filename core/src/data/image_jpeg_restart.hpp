// Internal to the JPEG decoder: decoding from a restart marker instead of from the top.
//
// A baseline JPEG is one entropy-coded stream: to reach row r a decoder must Huffman-decode every
// row above it (jpeg_skip_scanlines saves only their IDCT and colour conversion). A restart marker
// (RSTn, every DRI interval of MCUs) resets the decoder's state, so the bytes after a marker that
// begins an MCU row decode on their own. restart_substream() cuts such a run of rows out of the
// file as a JPEG of its own; decoding it gives the same coefficients, hence the same pixels, as
// the full decode gives those rows (image_jpeg.cpp keeps one MCU row of margin on either side for
// the chroma upsampler's context).
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

/// MCU rows [row0, row1) of the JPEG in `data` as a JPEG of their own: the file's markers up to the
/// scan with the frame's height cut to those rows, the entropy-coded segments from the one that
/// begins row0 up to the one that begins row1 (or the end of the scan when row1 >= mcu_rows) with
/// their RSTn renumbered from RST0, then EOI. row0 and row1 (unless it is >= mcu_rows) must be
/// multiples of layout.row_step. Returns an empty vector when the bytes do not hold the markers the
/// header promises (a damaged file: the caller decodes it from the top, which names the damage).
std::vector<std::uint8_t> restart_substream(const std::uint8_t* data, std::size_t size,
                                            const RestartLayout& layout, int image_height, int row0,
                                            int row1);

}  // namespace tessera::data::internal
