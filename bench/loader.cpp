// bench_loader: how fast tessera's input pipeline turns a folder of JPEGs into batches, beside
// torchvision's ImageFolder + PIL + DataLoader on the same files, batch, worker count and cores
// (issue 36: tessera's decode + transform rate >= 1.5x torchvision's at 3x1024x2048, batch 2;
// per-rank decode time falling as 1/sp with shard-only decoding).
// The images: --count JPEGs of --height x --width (quality 90, 4:2:0, procedural pictures with
// photographic structure: loader_images.cpp) written once into a temporary folder in the
// classification layout, or an existing folder (--images). Cases: "full", output the image's size
// (random crop at the same size, i.e. none; flip; ImageNet normalisation), and "half", output
// H/2 x W/2 (tessera with its JPEG DCT-domain downscale on and off; torchvision Resize with
// antialias on PIL images).
// Rates: per worker count W (--workers), a data::Loader with prefetch 2W (torch's prefetch_factor 2
// per worker) and W loader threads, shuffled; each repeat makes a new loader, takes --warmup
// batches untimed, then times --batches batches: images/s from the wall time, median [min-max]
// over --repeats. Also the synchronous load (prefetch 0, in the calling thread). The peer
// (torchvision_loader_peer.py, run after tessera's rows by --python, default Debian's
// /usr/bin/python3) does the same with num_workers = W worker processes (0: synchronous), one
// torch thread each.
// sp rows: the "full" batch layout split along H over sp ranks (nn::input_layout, as the trainer
// builds it, aligned to ConvNeXt's stride 32); each rank's load_into_at per batch timed on one
// thread, every rank in turn, with the share of each file's pixels it decoded (DataStats); on the
// images as written and (--markers) on a copy with a restart marker at every MCU row
// (run::add_restarts), from which a rank below the top starts decoding at its shard.
// Exit status: 0 figures and ratios printed; 1 an error; 2 a bad command line; 4 tessera's
// figures printed but the peer not available (its row says why; --no-peer: 0).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "loader_bench.hpp"
#include "tessera/core/mesh.hpp"
#include "tessera/data/image_folder.hpp"
#include "tessera/data/loader.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/run/images.hpp"

namespace tessera::bench {
namespace {

constexpr int kStride = 32;  // ConvNeXt's total stride: spatial shards are aligned to it

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown";
}

core::Layout batch_layout(int sp, int batch, int height, int width) {
  return nn::input_layout(core::DeviceMesh::parse("sp=" + std::to_string(sp)), "H", batch,
                          {3, height, width}, kStride);
}

std::shared_ptr<data::Dataset> open_case(const LoaderArgs& a, const std::string& folder, int height,
                                         int width, bool jpeg_downscale) {
  data::ImageFolderOptions o;
  o.folder = folder;
  o.channels = 3, o.height = height, o.width = width;
  o.augment = true, o.flip = true;  // scale range [1, 1]: at the image's size the crop is all of it
  o.seed = a.seed;
  o.jpeg_downscale = jpeg_downscale;
  return data::open_image_folder(o);
}

/// Images/s of a data::Loader (rank 0 of sp=1) over the repeats.
Stats loader_rate(const LoaderArgs& a, const std::shared_ptr<data::Dataset>& ds, int prefetch,
                  int workers) {
  const core::Layout layout =
      batch_layout(1, a.batch, int(ds->image_shape()[1]), int(ds->image_shape()[2]));
  std::vector<double> rates;
  for (int rep = 0; rep < a.repeats; ++rep) {
    data::LoaderOptions o;
    o.prefetch = prefetch, o.workers = std::max(1, workers), o.shuffle = true;
    o.seed = a.seed + std::uint64_t(rep);
    data::Loader loader(ds, layout, 0, nullptr, nullptr, o);
    std::int64_t step = 0;
    for (int b = 0; b < a.warmup; ++b) loader.take(step++);
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < a.batches; ++b) loader.take(step++);
    rates.push_back(double(a.batches) * a.batch / seconds_since(t0));
  }
  return stats_of(rates);
}

/// The rows of one case: synchronous, then each worker count; "half" once per DCT setting.
void measure_case(const LoaderArgs& a, const std::string& folder, const std::string& name,
                  std::vector<RateRow>& rows) {
  const bool half = name == "half";
  const int h = half ? a.height / 2 : a.height, w = half ? a.width / 2 : a.width;
  for (bool dct : half ? std::vector<bool>{true, false} : std::vector<bool>{true}) {
    auto ds = open_case(a, folder, h, w, dct);
    std::vector<int> counts = {0};
    counts.insert(counts.end(), a.workers.begin(), a.workers.end());
    for (int W : counts) {
      RateRow r{name, h, w, W, W * a.prefetch_per_worker, dct && half, {}, std::nullopt, {}};
      r.tessera = loader_rate(a, ds, r.prefetch, W);
      rows.push_back(r);
    }
  }
}

/// Per-rank synchronous load time of the "full" case split along H over `sp` ranks. The ranks take
/// turns batch by batch, so that a busy spell on a shared machine lands on all of them alike.
void measure_sp(const LoaderArgs& a, const std::string& folder, int sp, bool markers,
                std::vector<SpRow>& out) {
  auto ds = open_case(a, folder, a.height, a.width, true);  // fresh: its stats count only these
  const core::Layout layout = batch_layout(sp, a.batch, a.height, a.width);
  const data::SampleOrder order(ds->size(), true, a.seed);
  std::vector<data::Batch> batches;
  for (int rank = 0; rank < sp; ++rank)
    batches.push_back(data::allocate_batch(layout, rank, ds->task(), nullptr));
  std::vector<std::vector<double>> ms(std::size_t(sp), std::vector<double>(std::size_t(a.repeats)));
  std::vector<double> decode_s(std::size_t(sp),
                               0.0);  // DataStats::decode_s of the timed loads only
  for (int rep = 0; rep < a.repeats; ++rep)
    for (int b = 0; b < a.warmup + a.batches; ++b) {
      const std::int64_t step = std::int64_t(rep) * (a.warmup + a.batches) + b;
      const std::vector<std::int64_t> samples = order.batch(step, a.batch);
      for (int rank = 0; rank < sp; ++rank) {
        const double decoded_before_s = ds->stats(rank).decode_s;
        const auto t0 = std::chrono::steady_clock::now();
        ds->load_into_at(samples, step * a.batch, layout, rank, batches[std::size_t(rank)]);
        if (b < a.warmup) continue;
        ms[std::size_t(rank)][std::size_t(rep)] += 1e3 * seconds_since(t0) / a.batches;
        decode_s[std::size_t(rank)] += ds->stats(rank).decode_s - decoded_before_s;
      }
    }
  for (int rank = 0; rank < sp; ++rank) {
    const data::DataStats st = ds->stats(rank);
    const core::Range rows = layout.local_range(rank, 2);
    SpRow r{sp, rank,     markers, rows.begin, rows.end, stats_of(ms[std::size_t(rank)]),
            0,  1.0 / sp, 0,       0};
    r.pixels_decoded_share =
        st.pixels_total ? double(st.pixels_decoded) / double(st.pixels_total) : 0;
    r.decode_ms_per_batch = 1e3 * decode_s[std::size_t(rank)] / (double(a.repeats) * a.batches);
    out.push_back(r);
  }
}

std::string sh_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

/// Runs the peer for one case; its JSON (last line of stdout), or {"error": why}.
nlohmann::json run_peer(const LoaderArgs& a, const std::string& folder, const RateRow& r) {
  std::string counts = "0";
  for (int W : a.workers) counts += ',' + std::to_string(W);
  std::string line = sh_quote(a.python) + " " + sh_quote(a.peer_script) + " --json --folder " +
                     sh_quote(folder) + " --height " + std::to_string(r.out_height) + " --width " +
                     std::to_string(r.out_width) + (r.case_name == "half" ? " --resize" : "") +
                     " --batch " + std::to_string(a.batch) + " --batches " +
                     std::to_string(a.batches) + " --warmup " + std::to_string(a.warmup) +
                     " --repeats " + std::to_string(a.repeats) + " --workers " + counts +
                     " --seed " + std::to_string(a.seed) + " </dev/null 2>&1";
  std::fflush(nullptr);
  FILE* f = ::popen(line.c_str(), "r");
  if (!f) return {{"error", "could not start " + a.python}};
  std::string out;
  char buf[4096];
  for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, got);
  const int status = ::pclose(f);
  // The JSON line is the last the peer prints, but stderr (merged, for the reason of a failure)
  // can follow it: a warning from a worker shutting down. Take the last line that is the object.
  std::string last;
  for (std::size_t end = out.size(); end > 0;) {
    const std::size_t nl = out.rfind('\n', end - 1);
    const std::size_t begin = nl == std::string::npos ? 0 : nl + 1;
    const std::string line = out.substr(begin, end - begin);
    if (last.empty() && !line.empty()) last = line;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && (j.contains("error") || j.contains("runs"))) return j;
    end = nl == std::string::npos ? 0 : nl;
  }
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return {{"error", a.peer_script + " (run with " + a.python + ") exited with status " +
                        std::to_string(rc) +
                        (rc == 127 ? ": interpreter or script not found (--python)" : "") +
                        " and printed no JSON: " + last.substr(0, 200)}};
}

/// Fills each row's torch figures from the peer's runs of its case.
void attach_peer(const nlohmann::json& peer, const std::string& name, std::vector<RateRow>& rows) {
  for (RateRow& r : rows) {
    if (r.case_name != name) continue;
    for (const auto& run : peer["runs"])
      if (run["workers"].get<int>() == r.workers) {
        Stats s;
        s.median = run["images_per_s_median"], s.min = run["images_per_s_min"];
        s.max = run["images_per_s_max"], s.reps = run["reps"];
        s.q1 = s.min, s.q3 = s.max;
        r.torch = s;
        r.torch_batch_shape = run["batch_shape"].get<std::vector<int>>();
      }
  }
}

std::string temp_folder() {
  std::string t = (std::filesystem::temp_directory_path() / "bench_loader_XXXXXX").string();
  if (!::mkdtemp(t.data()))
    throw std::runtime_error("bench_loader: cannot create a temporary folder (TMPDIR?)");
  return t;
}

int run(int argc, char** argv) {
  const LoaderArgs a = parse_loader_args(argc, argv);
  LoaderResults res;
  res.cpu = cpu_name(), res.cores = int(std::thread::hardware_concurrency());
  std::string owned;  // the folder we wrote, removed at the end
  if (a.images.empty()) {
    owned = temp_folder();
    ImageSetSpec spec{a.count, 4, a.height, a.width, 90, a.seed};
    res.images = write_image_set(owned, spec);
    res.images_written = true;
  } else {
    res.images.folder = a.images;
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } cleanup{a.keep_images ? std::string() : owned}, marked;  // marked: the copy with markers
  const std::string& folder = res.images.folder;
  for (const std::string& c : a.cases) measure_case(a, folder, c, res.rows);
  for (const std::string& m : a.markers) {
    std::string from = folder;
    if (m == "on") {
      from = temp_folder();
      marked.dir = from;
      run::AddRestartsOptions o;
      o.source = folder, o.target = from, o.rows = 1;
      const run::AddRestartsResult r = run::add_restarts(o);
      res.marked_bytes_in = r.bytes_in, res.marked_bytes_out = r.bytes_out;
      res.marked_seconds = r.seconds;
    }
    const std::size_t first = res.sp.size();
    for (int sp : a.sp) measure_sp(a, from, sp, m == "on", res.sp);
    const double base = res.sp[first].ms.median;
    for (std::size_t i = first; i < res.sp.size(); ++i)
      res.sp[i].ratio_to_sp1 = base > 0 ? res.sp[i].ms.median / base : 0;
  }
  res.peer = a.peer ? nlohmann::json::object() : nlohmann::json{{"error", "skipped (--no-peer)"}};
  res.peer_ok = a.peer;
  for (std::size_t i = 0; a.peer && i < a.cases.size() && res.peer_ok; ++i) {
    auto it = std::find_if(res.rows.begin(), res.rows.end(),
                           [&](const RateRow& r) { return r.case_name == a.cases[i]; });
    nlohmann::json p = run_peer(a, folder, *it);
    if (p.contains("error"))
      res.peer = p, res.peer_ok = false;
    else
      attach_peer(p, a.cases[i], res.rows), p.erase("runs"), res.peer = p;
  }
  a.json ? print_json(a, res) : print_table(a, res);
  return a.peer && !res.peer_ok ? 4 : 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  return tessera::bench::run_main("bench_loader", tessera::bench::run, argc, argv);
}
