// Cutting a run of MCU rows out of a JPEG at its restart markers (image_jpeg_restart.hpp). Only
// bytes are read here: markers are found by their 0xFF prefix (in entropy-coded data a 0xFF byte
// is followed by a stuffed 0x00, a fill 0xFF, or a marker code), nothing is Huffman-decoded.
#include "image_jpeg_restart.hpp"

#include <cstring>
#include <numeric>

namespace tessera::data::internal {

RestartLayout restart_layout(const jpeg_decompress_struct& c) {
  RestartLayout l;
  if (c.progressive_mode || c.arith_code || c.restart_interval == 0) return l;
  // One scan of every component (a multi-scan sequential file spreads its rows over several
  // streams); a single-component scan has one block per MCU, which is the image's MCU only when
  // that component is not subsampled against itself (sampling factors 1).
  if (c.comps_in_scan != c.num_components) return l;
  if (c.comps_in_scan == 1 && (c.max_h_samp_factor != 1 || c.max_v_samp_factor != 1)) return l;
  const int mcu_w = 8 * c.max_h_samp_factor;
  l.mcu_height = 8 * c.max_v_samp_factor;
  l.mcus_per_row = static_cast<int>((c.image_width + mcu_w - 1) / mcu_w);
  l.mcu_rows = static_cast<int>((c.image_height + l.mcu_height - 1) / l.mcu_height);
  l.interval = static_cast<int>(c.restart_interval);
  const int step = l.interval / std::gcd(l.interval, l.mcus_per_row);
  l.row_step = step < l.mcu_rows ? step : 0;
  return l;
}

namespace {

/// Offsets in the file of the frame header's height field and of the first entropy-coded byte;
/// zero when the markers before the scan are not what a sequential Huffman JPEG holds.
struct HeaderSpan {
  std::size_t height_at = 0;
  std::size_t scan_start = 0;
};

HeaderSpan header_span(const std::uint8_t* data, std::size_t size) {
  HeaderSpan span;
  if (size < 4 || data[0] != 0xff || data[1] != 0xd8) return {};
  std::size_t p = 2;
  while (true) {
    if (p >= size || data[p] != 0xff) return {};
    while (p < size && data[p] == 0xff) ++p;  // fill bytes before the marker code
    if (p + 3 > size) return {};
    const std::uint8_t code = data[p];
    // Markers without a length (SOI, EOI, RSTn, TEM) have no place before the scan.
    if (code == 0x01 || (code >= 0xd0 && code <= 0xd9)) return {};
    const std::size_t length = (std::size_t{data[p + 1]} << 8) | data[p + 2];
    if (length < 2 || p + 1 + length > size) return {};
    if (code == 0xc0 || code == 0xc1) {  // baseline or extended sequential, Huffman
      if (length < 8) return {};
      span.height_at = p + 4;  // code, length (2), precision (1), then the height
    } else if (code >= 0xc2 && code <= 0xcf && code != 0xc4 && code != 0xc8 && code != 0xcc) {
      return {};  // another kind of frame (progressive, lossless, arithmetic)
    }
    if (code == 0xda) {
      span.scan_start = p + 1 + length;
      break;
    }
    p += 1 + length;
  }
  if (span.height_at == 0) return {};
  return span;
}

/// The next marker at or after `q` in entropy-coded data (0xFF then a code other than a stuffed
/// 0x00 or a fill 0xFF): its offset, or `size` when there is none.
std::size_t next_marker(const std::uint8_t* data, std::size_t size, std::size_t q) {
  while (q < size) {
    const void* hit = std::memchr(data + q, 0xff, size - q);
    if (hit == nullptr) return size;
    q = static_cast<std::size_t>(static_cast<const std::uint8_t*>(hit) - data);
    if (q + 1 >= size) return size;
    const std::uint8_t code = data[q + 1];
    if (code == 0xff) {
      q += 1;
    } else if (code == 0x00) {
      q += 2;
    } else {
      return q;
    }
  }
  return size;
}

bool is_restart(std::uint8_t code) { return code >= 0xd0 && code <= 0xd7; }

std::int64_t segment_count(const RestartLayout& l) {
  const std::int64_t total = std::int64_t{l.mcus_per_row} * l.mcu_rows;
  return (total + l.interval - 1) / l.interval;
}

}  // namespace

RestartIndex index_restarts(const std::uint8_t* data, std::size_t size,
                            const RestartLayout& layout) {
  RestartIndex index;
  index.file_bytes = static_cast<std::int64_t>(size);
  if (layout.row_step <= 0) return index;
  const HeaderSpan span = header_span(data, size);
  if (span.scan_start == 0) return index;
  const std::int64_t segments = segment_count(layout);
  // Segment s begins MCU row s·interval / mcus_per_row; it begins a row every row_step rows.
  const std::int64_t segs_per_step =
      std::int64_t{layout.row_step} * layout.mcus_per_row / layout.interval;
  std::vector<std::size_t> row_begin = {span.scan_start};
  std::int64_t seg = 0;
  std::size_t q = span.scan_start;
  while (true) {
    q = next_marker(data, size, q);
    if (q >= size) return index;  // no EOI: truncated
    const std::uint8_t code = data[q + 1];
    if (!is_restart(code)) break;
    if (code != 0xd0 + seg % 8) return index;
    ++seg;
    if (seg % segs_per_step == 0) row_begin.push_back(q + 2);
    q += 2;
  }
  // The scan ends with EOI after exactly the segments the header asks for.
  if (data[q + 1] != 0xd9 || seg != segments - 1) return index;
  index.height_at = span.height_at;
  index.scan_start = span.scan_start;
  index.scan_end = q;
  index.row_begin = std::move(row_begin);
  return index;
}

RestartSpan restart_span(const RestartIndex& index, const RestartLayout& layout, int row0,
                         int row1) {
  RestartSpan span;
  span.begin = index.row_begin[static_cast<std::size_t>(row0 / layout.row_step)];
  span.end = row1 >= layout.mcu_rows
                 ? index.scan_end
                 : index.row_begin[static_cast<std::size_t>(row1 / layout.row_step)] - 2;
  return span;
}

std::vector<std::uint8_t> restart_substream(const std::uint8_t* header, const RestartIndex& index,
                                            const std::uint8_t* segments, std::size_t size,
                                            const RestartLayout& layout, int image_height, int row0,
                                            int row1) {
  const bool to_end = row1 >= layout.mcu_rows;
  const std::int64_t per_row = layout.mcus_per_row;
  const std::int64_t seg0 = row0 * per_row / layout.interval;
  const std::int64_t seg1 = to_end ? segment_count(layout) : row1 * per_row / layout.interval;
  std::vector<std::uint8_t> out;
  out.reserve(index.scan_start + size + 2);
  out.insert(out.end(), header, header + index.scan_start);
  const int height =
      to_end ? image_height - row0 * layout.mcu_height : (row1 - row0) * layout.mcu_height;
  out[index.height_at] = static_cast<std::uint8_t>(height >> 8);
  out[index.height_at + 1] = static_cast<std::uint8_t>(height & 0xff);
  const std::size_t base = out.size();
  out.insert(out.end(), segments, segments + size);
  // The segments' own RSTn, renumbered from RST0; nothing else may be among them.
  std::int64_t found = 0;
  for (std::size_t q = next_marker(segments, size, 0); q < size;
       q = next_marker(segments, size, q + 2)) {
    if (!is_restart(segments[q + 1])) return {};
    out[base + q + 1] = static_cast<std::uint8_t>(0xd0 + found % 8);
    ++found;
  }
  if (found != seg1 - seg0 - 1) return {};
  out.push_back(0xff);
  out.push_back(0xd9);
  return out;
}

}  // namespace tessera::data::internal
