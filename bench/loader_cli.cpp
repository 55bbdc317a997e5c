// bench_loader's command line and its two outputs, the table and the JSON object
// (loader_bench.hpp); the measurements are in loader.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "loader_bench.hpp"

namespace tessera::bench {
namespace {

constexpr const char* kUsage =
    "usage: bench_loader [--images DIR | --count 16 --height 1024 --width 2048 [--keep-images]]\n"
    "                    [--batch 2] [--batches 8] [--warmup 2] [--repeats 5] [--workers 1,2]\n"
    "                    [--prefetch-per-worker 2] [--sp 1,2,4] [--markers off,on]\n"
    "                    [--cases full,half] [--seed 0]\n"
    "                    [--python /usr/bin/python3] [--peer-script PATH] [--no-peer] [--json]\n";

[[noreturn]] void usage_exit(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "bench_loader: %s\n", why.c_str());
  std::fputs(kUsage, stderr);
  std::exit(why.empty() ? 0 : 2);
}

int positive(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < 1 || n > 1'000'000)
    usage_exit(flag + " wants a positive integer, not '" + v + "'");
  return int(n);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  for (std::size_t k = 0; k <= s.size(); ++k)
    if (k == s.size() || s[k] == ',')
      out.push_back(item), item.clear();
    else
      item += s[k];
  return out;
}

std::vector<int> positives(const std::string& flag, const std::string& v) {
  std::vector<int> out;
  for (const std::string& s : split(v)) out.push_back(positive(flag, s));
  return out;
}

std::string stats_text(const Stats& s) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f [%.2f-%.2f]", s.median, s.min, s.max);
  return buf;
}

std::string loader_name(const RateRow& r) {
  std::string s = r.workers == 0 ? "sync" : "prefetch " + std::to_string(r.prefetch);
  return r.case_name == "half" ? s + (r.jpeg_downscale ? ", dct" : ", no dct") : s;
}

/// Per sp (and marker setting), the rank whose load is slowest: the one every step waits for.
std::vector<SpRow> slowest_ranks(const std::vector<SpRow>& rows) {
  std::vector<SpRow> out;
  for (const SpRow& r : rows)
    if (out.empty() || out.back().sp != r.sp || out.back().markers != r.markers)
      out.push_back(r);
    else if (r.ms.median > out.back().ms.median)
      out.back() = r;
  return out;
}

}  // namespace

LoaderArgs parse_loader_args(int argc, char** argv) {
  LoaderArgs a;
  a.peer_script = TESSERA_BENCH_LOADER_PEER;
  if (const char* p = std::getenv("TESSERA_PYTHON"); p && *p) a.python = p;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_exit(f + " needs a value");
      return argv[++i];
    };
    if (f == "--images")
      a.images = value();
    else if (f == "--count")
      a.count = positive(f, value());
    else if (f == "--height")
      a.height = positive(f, value());
    else if (f == "--width")
      a.width = positive(f, value());
    else if (f == "--batch")
      a.batch = positive(f, value());
    else if (f == "--batches")
      a.batches = positive(f, value());
    else if (f == "--warmup")
      a.warmup = positive(f, value());
    else if (f == "--repeats")
      a.repeats = positive(f, value());
    else if (f == "--workers")
      a.workers = positives(f, value());
    else if (f == "--prefetch-per-worker")
      a.prefetch_per_worker = positive(f, value());
    else if (f == "--sp")
      a.sp = positives(f, value());
    else if (f == "--seed")
      a.seed = std::uint64_t(positive(f, value()));
    else if (f == "--python")
      a.python = value();
    else if (f == "--peer-script")
      a.peer_script = value();
    else if (f == "--no-peer")
      a.peer = false;
    else if (f == "--keep-images")
      a.keep_images = true;
    else if (f == "--json")
      a.json = true;
    else if (f == "--markers") {
      a.markers = split(value());
      for (const std::string& m : a.markers)
        if (m != "off" && m != "on")
          usage_exit("--markers: unknown setting '" + m + "'; use off, on or off,on");
    } else if (f == "--cases") {
      a.cases = split(value());
      for (const std::string& c : a.cases)
        if (c != "full" && c != "half")
          usage_exit("--cases: unknown case '" + c + "'; use full, half or both");
    } else if (f == "--help" || f == "-h")
      usage_exit("");
    else
      usage_exit("unknown option '" + f + "'");
  }
  if (a.height % 2 || a.width % 2)
    usage_exit("--height and --width must be even (the half case halves them)");
  return a;
}

std::optional<double> full_min_ratio(const LoaderResults& r) {
  std::optional<double> m;
  for (const RateRow& row : r.rows)
    if (row.case_name == "full" && row.torch && row.torch->median > 0)
      m = std::min(m.value_or(1e300), row.tessera.median / row.torch->median);
  return m;
}

void print_table(const LoaderArgs& a, const LoaderResults& r) {
  std::printf("bench_loader: %s, %d cores; %d JPEGs %dx%d (q90, 4:2:0)%s in %s\n", r.cpu.c_str(),
              r.cores, a.count, a.height, a.width, r.images_written ? ", written" : "",
              r.images.folder.c_str());
  std::printf(
      "batch %d; per repeat %d warm-up then %d timed batches; %d repeats: median [min-max]\n",
      a.batch, a.warmup, a.batches, a.repeats);
  std::printf(
      "workers: tessera loader threads = torch DataLoader worker processes (1 torch thread "
      "each); sync = prefetch 0 / num_workers=0\n\n");
  std::printf("%-5s %-12s %-20s %7s  %-28s %-28s %s\n", "case", "output", "loader", "workers",
              "tessera images/s", "torchvision images/s", "tessera/torchvision");
  for (const RateRow& row : r.rows) {
    const std::string out =
        "3x" + std::to_string(row.out_height) + "x" + std::to_string(row.out_width);
    std::string peer = row.torch ? stats_text(*row.torch) : "not available";
    std::string ratio =
        row.torch ? std::to_string(row.tessera.median / row.torch->median).substr(0, 5) : "-";
    std::printf("%-5s %-12s %-20s %7d  %-28s %-28s %s\n", row.case_name.c_str(), out.c_str(),
                loader_name(row).c_str(), row.workers, stats_text(row.tessera).c_str(),
                peer.c_str(), ratio.c_str());
  }
  if (!r.peer_ok)
    std::printf("peer: not available (%s)\n", r.peer.value("error", std::string("?")).c_str());
  else
    std::printf("peer: torch %s, torchvision %s, PIL %s (%s)\n",
                r.peer.value("torch_version", "?").c_str(),
                r.peer.value("torchvision_version", "?").c_str(),
                r.peer.value("pil_version", "?").c_str(), a.python.c_str());
  if (auto m = full_min_ratio(r))
    std::printf("target: full case tessera/torchvision >= 1.5: smallest %.2f, %s\n", *m,
                *m >= 1.5 ? "met" : "not met");
  std::printf(
      "\nsp rows (full case, H split, one rank's load_into_at per batch on one thread;\n"
      "markers: a copy with a restart marker at every MCU row, vs sp=1 of the same)\n");
  if (r.marked_bytes_in > 0)
    std::printf("the copy with markers: %.2f -> %.2f MiB of JPEGs (%+.1f%%), written in %.1f s\n",
                double(r.marked_bytes_in) / (1 << 20), double(r.marked_bytes_out) / (1 << 20),
                100.0 * double(r.marked_bytes_out - r.marked_bytes_in) / double(r.marked_bytes_in),
                r.marked_seconds);
  std::printf("%-3s %-4s %-11s %-26s %-9s %-6s %-13s %-16s %s\n", "sp", "rank", "rows", "ms/batch",
              "vs sp=1", "ideal", "pixels share", "decode ms/batch", "markers");
  for (const SpRow& s : r.sp) {
    const std::string rows = std::to_string(s.row_begin) + "-" + std::to_string(s.row_end);
    std::printf("%-3d %-4d %-11s %-26s %-9.3f %-6.3f %-13.3f %-16.2f %s\n", s.sp, s.rank,
                rows.c_str(), stats_text(s.ms).c_str(), s.ratio_to_sp1, s.ideal,
                s.pixels_decoded_share, s.decode_ms_per_batch, s.markers ? "on" : "off");
  }
  for (const SpRow& s : slowest_ranks(r.sp))
    std::printf(
        "sp %d, markers %s: slowest rank %d at %.3f of sp=1 (ideal %.3f): a step waits for "
        "it\n",
        s.sp, s.markers ? "on" : "off", s.rank, s.ratio_to_sp1, s.ideal);
}

void print_json(const LoaderArgs& a, const LoaderResults& r) {
  nlohmann::json j = {{"program", "bench_loader"},
                      {"cpu", r.cpu},
                      {"cores", r.cores},
                      {"images",
                       {{"count", a.count},
                        {"height", a.height},
                        {"width", a.width},
                        {"quality", 90},
                        {"subsampling", "4:2:0"},
                        {"folder", r.images.folder},
                        {"written", r.images_written},
                        {"bytes", r.images.bytes}}},
                      {"batch", a.batch},
                      {"batches", a.batches},
                      {"warmup", a.warmup},
                      {"repeats", a.repeats},
                      {"workers", a.workers},
                      {"prefetch_per_worker", a.prefetch_per_worker},
                      {"peer", r.peer}};
  auto stats = [](const Stats& s) {
    return nlohmann::json{{"median", s.median}, {"min", s.min}, {"max", s.max}, {"reps", s.reps}};
  };
  j["rows"] = nlohmann::json::array();
  for (const RateRow& row : r.rows) {
    nlohmann::json o = {{"case", row.case_name},
                        {"output", {3, row.out_height, row.out_width}},
                        {"workers", row.workers},
                        {"prefetch", row.prefetch},
                        {"jpeg_downscale", row.jpeg_downscale},
                        {"tessera_images_per_s", stats(row.tessera)},
                        {"torchvision_images_per_s", nullptr},
                        {"tessera_over_torchvision", nullptr}};
    if (row.torch) {
      o["torchvision_images_per_s"] = stats(*row.torch);
      o["tessera_over_torchvision"] = row.tessera.median / row.torch->median;
      o["torchvision_batch_shape"] = row.torch_batch_shape;
    }
    j["rows"].push_back(o);
  }
  j["sp"] = nlohmann::json::array();
  for (const SpRow& s : r.sp)
    j["sp"].push_back({{"sp", s.sp},
                       {"rank", s.rank},
                       {"rows", {s.row_begin, s.row_end}},
                       {"ms_per_batch", stats(s.ms)},
                       {"ratio_to_sp1", s.ratio_to_sp1},
                       {"ideal", s.ideal},
                       {"pixels_decoded_share", s.pixels_decoded_share},
                       {"decode_ms_per_batch", s.decode_ms_per_batch},
                       {"markers", s.markers}});
  j["sp_slowest"] = nlohmann::json::array();
  for (const SpRow& s : slowest_ranks(r.sp))
    j["sp_slowest"].push_back({{"sp", s.sp},
                               {"markers", s.markers},
                               {"rank", s.rank},
                               {"ratio_to_sp1", s.ratio_to_sp1},
                               {"ideal", s.ideal}});
  j["marked_copy"] = {{"bytes_in", r.marked_bytes_in},
                      {"bytes_out", r.marked_bytes_out},
                      {"seconds", r.marked_seconds}};
  const std::optional<double> m = full_min_ratio(r);
  j["target"] = {{"full_ratio_min", 1.5},
                 {"full_ratio_smallest", m ? nlohmann::json(*m) : nlohmann::json(nullptr)},
                 {"met", m ? nlohmann::json(*m >= 1.5) : nlohmann::json(nullptr)}};
  std::printf("%s\n", j.dump(2).c_str());
}

}  // namespace tessera::bench
