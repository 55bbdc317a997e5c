// Image folders outside training (tessera/run/images.hpp): a folder's summary, and a copy of it
// whose JPEGs have restart markers.
#include "tessera/run/images.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/data/jpeg_restarts.hpp"

namespace tessera::run {

namespace {

namespace fs = std::filesystem;

enum class Kind { Jpeg, Png, Other };

/// JPEG or PNG by extension (as the image folders list them) and by the first bytes (as they
/// decode them); anything else is Other.
Kind kind_of(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return std::tolower(ch); });
  if (ext != ".jpg" && ext != ".jpeg" && ext != ".png") return Kind::Other;
  unsigned char head[4] = {};
  std::ifstream in(p, std::ios::binary);
  in.read(reinterpret_cast<char*>(head), 4);
  if (in.gcount() >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff) return Kind::Jpeg;
  if (in.gcount() >= 4 && head[0] == 0x89 && head[1] == 'P' && head[2] == 'N' && head[3] == 'G')
    return Kind::Png;
  return Kind::Other;
}

/// The regular files under `root` (itself when it is one), hidden names left out, sorted.
std::vector<fs::path> files_under(const fs::path& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (fs::is_regular_file(root, ec)) return {root};
  TESSERA_CHECK(fs::is_directory(root, ec), "'", root.string(),
                "' is neither a folder nor a file; give an image folder or a JPEG");
  try {
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
         ++it) {
      if (it->path().filename().string().starts_with(".")) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) out.push_back(it->path());
    }
  } catch (const fs::filesystem_error& e) {
    throw InvalidArgument(detail::cat("cannot list '", root.string(), "': ", e.what()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t size_of(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : static_cast<std::int64_t>(n);
}

}  // namespace

std::string ImagesSummary::to_json() const {
  return nlohmann::json{{"folder", folder},
                        {"jpegs", jpegs},
                        {"jpegs_from_top", jpegs_from_top},
                        {"progressive", progressive},
                        {"restart_rows_max", restart_rows_max},
                        {"pngs", pngs},
                        {"other_files", other_files},
                        {"bytes", bytes}}
      .dump();
}

std::string AddRestartsResult::to_json() const {
  return nlohmann::json{{"jpegs", jpegs},       {"progressive", progressive}, {"copied", copied},
                        {"bytes_in", bytes_in}, {"bytes_out", bytes_out},     {"seconds", seconds}}
      .dump();
}

ImagesSummary summarize_images(const std::string& folder) {
  ImagesSummary s;
  s.folder = folder;
  std::error_code ec;
  TESSERA_CHECK(fs::is_directory(folder, ec), "'", folder, "' is not a folder");
  for (const fs::path& p : files_under(folder)) {
    switch (kind_of(p)) {
      case Kind::Jpeg: {
        const data::JpegRestarts r = data::jpeg_restarts(p.string());
        ++s.jpegs;
        s.bytes += size_of(p);
        if (r.row_step == 0) {
          ++s.jpegs_from_top;
          if (!r.sequential) ++s.progressive;
        }
        s.restart_rows_max = std::max(s.restart_rows_max, r.row_step);
        break;
      }
      case Kind::Png:
        ++s.pngs;
        s.bytes += size_of(p);
        break;
      case Kind::Other:
        ++s.other_files;
        break;
    }
  }
  return s;
}

AddRestartsResult add_restarts(const AddRestartsOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  TESSERA_CHECK(o.rows >= 1 && o.rows <= 65535, "rows ", o.rows,
                ": a restart marker every 1 to 65535 MCU rows (1: a rank starts at most one MCU "
                "row above its shard)");
  TESSERA_CHECK(!o.target.empty(), "add_restarts: give a target folder (or the source itself)");
  const fs::path source(o.source), target(o.target);
  std::error_code ec;
  const bool one_file = fs::is_regular_file(source, ec);
  const std::vector<fs::path> files = files_under(source);
  const fs::path from = fs::weakly_canonical(source, ec), to = fs::weakly_canonical(target, ec);
  const bool in_place = from == to;
  const auto [end, rest] = std::mismatch(from.begin(), from.end(), to.begin(), to.end());
  TESSERA_CHECK(in_place || one_file || end != from.end(), "add_restarts: the target '", o.target,
                "' is inside the source '", o.source,
                "'; give a folder beside it (or the source itself, to rewrite in place)");
  // Each file's destination, its folder made first.
  std::vector<fs::path> dest;
  for (const fs::path& p : files) {
    fs::path d = target;
    if (!one_file) {
      d = target / fs::relative(p, source);
    } else if (fs::is_directory(target, ec)) {
      d = target / p.filename();
    }
    fs::create_directories(d.parent_path().empty() ? fs::path(".") : d.parent_path(), ec);
    TESSERA_CHECK(!ec, "cannot create the folder '", d.parent_path().string(), "': ", ec.message());
    dest.push_back(std::move(d));
  }

  AddRestartsResult total;
  std::mutex mutex;
  std::exception_ptr failure;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  auto work = [&] {
    while (!stop) {
      const std::size_t i = next++;
      if (i >= files.size()) return;
      AddRestartsResult one;
      try {
        if (kind_of(files[i]) == Kind::Jpeg) {
          const data::RestartRewrite r =
              data::add_jpeg_restarts(files[i].string(), dest[i].string(), o.rows);
          one.jpegs = 1;
          one.progressive = r.was_progressive ? 1 : 0;
          one.bytes_in = r.bytes_in;
          one.bytes_out = r.bytes_out;
        } else if (!in_place) {
          core::write_file_atomic(dest[i].string(), core::read_file(files[i].string()));
          one.copied = 1;
        }
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        stop = true;
        return;
      }
      const std::lock_guard<std::mutex> lock(mutex);
      total.jpegs += one.jpegs;
      total.progressive += one.progressive;
      total.copied += one.copied;
      total.bytes_in += one.bytes_in;
      total.bytes_out += one.bytes_out;
    }
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t jobs =
      std::min<std::size_t>(files.size(), o.jobs > 0 ? std::size_t(o.jobs) : cores);
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < jobs; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return total;
}

}  // namespace tessera::run
