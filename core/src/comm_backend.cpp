// Defaults of the optional Backend operations, and the comm Registry.
#include "tessera/comm/backend.hpp"

#include <algorithm>

#include "tessera/comm/registry.hpp"
#include "tessera/comm/store.hpp"
#include "tessera/core/error.hpp"

namespace tessera::comm {

std::string_view reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

void Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& k : keys) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    try {
      get(k, std::max(left, std::chrono::milliseconds(0)));
    } catch (const TimeoutError&) {
      std::string missing;
      for (const auto& m : keys)
        if (!check(m)) missing += (missing.empty() ? "" : ", ") + m;
      throw TimeoutError("store", detail::cat("waited ", timeout.count(), " ms for ", keys.size(),
                                              " key(s); still missing: ", missing));
    }
  }
}

WorkPtr Backend::all_to_all(BufferView, BufferView) {
  throw Unsupported(detail::cat("comm backend '", name(), "' does not support all_to_all"));
}

std::unique_ptr<Backend> Backend::split(const std::vector<int>&) {
  throw Unsupported(detail::cat("comm backend '", name(), "' does not support split"));
}

void Registry::add(std::string name, BackendFactory factory, Capabilities caps) {
  TESSERA_CHECK(!name.empty(), "comm registry: empty backend name");
  TESSERA_CHECK(entries_.find(name) == entries_.end(), "comm registry: backend '", name,
                "' is registered twice");
  entries_.emplace(std::move(name), Entry{std::move(factory), caps});
}

const Registry::Entry& Registry::find(std::string_view name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string avail;
    for (auto& [n, e] : entries_) avail += (avail.empty() ? "" : ", ") + n;
    throw InvalidArgument(detail::cat("no comm backend '", name, "'; available: ",
                                      avail.empty() ? "(none)" : avail));
  }
  return it->second;
}

std::unique_ptr<Backend> Registry::create(std::string_view name, const BackendOptions& options) const {
  TESSERA_CHECK(options.size > 0 && options.rank >= 0 && options.rank < options.size,
                "comm backend '", name, "': rank ", options.rank, " outside a world of ",
                options.size, " ranks");
  return find(name).factory(options);
}

bool Registry::contains(std::string_view name) const { return entries_.find(name) != entries_.end(); }

Capabilities Registry::capabilities(std::string_view name) const { return find(name).caps; }

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (auto& [n, e] : entries_) out.push_back(n);
  return out;
}

}  // namespace tessera::comm
