// save_every's checkpoints (SAVE.step<N>), their pruning, and resume auto's choice among them.
#include "tessera/run/checkpoints.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/nn/checkpoint.hpp"

namespace tessera::run {

namespace fs = std::filesystem;

namespace {

/// N when `name` is exactly `prefix` followed by decimal digits N; -1 otherwise.
std::int64_t number_after(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  // 18 digits always fit an int64; longer names are not ours.
  if (digits.size() > 18) return -1;
  for (char ch : digits)
    if (!std::isdigit(static_cast<unsigned char>(ch))) return -1;
  return std::stoll(digits);
}

/// Every regular file in `path`'s folder named filename(path) + `suffix` + <digits>:
/// {digits' value, path}, largest first.
std::vector<std::pair<std::int64_t, std::string>> numbered(const std::string& path,
                                                           const std::string& suffix) {
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string prefix = p.filename().string() + suffix;
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::int64_t n = number_after(name, prefix);
    std::error_code type_ec;
    // The name as `path` spells its folder, so that what is reported reads like the --save given.
    if (n >= 0 && it->is_regular_file(type_ec))
      out.emplace_back(n, path + name.substr(prefix.size() - suffix.size()));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

/// Reads `path` whole, with its stage files (checksums, stages agreeing), and returns the step
/// its meta holds. Throws InvalidArgument saying why it cannot be resumed from.
std::int64_t verified_step(const std::string& path) {
  const nn::CheckpointData data = nn::load_checkpoint_stages(path);
  const auto it = data.meta.find("step");
  TESSERA_CHECK(it != data.meta.end(), "checkpoint '", path,
                "' holds no step; it was not written by tessera's trainer");
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    throw InvalidArgument(
        detail::cat("checkpoint '", path, "' holds step '", it->second, "', not a number"));
  }
}

struct Candidate {
  std::int64_t step;
  std::string path;
  bool verified;  ///< SAVE, read already to learn its step
};

}  // namespace

std::string step_checkpoint_path(const std::string& save, std::int64_t step) {
  return save + ".step" + std::to_string(step);
}

CheckpointChoice newest_checkpoint(const std::string& save) {
  CheckpointChoice choice;
  std::vector<Candidate> candidates;
  for (const auto& [n, path] : numbered(save, ".step")) candidates.push_back({n, path, false});
  std::error_code ec;
  if (fs::is_regular_file(save, ec)) {
    try {
      candidates.push_back({verified_step(save), save, true});
    } catch (const Error& e) {
      choice.skipped.emplace_back(save, e.what());
    }
  }
  // Newest first; SAVE before a SAVE.step<N> of the same step (the same state, read already).
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     return a.step != b.step ? a.step > b.step : a.verified && !b.verified;
                   });
  for (const Candidate& c : candidates) {
    try {
      if (!c.verified) {
        const std::int64_t held = verified_step(c.path);
        TESSERA_CHECK(held == c.step, "checkpoint '", c.path, "' holds step ", held,
                      " but its name says step ", c.step);
      }
      choice.path = c.path;
      choice.step = c.step;
      return choice;
    } catch (const Error& e) {
      choice.skipped.emplace_back(c.path, e.what());
    }
  }
  return choice;
}

std::vector<std::string> prune_step_checkpoints(const std::string& save, int keep) {
  TESSERA_CHECK(keep >= 1, "keep_checkpoints ", keep, ": must be at least 1");
  const auto files = numbered(save, ".step");
  std::vector<std::string> removed;
  for (std::size_t i = static_cast<std::size_t>(keep); i < files.size(); ++i) {
    // The checkpoint first: a prune cut short leaves stray stage files, never a checkpoint
    // that lacks one.
    std::vector<std::string> doomed{files[i].second};
    for (const auto& stage : numbered(files[i].second, ".stage")) doomed.push_back(stage.second);
    for (const std::string& path : doomed) {
      std::error_code ec;
      fs::remove(path, ec);
      TESSERA_CHECK(!ec, "cannot remove the old checkpoint '", path, "' (keep_checkpoints ", keep,
                    "): ", ec.message(), "; check the folder's permissions");
      removed.push_back(path);
    }
  }
  return removed;
}

}  // namespace tessera::run
