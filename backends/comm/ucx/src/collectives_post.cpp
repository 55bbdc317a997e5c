// UcxBackend's collective entry points: check the arguments on the caller's thread, then run the
// collective as the group's next one (collective_thread.hpp), so the caller computes while it
// moves. Barrier and split block, as the interface says.
#include <cstdlib>
#include <cstring>
#include <optional>

#include "tessera/core/error.hpp"
#include "ucx_backend.hpp"

namespace tessera::comm::ucx {

namespace {
/// TESSERA_UCX_PROGRESS's mode, or nullopt for a value that names none.
std::optional<Progress> env_progress() noexcept {
  const char* v = std::getenv("TESSERA_UCX_PROGRESS");
  if (!v || !*v || std::strcmp(v, "thread") == 0) return Progress::Thread;
  if (std::strcmp(v, "calls") == 0) return Progress::Calls;
  return std::nullopt;
}
}  // namespace

Progress progress_mode() noexcept {
  static const Progress mode = env_progress().value_or(Progress::Thread);
  return mode;
}

void check_progress_env() {
  if (!env_progress())
    throw InvalidArgument(detail::cat("comm backend 'ucx': TESSERA_UCX_PROGRESS=",
                                      std::getenv("TESSERA_UCX_PROGRESS"),
                                      " is not a progress mode; use 'thread' (collectives move "
                                      "while the caller computes, the default) or 'calls' (whole "
                                      "inside the post)"));
}

WorkPtr UcxBackend::run_collective(std::function<void()> task, bool small) {
  if (!thread_) {
    task();
    return std::make_unique<CompletedWork>();
  }
  return thread_->post(std::move(task), small);
}

WorkPtr UcxBackend::all_reduce(BufferView buf, ReduceOp op) {
  check_host(buf, "all_reduce");
  return run_collective([this, buf, op] { all_reduce_now(buf, op); }, buf.bytes() <= kDirectBytes);
}

WorkPtr UcxBackend::all_gather(BufferView send, BufferView recv) {
  check_all_gather(send, recv);
  return run_collective([this, send, recv] { all_gather_now(send, recv); },
                        recv.bytes() <= kDirectBytes);
}

WorkPtr UcxBackend::reduce_scatter(BufferView send, BufferView recv, ReduceOp op) {
  check_reduce_scatter(send, recv);
  return run_collective([this, send, recv, op] { reduce_scatter_now(send, recv, op); },
                        send.bytes() <= kDirectBytes);
}

WorkPtr UcxBackend::broadcast(BufferView buf, int root) {
  check_broadcast(buf, root);
  return run_collective([this, buf, root] { broadcast_now(buf, root); },
                        buf.bytes() <= kDirectBytes);
}

WorkPtr UcxBackend::all_to_all(BufferView send, BufferView recv) {
  check_all_to_all(send, recv);
  return run_collective([this, send, recv] { all_to_all_now(send, recv); },
                        send.bytes() <= kDirectBytes);
}

void UcxBackend::barrier() {
  run_collective([this] { barrier_now(); }, true)->wait();
}

std::unique_ptr<Backend> UcxBackend::split(const std::vector<int>& ranks) {
  std::unique_ptr<Backend> sub;
  run_collective([&] { sub = split_now(ranks); }, true)->wait();
  return sub;
}

}  // namespace tessera::comm::ucx
