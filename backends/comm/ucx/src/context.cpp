// The UCX context: init, address exchange through the store, endpoints with peer-failure
// handling, posted receives, and the yield-then-block wait loop.
#include "context.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tessera/core/error.hpp"

namespace tessera::comm::ucx {

namespace {
#define TESSERA_UCS_CHECK(expr, what)                                      \
  do {                                                                     \
    const ucs_status_t st_ = (expr);                                       \
    if (st_ != UCS_OK)                                                     \
      throw BackendError("ucx", static_cast<int>(st_),                     \
                         detail::cat(what, ": ", ucs_status_string(st_))); \
  } while (0)

// How long an idle wait polls the worker before it blocks on the event fds: a message that
// arrives within it costs no wake-up; past it the core is left to the other processes (with
// more ranks than cores, the peer that must send may be the one waiting for this core).
// TESSERA_UCX_SPIN_US overrides it (0 = block at once).
constexpr long kDefaultSpinUs = 50;

// This machine: its boot id and host name. Processes with equal ids share memory.
std::string machine_id() {
  std::string id;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f)) id = buf;
    std::fclose(f);
  }
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return id + '@' + host;
}

// TESSERA_UCX_PEER_ERRORS=1: UCX's peer error handling on every endpoint (TCP even between
// processes of one machine), e.g. to test that detection.
bool force_peer_mode() {
  const char* v = std::getenv("TESSERA_UCX_PEER_ERRORS");
  return v && std::string(v) == "1";
}

std::chrono::microseconds spin_phase() {
  static const std::chrono::microseconds us = [] {
    const char* v = std::getenv("TESSERA_UCX_SPIN_US");
    if (!v || !*v) return std::chrono::microseconds(kDefaultSpinUs);
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 0 || n > 10'000'000)
      throw InvalidArgument(detail::cat(
          "TESSERA_UCX_SPIN_US=", v, " must be a whole number of microseconds from 0 to 10000000"));
    return std::chrono::microseconds(n);
  }();
  return us;
}
}  // namespace

void Context::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* a = static_cast<PeerErr*>(arg);
  // Called from inside ucp_worker_progress, i.e. with mu_ held.
  a->self->peer_errors_[static_cast<std::size_t>(a->rank)] =
      detail::cat("the connection to rank ", a->rank, " failed (", ucs_status_string(status), ")");
}

// Messages up to 256 KiB go eager (copied through the shared-memory FIFO, or TCP's segments);
// larger ones by rendezvous (zero-copy: cma between processes of a host). UCX's automatic
// threshold is a few KiB here, and a rendezvous is a handshake that needs the sender to run
// again. bench_comm on this 2-core VM, 2 processes: 64 KiB all_reduce 25 -> 13 us, 256 KiB
// 58 -> 41 us, 36 KiB halo 8.7 -> 5.8 us, 144 KiB 23 -> 19.5 us; 4 processes on the 2 cores:
// 64 KiB 140 -> 55 us. Eager up to 1 MiB was faster still at 1 MiB with 2 processes (150 us
// against 171) but slower with 4 on 2 cores (a FIFO of 8 KiB segments needs the receiver to run
// while the sender fills it: 4 MiB 4.6 -> 6.4 ms), so 256 KiB. UCX_RNDV_THRESH in the
// environment still decides.
const char* const kRndvThresh = "262145";

Context::Context(std::shared_ptr<Rendezvous> rdzv, int rank, int size,
                 std::chrono::milliseconds timeout)
    : rdzv_(std::move(rdzv)), store_(*rdzv_->store()), rank_(rank), size_(size) {
  ucp_config_t* config = nullptr;
  TESSERA_UCS_CHECK(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  if (!std::getenv("UCX_RNDV_THRESH")) {
    const ucs_status_t m = ucp_config_modify(config, "RNDV_THRESH", kRndvThresh);
    if (m != UCS_OK) ucp_config_release(config);
    TESSERA_UCS_CHECK(m, detail::cat("ucp_config_modify RNDV_THRESH=", kRndvThresh));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  const ucs_status_t st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  TESSERA_UCS_CHECK(st, detail::cat("rank ", rank, ": ucp_init"));
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // our mutex serialises every call
  try {
    TESSERA_UCS_CHECK(ucp_worker_create(context_, &wp, &worker_), "ucp_worker_create");
    TESSERA_UCS_CHECK(ucp_worker_get_efd(worker_, &efd_), "ucp_worker_get_efd");
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = efd_;
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, efd_, &ev);
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE);
    if (wake_fd_ < 0)
      throw BackendError("ucx", errno, detail::cat("rank ", rank, ": eventfd: ", std::strerror(errno)));
    ev.data.fd = wake_fd_;
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    helper_epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    ev.data.fd = efd_;
    ::epoll_ctl(helper_epfd_, EPOLL_CTL_ADD, efd_, &ev);
    abort_fd_ = store_.abort_fd();
    if (abort_fd_ >= 0) {
      ev.data.fd = abort_fd_;
      ::epoll_ctl(epfd_, EPOLL_CTL_ADD, abort_fd_, &ev);
    }
    ucp_address_t* addr = nullptr;
    std::size_t len = 0;
    TESSERA_UCS_CHECK(ucp_worker_get_address(worker_, &addr, &len), "ucp_worker_get_address");
    // The address is prefixed by this machine's identity: peers on the same machine talk over
    // shared memory (see below).
    store_.set(detail::cat("tessera/ucx/addr/", rank),
               machine_id() + '\n' + std::string(reinterpret_cast<const char*>(addr), len));
    ucp_worker_release_address(worker_, addr);
    // Every rank's `prefix`<r> key, or a TimeoutError naming the ranks missing.
    auto wait_all = [&](const char* prefix, const char* doing) {
      std::vector<std::string> keys;
      for (int r = 0; r < size; ++r) keys.push_back(detail::cat(prefix, r));
      try {
        store_.wait(keys, timeout);
      } catch (const TimeoutError& e) {
        throw TimeoutError("ucx", detail::cat("rank ", rank, ": ", doing, " the world of ", size,
                                              " ranks: ", e.what()));
      }
      return keys;
    };
    const std::vector<std::string> keys = wait_all("tessera/ucx/addr/", "connecting");
    eps_.assign(static_cast<std::size_t>(size), nullptr);
    peer_errors_.assign(static_cast<std::size_t>(size), "");
    peer_mode_.assign(static_cast<std::size_t>(size), false);
    const std::string me = machine_id();
    int here = 0;
    for (int r = 0; r < size; ++r) {
      const std::string v = store_.get(keys[static_cast<std::size_t>(r)], timeout);
      const std::size_t nl = v.find('\n');
      if (nl == std::string::npos)
        throw BackendError(
            "ucx", 0,
            detail::cat("rank ", rank, ": the address rank ", r, " published is malformed"));
      const std::string a = v.substr(nl + 1);
      err_args_.push_back(std::make_unique<PeerErr>(PeerErr{this, r}));
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.address = reinterpret_cast<const ucp_address_t*>(a.data());
      // UCX's shared-memory transports (posix, sysv, cma in 1.13) cannot report a failed peer,
      // so asking for peer error handling rules them out and leaves TCP over loopback: 10x less
      // bandwidth and 30 us per message. Peers on this machine therefore go without it; a dead
      // one is still detected, by the store (its connection closes without a goodbye and the job
      // is aborted) and by the deadline. Peers on other machines keep UCX's own detection.
      here += v.compare(0, nl, me) == 0;
      peer_mode_[static_cast<std::size_t>(r)] = v.compare(0, nl, me) != 0 || force_peer_mode();
      ep.err_mode = peer_mode_[static_cast<std::size_t>(r)] ? UCP_ERR_HANDLING_MODE_PEER
                                                            : UCP_ERR_HANDLING_MODE_NONE;
      ep.err_handler.cb = &Context::on_ep_error;
      ep.err_handler.arg = err_args_.back().get();
      TESSERA_UCS_CHECK(ucp_ep_create(worker_, &ep, &eps_[static_cast<std::size_t>(r)]),
                        detail::cat("rank ", rank, ": connecting to rank ", r));
    }
    // More ranks on this machine than cores: the peer a wait needs may be waiting for this core,
    // so the polling phase yields it (as MPI does when oversubscribed) instead of spinning.
    const unsigned cores = std::thread::hardware_concurrency();
    yield_when_polling_ = cores > 0 && here > static_cast<int>(cores);
    // Nobody leaves before everybody is connected: a shared-memory endpoint attaches the peer's
    // segment when it is created, which fails once that peer has exited.
    store_.set(detail::cat("tessera/ucx/connected/", rank), "1");
    wait_all("tessera/ucx/connected/", "waiting for the endpoints of");
  } catch (...) {
    shutdown();
    throw;
  }
}

Context::~Context() { shutdown(); }

void Context::shutdown() noexcept {
  {
    std::lock_guard lock(helper_mu_);
    helper_stop_ = true;
  }
  helper_cv_.notify_all();
  if (helper_.joinable()) helper_.join();
  std::lock_guard lock(mu_);
  bool force = failed_;
  {
    std::lock_guard alock(abort_mu_);
    force = force || !abort_.empty();
  }
  std::vector<void*> closing;
  for (std::size_t i = 0; i < eps_.size(); ++i) {
    ucp_ep_h& ep = eps_[i];
    if (!ep) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // A forced close is allowed only where both sides handle peer errors; the others flush
    // (bounded by the deadline below).
    p.flags = force && i < peer_mode_.size() && peer_mode_[i] ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* r = ucp_ep_close_nbx(ep, &p);
    if (r && !UCS_PTR_IS_ERR(r)) closing.push_back(r);
    ep = nullptr;
  }
  // A live peer completes the flush within microseconds; a dead one never does. In a job that
  // has aborted (a peer died: the usual reason) nothing sent still matters, so its ranks wait a
  // quarter second, not two, before they go: an elastic job's next round starts that much sooner.
  const auto deadline =
      Clock::now() + (force ? std::chrono::milliseconds(250) : std::chrono::milliseconds(2000));
  for (void* r : closing) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline)
      ucp_worker_progress(worker_);
    ucp_request_free(r);
  }
  if (epfd_ >= 0) ::close(epfd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (helper_epfd_ >= 0) ::close(helper_epfd_);
  wake_fd_ = helper_epfd_ = -1;
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
  worker_ = nullptr;
  context_ = nullptr;
  epfd_ = -1;
}

void Context::post(std::span<Op* const> ops) {
  std::lock_guard lock(mu_);
  for (Op* op : ops) {
    if (!op->is_send) {
      post_recv_locked(*op);
      continue;
    }
    ucp_request_param_t p;
    p.op_attr_mask = 0;  // contiguous bytes (UCX's zero-copy rendezvous takes only those)
    void* r = ucp_tag_send_nbx(eps_[static_cast<std::size_t>(op->peer)], op->send_data,
                               op->send_bytes, op->tag, &p);
    if (r == nullptr) {
      op->state = Op::State::Done;
    } else if (UCS_PTR_IS_ERR(r)) {
      op->state = Op::State::Failed;
      op->error = detail::cat("sending to rank ", op->peer,
                              " failed: ", ucs_status_string(UCS_PTR_STATUS(r)));
    } else {
      op->req = r;
      op->state = Op::State::Active;
    }
  }
}

// A receive of a known size goes to UCX at once (its expected queue, matched in posting order):
// a message that arrives later lands straight in `dst`, with no unexpected-queue copy.
void Context::post_recv_locked(Op& op) {
  ucp_request_param_t p{};
  // Always a request (UCX 1.13 leaves recv_info unset when it completes at once), whose
  // ucp_tag_recv_request_test gives the message's length. (Probing the unexpected queue first,
  // to let a receive whose message is already here complete at once, measured no faster.)
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.datatype = ucp_dt_make_contig(1);
  void* r = ucp_tag_recv_nbx(worker_, op.dst, op.expect_bytes, op.tag, ~std::uint64_t{0}, &p);
  if (r == nullptr) return finish_recv_locked(op, UCS_OK);
  if (UCS_PTR_IS_ERR(r)) return finish_recv_locked(op, UCS_PTR_STATUS(r));
  op.req = r;
  op.state = Op::State::Active;
}

// A posted receive completed with `st`; op.info holds the message's length and tag. A message
// longer than the buffer is truncated by UCX (UCS_ERR_MESSAGE_TRUNCATED, info.length = the
// sender's bytes); a shorter one completes: both are the caller's size mismatch.
void Context::finish_recv_locked(Op& op, ucs_status_t st) {
  op.got_bytes = op.info.length;
  if (op.up_to && st == UCS_ERR_MESSAGE_TRUNCATED) {
    op.state = Op::State::Failed;
    op.error = detail::cat(op.describe(), " sent a message of ", op.info.length,
                           " bytes, more than the ", op.expect_bytes,
                           " any message of this call can have (a rank in another collective?)");
  } else if (op.up_to && st == UCS_OK) {
    op.state = Op::State::Done;
  } else if ((st == UCS_OK || st == UCS_ERR_MESSAGE_TRUNCATED) &&
             op.info.length != op.expect_bytes) {
    op.size_mismatch = true;
    op.state = Op::State::Failed;
  } else if (st == UCS_OK) {
    op.state = Op::State::Done;
  } else {
    op.state = Op::State::Failed;
    op.error = detail::cat(op.describe(), " failed: ", ucs_status_string(st));
  }
}

void Context::update_locked(Op& op) {
  if (op.state != Op::State::Active) return;
  if (!op.is_send) {  // a posted receive: its status and the message's length
    const ucs_status_t st = ucp_tag_recv_request_test(op.req, &op.info);
    if (st == UCS_INPROGRESS) return;
    ucp_request_free(op.req);
    op.req = nullptr;
    return finish_recv_locked(op, st);
  }
  const ucs_status_t st = ucp_request_check_status(op.req);
  if (st == UCS_INPROGRESS) return;
  ucp_request_free(op.req);
  op.req = nullptr;
  op.state = st == UCS_OK ? Op::State::Done : Op::State::Failed;
  if (st != UCS_OK) op.error = detail::cat(op.describe(), " failed: ", ucs_status_string(st));
}

// Progresses until the ops are complete or the worker has nothing more to do. The ops are
// checked after every progress call: when a message completes them, no further (empty) call is
// made (that call was ~0.03 us of a 64 B exchange's critical path).
bool Context::test(std::span<Op* const> ops) {
  bool progressed = false, all = true;
  {
    std::lock_guard lock(mu_);
    for (;;) {
      const unsigned events = ucp_worker_progress(worker_);
      progressed |= events != 0;
      all = true;
      for (Op* op : ops) {
        update_locked(*op);
        if (op->state == Op::State::Queued || op->state == Op::State::Active) all = false;
      }
      if (all || events == 0) break;
    }
  }
  // The events may have completed another thread's operations (a group's collective thread and
  // its caller share this worker) while it sleeps in wait_from: wake it to look.
  if (progressed) wake_sleepers();
  return all;
}

void Context::wake_sleepers() noexcept {
  const int n = sleepers_.load(std::memory_order_seq_cst);
  if (n <= 0) return;
  const auto tokens = static_cast<std::uint64_t>(n);
  [[maybe_unused]] const ssize_t w = ::write(wake_fd_, &tokens, sizeof tokens);
}

void Context::hold_progress() {
  std::lock_guard lock(helper_mu_);
  if (holds_++ == 0) {
    if (!helper_.joinable()) {
      helper_ = std::thread([this] { progress_loop(); });
      pthread_setname_np(helper_.native_handle(), "tessera-ucx-prg");
    }
    helper_cv_.notify_all();
  }
}

void Context::release_progress() noexcept {
  std::lock_guard lock(helper_mu_);
  --holds_;
}

// Progresses until the worker is idle, then sleeps on its fd (at most 1 ms, to see the holds
// end); the caller's own waits keep their deadlines and error handling.
void Context::progress_loop() noexcept {
  std::unique_lock hl(helper_mu_);
  for (;;) {
    helper_cv_.wait(hl, [&] { return helper_stop_ || holds_ > 0; });
    if (helper_stop_) return;
    hl.unlock();
    bool progressed = false, armed = false;
    {
      std::lock_guard lock(mu_);
      while (ucp_worker_progress(worker_) != 0) progressed = true;
      armed = ucp_worker_arm(worker_) == UCS_OK;
    }
    if (progressed) wake_sleepers();
    if (armed) {
      epoll_event ev[1];
      ::epoll_wait(helper_epfd_, ev, 1, 1);
    } else if (!progressed) {
      // The worker will not arm (something it holds, e.g. an unexpected message, counts as an
      // event) yet progress found nothing to do: do not spin on a core the ranks compute on.
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    hl.lock();
  }
}

std::string Context::abort_reason() {
  std::lock_guard lock(abort_mu_);
  if (abort_.empty()) abort_ = store_.abort_reason();
  return abort_;
}

void Context::abandon(const std::string& why) {
  {
    std::lock_guard lock(abort_mu_);
    if (abort_.empty()) abort_ = why;
  }
  wake_sleepers();
}

std::string Context::peer_error(int world_rank) {
  std::lock_guard lock(mu_);
  return peer_errors_[static_cast<std::size_t>(world_rank)];
}

std::string Context::wait_for(std::span<Op* const> ops, std::chrono::milliseconds timeout) {
  // Nothing open (no ops, or small sends that completed when posted): no poll. Only this
  // thread updates these ops, always under the lock it took itself.
  if (std::none_of(ops.begin(), ops.end(), [](const Op* op) {
        return op->state == Op::State::Queued || op->state == Op::State::Active;
      }))
    return "";
  // A message is often a few hundred ns away: the first polls read no clock (the deadline
  // counts from the first read, a few µs late at most). Not when polls yield the core: a yield
  // can last a scheduler time slice, and the deadline must count from the start.
  if (!yield_when_polling_)
    for (int i = 0; i < 64; ++i)
      if (test(ops)) return "";
  const auto now = Clock::now();
  return wait_from(ops, now, now + timeout);
}

std::string Context::wait(std::span<Op* const> ops, Clock::time_point deadline) {
  return wait_from(ops, Clock::now(), deadline);
}

std::string Context::wait_from(std::span<Op* const> ops, Clock::time_point start,
                               Clock::time_point deadline) {
  const auto spin_until = start + spin_phase();
  bool blocking = false;
  for (unsigned idle = 0;; ++idle) {
    if (test(ops)) return "";
    // While spinning the clock is read on every 8th poll (on every one when polls yield);
    // once blocking, on every pass.
    if (!blocking && !yield_when_polling_ && (idle & 7) != 7) continue;
    const auto now = Clock::now();
    const bool spinning = now < spin_until;
    blocking = !spinning;
    if ((idle & 511) == 511 || !spinning) {
      const std::string a = abort_reason();
      if (!a.empty()) return "abort:" + a;
    }
    if (now >= deadline) {
      // A peer whose endpoint failed may simply have exited after its last message; the
      // deadline (or the job's abort flag) decides, and the timeout mentions the failure.
      std::lock_guard lock(mu_);
      std::string notes;
      for (Op* op : ops)
        if ((op->state == Op::State::Queued || op->state == Op::State::Active) &&
            !peer_errors_[static_cast<std::size_t>(op->peer)].empty() &&
            notes.find(peer_errors_[static_cast<std::size_t>(op->peer)]) == std::string::npos)
          notes += "; " + peer_errors_[static_cast<std::size_t>(op->peer)];
      return "timeout" + notes;
    }
    if (spinning) {
      if (yield_when_polling_) sched_yield();
      continue;
    }
    // Counted as a sleeper before the last look at the ops: another thread that completes them
    // after that look (under the lock) sees the count and writes the wake fd.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    bool done = false;
    {
      std::lock_guard lock(mu_);
      if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) {  // events came in: progress again
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        continue;
      }
      done = true;
      for (Op* op : ops) {
        update_locked(*op);
        if (op->state == Op::State::Queued || op->state == Op::State::Active) done = false;
      }
    }
    if (!done) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
      epoll_event evs[3];
      ::epoll_wait(epfd_, evs, 3, static_cast<int>(std::min<long long>(left + 1, 100)));
      std::uint64_t token = 0;  // one of the tokens written for the sleepers, if any
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &token, sizeof token);
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void Context::cancel(std::span<Op* const> ops) noexcept {
  std::lock_guard lock(mu_);
  failed_ = true;
  for (Op* op : ops) {
    if (op->state == Op::State::Queued) {  // never posted
      op->state = Op::State::Failed;
    } else if (op->state == Op::State::Active) {
      ucp_request_cancel(worker_, op->req);
      const auto deadline = Clock::now() + std::chrono::milliseconds(200);
      while (ucp_request_check_status(op->req) == UCS_INPROGRESS && Clock::now() < deadline)
        ucp_worker_progress(worker_);
      ucp_request_free(op->req);
      op->req = nullptr;
      op->state = Op::State::Failed;
    }
  }
}

}  // namespace tessera::comm::ucx
