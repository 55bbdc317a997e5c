// bench_loader's parts: the command line, the figures it measures and the report that prints them
// (loader.cpp measures, loader_report.cpp prints, loader_images.cpp writes the JPEG folder).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.hpp"
#include "loader_images.hpp"

namespace tessera::bench {

struct LoaderArgs {
  std::string images;  ///< --images DIR: an existing classification folder; empty: write one
  int count = 16, height = 1024, width = 2048;  ///< images written, and the "full" output size
  int batch = 2, batches = 8, warmup = 2, repeats = 5;
  std::vector<int> workers = {1, 2};  ///< loader threads (tessera) = worker processes (torch)
  int prefetch_per_worker = 2;  ///< tessera prefetch = this x workers (torch's prefetch_factor)
  std::vector<int> sp = {1, 2, 4};
  /// --markers: the sp rows on the images as written (off), on a copy with a restart marker at
  /// every MCU row (on: run::add_restarts), or both
  std::vector<std::string> markers = {"off", "on"};
  std::vector<std::string> cases = {"full", "half"};
  std::string python = "/usr/bin/python3", peer_script;
  bool peer = true, json = false;
  bool keep_images = false;  ///< --keep-images: leave the written folder (to rerun with --images)
  std::uint64_t seed = 0;
};

/// Parses the command line; prints usage and exits 2 on a bad one (0 for --help).
LoaderArgs parse_loader_args(int argc, char** argv);

/// One loader configuration on both sides: images/s over repeats.
struct RateRow {
  std::string case_name;  ///< "full" (no resize) or "half" (2x downscale)
  int out_height = 0, out_width = 0;
  int workers = 0;  ///< 0: synchronous (prefetch 0; torch num_workers=0)
  int prefetch = 0;
  bool jpeg_downscale = false;
  Stats tessera;                       ///< images/s
  std::optional<Stats> torch;          ///< images/s; none without the peer
  std::vector<int> torch_batch_shape;  ///< the peer's batch (N,C,H,W), to check its transforms
};

/// One rank's synchronous load_into_at per batch with the image split along H over sp ranks.
struct SpRow {
  int sp = 1, rank = 0;
  bool markers = false;                     ///< the images with restart markers
  std::int64_t row_begin = 0, row_end = 0;  ///< the rank's image rows
  Stats ms;                                 ///< per batch, one figure per repeat
  double ratio_to_sp1 = 0, ideal = 1;       ///< ms / sp=1's ms, and 1/sp
  double pixels_decoded_share = 0;          ///< DataStats pixels_decoded / pixels_total
  double decode_ms_per_batch = 0;           ///< DataStats decode_s per batch loaded
};

struct LoaderResults {
  std::string cpu;
  int cores = 0;
  ImageSet images;
  bool images_written = false;
  std::vector<RateRow> rows;
  std::vector<SpRow> sp;
  /// The copy with restart markers (with markers on): its JPEGs' bytes before and after, seconds
  std::int64_t marked_bytes_in = 0, marked_bytes_out = 0;
  double marked_seconds = 0;
  nlohmann::json peer;  ///< the peer's versions, or {"error": why}
  bool peer_ok = false;
};

/// Table on stdout.
void print_table(const LoaderArgs& a, const LoaderResults& r);
/// One JSON object on stdout.
void print_json(const LoaderArgs& a, const LoaderResults& r);
/// The smallest tessera / torchvision ratio of the "full" rows (nullopt without the peer).
std::optional<double> full_min_ratio(const LoaderResults& r);

}  // namespace tessera::bench
