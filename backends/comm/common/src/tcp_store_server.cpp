// TcpStoreServer: accepts clients, checks their greeting and token, serves set/get/add/check/erase,
// watches the ranks' heartbeat deadlines, and reports a rank lost (connection closed without
// goodbye, or heartbeats stopped): a log line, on_rank_lost, and by default a job-wide abort.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "tessera/comm/tcp_store.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "wire.hpp"

namespace tessera::comm {

namespace {
using Clock = std::chrono::steady_clock;
}

struct TcpStoreServer::State {
  Options opt;
  int listen_fd = -1;
  int port = 0;
  int wake_pipe[2] = {-1, -1};
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> kv;
  std::set<int> fds;                       // open connections (for shutdown)
  std::map<int, int> rank_fds;             // rank -> its open rank connection, while not lost
  std::map<int, Clock::time_point> beats;  // last heartbeat of each such rank that sent one
  std::vector<std::pair<int, std::string>> lost;  // lost ranks not yet reported
  bool stopping = false;
  std::thread acceptor;
  std::vector<std::thread> workers;
  std::condition_variable monitor_cv;
  std::thread monitor;  // heartbeat deadlines (only with opt.heartbeat_timeout)

  void log(const std::string& m) {
    if (opt.log) opt.log(m);
    else
      core::report(core::ReportLevel::Warning, "tessera store: " + m);
  }
  void set_abort_locked(const std::string& reason) {
    if (kv.count(kAbortKey) == 0) kv[kAbortKey] = reason;
    cv.notify_all();
  }
  /// Whether `fd` is still the rank connection of `rank` (not lost, not replaced).
  bool owns_locked(int rank, int fd) const {
    auto it = rank_fds.find(rank);
    return it != rank_fds.end() && it->second == fd;
  }
  /// Forgets a lost rank and queues its report: report_lost() runs it once the lock is released,
  /// so on_rank_lost may call back into the server.
  void lose_locked(int rank, const std::string& why) {
    rank_fds.erase(rank);
    beats.erase(rank);
    if (opt.abort_on_rank_lost) set_abort_locked(why);
    lost.emplace_back(rank, why);
    cv.notify_all();
  }
  void report_lost() {
    std::vector<std::pair<int, std::string>> reports;
    {
      std::lock_guard lock(mu);
      reports.swap(lost);
    }
    for (const auto& [rank, why] : reports) {
      log(why);
      if (opt.on_rank_lost) opt.on_rank_lost(rank, why);
    }
  }
  void watch_deadlines();
  void serve(int fd);
  void handle(int fd, const std::string& body, std::string& reply, bool& bye);
};

namespace {
// A Get deadline beyond this many milliseconds (about 100 years) is no deadline: now + it would
// overflow the clock's nanoseconds (found by tests/fuzz/store_wire_fuzz.cpp).
constexpr std::int64_t kForeverMs = std::int64_t{100} * 365 * 24 * 3600 * 1000;
}  // namespace

void TcpStoreServer::State::handle(int fd, const std::string& body, std::string& reply, bool& bye) {
  (void)fd;
  wire::Reader r{body};
  wire::Writer w;
  const auto op = static_cast<wire::Op>(r.u8());
  switch (op) {
    case wire::Op::Set: {
      std::string k = r.str(), v = r.str();
      std::lock_guard lock(mu);
      kv[k] = std::move(v);
      cv.notify_all();
      w.u8(static_cast<std::uint8_t>(wire::Reply::Ok));
      break;
    }
    case wire::Op::Get: {
      const std::string k = r.str();
      const std::int64_t timeout_ms = r.i64();  // < 0: no deadline (abort watchers)
      std::unique_lock lock(mu);
      // A job abort releases every waiter (the abort watchers wait for that very key).
      auto ready = [&] { return stopping || kv.count(k) > 0 || kv.count(kAbortKey) > 0; };
      if (timeout_ms < 0 || timeout_ms > kForeverMs) cv.wait(lock, ready);
      else cv.wait_until(lock, Clock::now() + std::chrono::milliseconds(timeout_ms), ready);
      auto it = kv.find(k);
      if (it == kv.end() && kv.count(kAbortKey)) {
        w.u8(static_cast<std::uint8_t>(wire::Reply::Error));
        w.str(kv[kAbortKey]);
      } else if (it == kv.end()) {
        w.u8(static_cast<std::uint8_t>(wire::Reply::Missing));
      } else {
        w.u8(static_cast<std::uint8_t>(wire::Reply::Ok));
        w.str(it->second);
      }
      break;
    }
    case wire::Op::Add: {
      const std::string k = r.str();
      const std::int64_t d = r.i64();
      std::lock_guard lock(mu);
      std::int64_t v = 0;
      auto it = kv.find(k);
      if (it != kv.end()) {
        // A Set may have stored anything there; a malformed value drops the connection.
        try {
          v = std::stoll(it->second);
        } catch (const std::logic_error&) {  // invalid_argument, out_of_range
          throw std::runtime_error(detail::cat("add to key '", k, "', which holds '", it->second,
                                               "', not a 64-bit integer"));
        }
      }
      // Signed overflow would be undefined (found by tests/fuzz/store_wire_fuzz.cpp): refused.
      if (__builtin_add_overflow(v, d, &v))
        throw std::runtime_error(detail::cat("add of ", d, " to key '", k, "' overflows 64 bits"));
      kv[k] = std::to_string(v);
      cv.notify_all();
      w.u8(static_cast<std::uint8_t>(wire::Reply::Ok));
      w.i64(v);
      break;
    }
    case wire::Op::Check: {
      const std::string k = r.str();
      std::lock_guard lock(mu);
      w.u8(static_cast<std::uint8_t>(kv.count(k) ? wire::Reply::Ok : wire::Reply::Missing));
      break;
    }
    case wire::Op::Erase: {
      const std::string k = r.str();
      std::lock_guard lock(mu);
      kv.erase(k);
      w.u8(static_cast<std::uint8_t>(wire::Reply::Ok));
      break;
    }
    case wire::Op::Heartbeat: {
      const int rank = static_cast<int>(r.i64());
      std::lock_guard lock(mu);
      // Only a rank whose rank connection is open has a deadline; a late beat of a lost rank is
      // ignored (it was reported once and stays lost).
      if (rank_fds.count(rank)) beats[rank] = Clock::now();
      w.u8(static_cast<std::uint8_t>(wire::Reply::Ok));
      break;
    }
    case wire::Op::Bye:
      bye = true;
      w.u8(static_cast<std::uint8_t>(wire::Reply::Ok));
      break;
    default:
      throw std::runtime_error(detail::cat("unknown request code ", static_cast<int>(op)));
  }
  reply = std::move(w.buf);
}

void TcpStoreServer::State::serve(int fd) {
  const std::string who = wire::peer_name(fd);
  int rank = -1;
  bool rank_conn = false, bye = false, greeted = false;
  try {
    // Greeting: magic, version, token, rank, flags.
    std::uint32_t magic = 0;
    if (!wire::recv_exact(fd, &magic, 4)) throw std::runtime_error("closed before greeting");
    if (magic != wire::kMagic)
      throw std::runtime_error(detail::cat("not a tessera store client (greeting starts with 0x",
                                           std::hex, magic, ")"));
    std::string body;
    if (!wire::recv_frame(fd, body)) throw std::runtime_error("closed during greeting");
    wire::Reader r{body};
    const std::uint32_t version = r.u32();
    const std::string token = r.str();
    rank = static_cast<int>(r.i64());
    rank_conn = r.u8() != 0;
    wire::Writer w;
    std::string refusal;
    if (version != wire::kVersion)
      refusal = detail::cat("protocol version ", version, " (server speaks ", wire::kVersion, ")");
    else if (token != opt.token)
      refusal = "wrong token: every rank must use this job's token (TESSERA_RDZV_TOKEN)";
    if (refusal.empty() && rank_conn) {
      std::lock_guard lock(mu);
      if (rank_fds.count(rank))
        refusal = detail::cat("rank ", rank, " joined twice");
      else
        rank_fds[rank] = fd;
    }
    if (!refusal.empty()) {
      rank_conn = false;
      w.u8(static_cast<std::uint8_t>(wire::Reply::Error));
      w.str("store at port " + std::to_string(port) + " refused the join: " + refusal);
      wire::send_frame(fd, w.buf);
      throw std::runtime_error(rank >= 0 ? detail::cat("refused rank ", rank, ": ", refusal)
                                         : "refused a client (a launcher or a tool): " + refusal);
    }
    w.u8(static_cast<std::uint8_t>(wire::Reply::Ok));
    wire::send_frame(fd, w.buf);
    greeted = true;
    while (!bye) {
      if (!wire::recv_frame(fd, body)) break;
      std::string reply;
      handle(fd, body, reply, bye);
      if (bye && rank_conn) {  // gone before the client hears the reply, so counts are exact
        std::lock_guard lock(mu);
        if (owns_locked(rank, fd)) {
          rank_fds.erase(rank);
          beats.erase(rank);
        }
        rank_conn = false;
        cv.notify_all();
      }
      wire::send_frame(fd, reply);
    }
  } catch (const std::exception& e) {
    bool quiet;
    {
      std::lock_guard lock(mu);
      // A watcher closing with its abort reply unread is normal, and so is a lost rank's
      // connection failing after the server shut it down; protocol errors are not.
      quiet = stopping || (greeted && !(rank_conn && owns_locked(rank, fd)));
    }
    if (!quiet) log(detail::cat("dropped connection from ", who, ": ", e.what()));
  }
  {
    std::lock_guard lock(mu);
    if (rank_conn && owns_locked(rank, fd)) {
      if (!bye && !stopping) {
        lose_locked(rank, detail::cat("rank ", rank, " exited or lost its connection to the store ",
                                      "without closing its communicator (killed or crashed?)"));
      } else {
        rank_fds.erase(rank);
        beats.erase(rank);
      }
      cv.notify_all();
    }
    fds.erase(fd);
    ::close(fd);
  }
  report_lost();
}

void TcpStoreServer::State::watch_deadlines() {
  const auto timeout = opt.heartbeat_timeout;
  // Checked four times per deadline: a rank is found lost at most a quarter late.
  const auto period = std::clamp<std::chrono::milliseconds>(
      timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  std::unique_lock lock(mu);
  while (!stopping) {
    monitor_cv.wait_for(lock, period, [&] { return stopping; });
    if (stopping) break;
    const auto now = Clock::now();
    std::vector<std::pair<int, double>> late;  // rank, seconds since its last heartbeat
    for (const auto& [rank, t] : beats) {
      const std::chrono::duration<double> silent = now - t;
      if (silent > timeout) late.emplace_back(rank, silent.count());
    }
    for (const auto& [rank, silent_s] : late) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", silent_s);
      const int fd = rank_fds.at(rank);
      lose_locked(rank, detail::cat("rank ", rank, " stopped answering: no heartbeat for ", secs,
                                    " s (stopped, hung or its host unreachable)"));
      // As if its connection had closed: a rank that wakes up later finds itself cut off instead
      // of acting in a job that has gone on without it.
      ::shutdown(fd, SHUT_RDWR);
    }
    if (!late.empty()) {
      lock.unlock();
      report_lost();
      lock.lock();
    }
  }
}

TcpStoreServer::TcpStoreServer(Options options) : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.opt = std::move(options);
  if (s.opt.adopt_fd >= 0) {
    s.listen_fd = s.opt.adopt_fd;
    s.port = wire::local_port(s.listen_fd);
  } else {
    s.listen_fd = wire::listen_on(s.opt.host, s.opt.port, s.port);
  }
  if (::pipe(s.wake_pipe) != 0) throw BackendError("store", errno, "pipe() failed");
  if (s.opt.heartbeat_timeout.count() > 0)
    s.monitor = std::thread([st = state_] { st->watch_deadlines(); });
  s.acceptor = std::thread([st = state_] {
    for (;;) {
      pollfd p[2] = {{st->listen_fd, POLLIN, 0}, {st->wake_pipe[0], POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) continue;
      if (p[1].revents) return;
      const int fd = ::accept4(st->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(st->mu);
      if (st->stopping) {
        ::close(fd);
        return;
      }
      st->fds.insert(fd);
      st->workers.emplace_back([st, fd] { st->serve(fd); });
    }
  });
}

TcpStoreServer::~TcpStoreServer() {
  State& s = *state_;
  {
    std::lock_guard lock(s.mu);
    s.stopping = true;
    for (int fd : s.fds) ::shutdown(fd, SHUT_RDWR);
    s.cv.notify_all();
    s.monitor_cv.notify_all();
  }
  if (s.monitor.joinable()) s.monitor.join();
  char c = 1;
  if (::write(s.wake_pipe[1], &c, 1) < 0) { /* the acceptor also sees stopping */ }
  s.acceptor.join();
  std::vector<std::thread> ws;
  {
    std::lock_guard lock(s.mu);
    ws.swap(s.workers);
  }
  for (auto& t : ws) t.join();
  ::close(s.listen_fd);
  ::close(s.wake_pipe[0]);
  ::close(s.wake_pipe[1]);
}

int TcpStoreServer::port() const noexcept { return state_->port; }

bool TcpStoreServer::wait_until_ranks_left(std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mu);
  return state_->cv.wait_for(lock, timeout, [&] { return state_->rank_fds.empty(); });
}

int TcpStoreServer::ranks_connected() const {
  std::lock_guard lock(state_->mu);
  return static_cast<int>(state_->rank_fds.size());
}

std::set<int> TcpStoreServer::ranks() const {
  std::lock_guard lock(state_->mu);
  std::set<int> out;
  for (const auto& [rank, fd] : state_->rank_fds) out.insert(rank);
  return out;
}

std::optional<std::string> TcpStoreServer::get(const std::string& key) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->kv.find(key);
  if (it == state_->kv.end()) return std::nullopt;
  return it->second;
}

void TcpStoreServer::set(const std::string& key, const std::string& value) {
  std::lock_guard lock(state_->mu);
  state_->kv[key] = value;
  state_->cv.notify_all();
}

std::string TcpStoreServer::abort_reason() const {
  std::lock_guard lock(state_->mu);
  auto it = state_->kv.find(kAbortKey);
  return it == state_->kv.end() ? "" : it->second;
}

void TcpStoreServer::abort(const std::string& reason) {
  std::lock_guard lock(state_->mu);
  state_->set_abort_locked(reason);
}

}  // namespace tessera::comm
