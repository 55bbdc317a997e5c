// local::World: the shared state of one in-process job (groups, abort flag) and its public API.
#include <numeric>
#include <sstream>

#include "tessera/comm/device_staging.hpp"
#include "world_state.hpp"

namespace tessera::comm::local {

std::string join_ints(const std::vector<int>& values) {
  std::ostringstream os;
  for (std::size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  return os.str();
}

Group::Group(std::string key_in, std::vector<int> world_ranks_in)
    : key(std::move(key_in)),
      world_ranks(std::move(world_ranks_in)),
      p2p_cv(world_ranks.size()),
      mailboxes(world_ranks.size()) {}

std::string Group::who(int rank) const {
  if (key == "world") return detail::cat("rank ", rank);
  return detail::cat("rank ", rank, " (world rank ", world_ranks.at(static_cast<std::size_t>(rank)),
                     ") of group ", key);
}

World::State::State(int size_in, std::chrono::milliseconds timeout_in)
    : size(size_in), timeout(timeout_in), claimed(static_cast<std::size_t>(size_in), 0) {
  std::vector<int> all(static_cast<std::size_t>(size));
  std::iota(all.begin(), all.end(), 0);
  world_group = std::make_shared<Group>("world", all);
  groups.emplace(world_group->key, world_group);
}

std::shared_ptr<Group> World::State::group(const std::string& key,
                                           const std::vector<int>& world_ranks) {
  std::lock_guard lock(groups_mu);
  auto it = groups.find(key);
  if (it == groups.end()) it = groups.emplace(key, std::make_shared<Group>(key, world_ranks)).first;
  TESSERA_ASSERT(it->second->world_ranks == world_ranks, "group ", key, " exists with ranks {",
                 join_ints(it->second->world_ranks), "}, now asked for {", join_ints(world_ranks),
                 "}");
  return it->second;
}

void World::State::abort(const std::string& reason) noexcept {
  {
    std::lock_guard lock(abort_mu);
    if (aborted.load()) return;  // the first reason wins
    try {
      abort_reason = reason;
    } catch (...) {
      abort_reason.clear();  // out of memory: abort without a reason rather than not at all
    }
    aborted.store(true);
  }
  // Take each group's mutex once after setting the flag: a waiter has either not yet checked the
  // flag (and will see it) or is inside wait (and gets the notification).
  std::vector<std::shared_ptr<Group>> all;
  try {
    std::lock_guard lock(groups_mu);
    all.reserve(groups.size());
    for (auto& [key, g] : groups) all.push_back(g);
  } catch (...) {
    return;  // cannot happen short of bad_alloc; waiters then fall back to their deadlines
  }
  for (auto& g : all) {
    { std::lock_guard lock(g->mu); }
    g->coll_cv.notify_all();
    for (auto& cv : g->p2p_cv) cv.notify_all();
  }
}

BackendError World::State::aborted_error(const std::string& who, std::string_view op) const {
  std::string reason;
  {
    std::lock_guard lock(abort_mu);
    reason = abort_reason.empty() ? "the world was aborted" : abort_reason;
  }
  return BackendError("local", kAbortedCode, detail::cat(who, ": ", op, " aborted: ", reason));
}

World::World(int size, std::chrono::milliseconds timeout) {
  TESSERA_CHECK(size >= 1, "local backend: a World needs at least 1 rank, got ", size);
  TESSERA_CHECK(timeout.count() > 0, "local backend: the timeout must be positive, got ",
                timeout.count(), " ms");
  state_ = std::make_shared<State>(size, timeout);
}

World::~World() = default;

int World::size() const noexcept { return state_->size; }

std::chrono::milliseconds World::timeout() const noexcept { return state_->timeout; }

std::string World::describe() const {
  return detail::cat("local world of ", state_->size, " ranks (timeout ", state_->timeout.count(),
                     " ms)");
}

std::unique_ptr<Backend> World::backend(int rank) { return backend(rank, state_->timeout); }

std::unique_ptr<Backend> World::backend(int rank, std::chrono::milliseconds timeout) {
  TESSERA_CHECK(rank >= 0 && rank < state_->size, "local backend: rank ", rank,
                " is outside this world of ", state_->size, " ranks; use 0 <= rank < ",
                state_->size);
  TESSERA_CHECK(timeout.count() > 0, "local backend: the timeout must be positive, got ",
                timeout.count(), " ms");
  {
    std::lock_guard lock(state_->groups_mu);
    auto& claimed = state_->claimed[static_cast<std::size_t>(rank)];
    TESSERA_CHECK(!claimed, "local backend: the backend of rank ", rank,
                  " was already created; each rank takes its backend from a World once");
    claimed = 1;
  }
  // Device tensors (P ranks on one GPU) are staged through the memory that owns them.
  return stage_device_buffers(make_backend(state_, state_->world_group, rank, timeout));
}

void World::abort(const std::string& reason) noexcept { state_->abort(reason); }

bool World::aborted() const noexcept { return state_->aborted.load(); }

}  // namespace tessera::comm::local
