// local::run: one thread per rank over a fresh World; a failing rank aborts the world, and the
// root-cause exception is rethrown after every thread has joined.
#include <mutex>
#include <thread>

#include "world_state.hpp"

namespace tessera::comm::local {

void run(int size, const std::function<void(Backend&)>& fn, std::chrono::milliseconds timeout) {
  TESSERA_CHECK(size >= 1, "local::run: size must be at least 1, got ", size);
  TESSERA_CHECK(static_cast<bool>(fn), "local::run: the rank function is empty");
  World world(size, timeout);

  std::mutex mu;
  std::exception_ptr first_failure;  // recorded before the abort, so never a secondary error
  auto rank_main = [&](int rank) {
    std::string what;
    std::exception_ptr failure;
    try {
      std::unique_ptr<Backend> backend = world.backend(rank);
      fn(*backend);
      return;
    } catch (const std::exception& e) {
      what = e.what();
      failure = std::current_exception();
    } catch (...) {
      what = "an exception not derived from std::exception";
      failure = std::current_exception();
    }
    {
      std::lock_guard lock(mu);
      if (!first_failure) first_failure = failure;
    }
    world.abort(detail::cat("rank ", rank, " failed: ", what));
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(size));
  try {
    for (int r = 0; r < size; ++r) threads.emplace_back(rank_main, r);
  } catch (...) {
    world.abort("local::run could not start a thread for every rank");
    for (auto& t : threads) t.join();
    throw;
  }
  for (auto& t : threads) t.join();
  if (first_failure) std::rethrow_exception(first_failure);
}

}  // namespace tessera::comm::local
