// `tessera images info DIR` and `tessera images add-restarts SRC DST`: what an image folder holds,
// and a copy of it whose JPEGs have restart markers (each rank of an image split along H then
// decodes only its own rows).
#include <cstdio>

#include "commands.hpp"
#include "tessera/run/images.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::tools {
namespace {

struct ImagesArgs {
  std::string folder;
  run::AddRestartsOptions add;
  bool json = false;
};

int run_info(const ImagesArgs& a) {
  const run::ImagesSummary s = run::summarize_images(a.folder);
  if (a.json) {
    std::printf("%s\n", s.to_json().c_str());
    return 0;
  }
  std::printf("%s: %lld JPEGs, %lld PNGs (%s), %lld other files\n", s.folder.c_str(),
              static_cast<long long>(s.jpegs), static_cast<long long>(s.pngs),
              sim::format_bytes(s.bytes).c_str(), static_cast<long long>(s.other_files));
  if (s.jpegs == 0) return 0;
  std::printf(
      "JPEGs entered at a restart marker below the top: %lld (markers every %d MCU rows "
      "or closer)\n",
      static_cast<long long>(s.jpegs - s.jpegs_from_top), s.restart_rows_max);
  std::printf("JPEGs decoded from the top: %lld (%lld progressive)\n",
              static_cast<long long>(s.jpegs_from_top), static_cast<long long>(s.progressive));
  if (s.jpegs_from_top > 0) {
    std::printf(
        "with the image split along H, a rank decodes every row above its shard of "
        "these;\n  tessera images add-restarts %s NEW_FOLDER  adds the markers without "
        "changing a pixel\n",
        s.folder.c_str());
  }
  return 0;
}

int run_add_restarts(const ImagesArgs& a) {
  const run::AddRestartsResult r = run::add_restarts(a.add);
  if (a.json) {
    std::printf("%s\n", r.to_json().c_str());
    return 0;
  }
  const double growth =
      r.bytes_in > 0 ? 100.0 * double(r.bytes_out - r.bytes_in) / double(r.bytes_in) : 0;
  std::printf(
      "%s: %lld JPEGs with a restart marker every %d MCU rows (%lld were progressive), "
      "%lld other files copied; JPEGs %s -> %s (%+.1f%%), %.1f s\n",
      a.add.target.c_str(), static_cast<long long>(r.jpegs), a.add.rows,
      static_cast<long long>(r.progressive), static_cast<long long>(r.copied),
      sim::format_bytes(r.bytes_in).c_str(), sim::format_bytes(r.bytes_out).c_str(), growth,
      r.seconds);
  return 0;
}

}  // namespace

void add_images_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<ImagesArgs>();
  CLI::App* images =
      app.add_subcommand("images", "Image folders: what they hold, restart markers for sharding");
  images->require_subcommand(1);

  CLI::App* info = images->add_subcommand(
      "info",
      "Count a folder's JPEGs and PNGs and say which JPEGs a rank must decode from the top");
  info->add_option("folder", a->folder, "An image folder (walked recursively)")->required();
  info->add_flag("--json", a->json, "One JSON object on stdout");
  info->callback([&action, a] { action = [a] { return run_info(*a); }; });

  CLI::App* add = images->add_subcommand(
      "add-restarts",
      "Copy an image folder with restart markers in every JPEG (lossless: the same pixels), so a "
      "rank holding rows of an image decodes only those");
  add->add_option("source", a->add.source, "An image folder (walked recursively) or one JPEG")
      ->required();
  add->add_option("target", a->add.target,
                  "Where the copy goes (the same layout; the source itself rewrites in place)")
      ->required();
  add->add_option("--rows", a->add.rows, "A restart marker every this many MCU rows")
      ->capture_default_str();
  add->add_option("--jobs", a->add.jobs, "Files rewritten at once (0: one per core)")
      ->capture_default_str();
  add->add_flag("--json", a->json, "One JSON object on stdout");
  add->callback([&action, a] { action = [a] { return run_add_restarts(*a); }; });
}

}  // namespace tessera::tools
