// TcpStoreClient: greeting, requests over one serialised connection, the abort watcher, and a
// rank's heartbeat thread.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <thread>

#include "tessera/comm/tcp_store.hpp"
#include "tessera/core/error.hpp"
#include "wire.hpp"

namespace tessera::comm {

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kIoSlack = std::chrono::seconds(30);  // server reply beyond the request's own wait

bool wait_readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    const int rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (rc < 0 && errno == EINTR) continue;
    return rc > 0;
  }
}
}  // namespace

int TcpStoreClient::open_connection(bool rank_connection) {
  const int fd = wire::connect_to(options_.host, options_.port, Clock::now() + options_.connect_timeout);
  try {
    wire::Writer w;
    w.u32(wire::kMagic);
    wire::send_all(fd, w.buf);
    wire::Writer g;
    g.u32(wire::kVersion);
    g.str(options_.token);
    g.i64(options_.rank);
    g.u8(rank_connection ? 1 : 0);
    wire::send_frame(fd, g.buf);
    std::string body;
    if (!wait_readable(fd, options_.connect_timeout) || !wire::recv_frame(fd, body))
      throw std::runtime_error("no answer to the greeting");
    wire::Reader r{body};
    if (static_cast<wire::Reply>(r.u8()) != wire::Reply::Ok) throw InvalidArgument(r.str());
  } catch (const InvalidArgument&) {
    ::close(fd);
    throw;
  } catch (const std::exception& e) {
    ::close(fd);
    throw BackendError("store", 0, detail::cat("joining the store at ", address(), ": ", e.what()));
  }
  return fd;
}

/// The heartbeat connection (greeted as a non-rank, so closing it never counts as a death) and
/// the thread that sends Heartbeat(rank) on it every interval until stopped.
struct TcpStoreClient::Heartbeat {
  int fd = -1;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;

  void beat(int rank, std::chrono::milliseconds interval) {
    wire::Writer w;
    w.u8(static_cast<std::uint8_t>(wire::Op::Heartbeat));
    w.i64(rank);
    std::unique_lock lock(mu);
    while (!stop) {
      lock.unlock();
      try {
        wire::send_frame(fd, w.buf);
        std::string reply;
        // The server answers at once; one that does not is itself in trouble (the abort watcher
        // reports a lost store), and beating on would only queue frames.
        if (!wait_readable(fd, kIoSlack) || !wire::recv_frame(fd, reply)) return;
      } catch (const std::exception&) {
        return;  // the store is gone: the abort watcher says so to whoever waits on it
      }
      lock.lock();
      cv.wait_for(lock, interval, [&] { return stop; });
    }
  }
};

void TcpStoreClient::start_heartbeats() {
  const int fd = open_connection(false);
  heartbeat_ = std::make_unique<Heartbeat>();
  heartbeat_->fd = fd;
  heartbeat_->thread =
      std::thread([hb = heartbeat_.get(), rank = options_.rank,
                   interval = options_.heartbeat_interval] { hb->beat(rank, interval); });
}

void TcpStoreClient::stop_heartbeats() noexcept {
  if (!heartbeat_) return;
  {
    std::lock_guard lock(heartbeat_->mu);
    heartbeat_->stop = true;
  }
  heartbeat_->cv.notify_all();
  ::shutdown(heartbeat_->fd, SHUT_RDWR);  // wakes the thread if it waits for a reply
  if (heartbeat_->thread.joinable()) heartbeat_->thread.join();
  ::close(heartbeat_->fd);
  heartbeat_.reset();
}

TcpStoreClient::TcpStoreClient(Options options) : options_(std::move(options)) {
  fd_ = open_connection(options_.rank >= 0);
  try {
    watch_fd_ = open_connection(false);
    wire::Writer w;
    w.u8(static_cast<std::uint8_t>(wire::Op::Get));
    w.str(kAbortKey);
    w.i64(-1);
    wire::send_frame(watch_fd_, w.buf);
    if (options_.rank >= 0 && options_.heartbeat_interval.count() > 0) start_heartbeats();
  } catch (...) {
    stop_heartbeats();
    if (watch_fd_ >= 0) ::close(watch_fd_);
    ::close(fd_);
    throw;
  }
}

TcpStoreClient::~TcpStoreClient() {
  stop_heartbeats();  // first: a goodbye followed by a beat would be a rank the server forgot
  try {
    wire::Writer w;
    w.u8(static_cast<std::uint8_t>(wire::Op::Bye));
    request(w.buf, std::chrono::seconds(5));
  } catch (...) {
    // The server may be gone already; nothing to report at teardown.
  }
  ::close(fd_);
  ::close(watch_fd_);
}

std::string TcpStoreClient::address() const {
  return options_.host + ":" + std::to_string(options_.port);
}

std::string TcpStoreClient::request(const std::string& body, std::chrono::milliseconds io_timeout) {
  std::lock_guard lock(mu_);
  try {
    wire::send_frame(fd_, body);
    std::string reply;
    if (!wait_readable(fd_, io_timeout))
      throw std::runtime_error(detail::cat("no reply within ", io_timeout.count(), " ms"));
    if (!wire::recv_frame(fd_, reply)) throw std::runtime_error("the store closed the connection");
    return reply;
  } catch (const std::runtime_error& e) {
    throw BackendError("store", 0, detail::cat("rank ", options_.rank, ": lost the store at ", address(),
                                               " (", e.what(),
                                               "); the process hosting it has probably exited"));
  }
}

void TcpStoreClient::set(const std::string& key, const std::string& value) {
  wire::Writer w;
  w.u8(static_cast<std::uint8_t>(wire::Op::Set));
  w.str(key);
  w.str(value);
  request(w.buf, kIoSlack);
}

std::string TcpStoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  wire::Writer w;
  w.u8(static_cast<std::uint8_t>(wire::Op::Get));
  w.str(key);
  w.i64(timeout.count());
  const std::string reply = request(w.buf, timeout + kIoSlack);
  wire::Reader r{reply};
  const auto status = static_cast<wire::Reply>(r.u8());
  if (status == wire::Reply::Error)
    throw BackendError("store", 125, detail::cat("rank ", options_.rank, ": waiting for key '", key,
                                                 "': the job was aborted: ", r.str()));
  if (status != wire::Reply::Ok)
    throw TimeoutError("store", detail::cat("rank ", options_.rank, ": key '", key, "' did not appear in the store at ",
                                            address(), " within ", timeout.count(), " ms"));
  return r.str();
}

std::int64_t TcpStoreClient::add(const std::string& key, std::int64_t delta) {
  wire::Writer w;
  w.u8(static_cast<std::uint8_t>(wire::Op::Add));
  w.str(key);
  w.i64(delta);
  const std::string reply = request(w.buf, kIoSlack);
  wire::Reader r{reply};
  r.u8();
  return r.i64();
}

bool TcpStoreClient::check(const std::string& key) {
  wire::Writer w;
  w.u8(static_cast<std::uint8_t>(wire::Op::Check));
  w.str(key);
  const std::string reply = request(w.buf, kIoSlack);
  return static_cast<wire::Reply>(reply.at(0)) == wire::Reply::Ok;
}

void TcpStoreClient::erase(const std::string& key) {
  wire::Writer w;
  w.u8(static_cast<std::uint8_t>(wire::Op::Erase));
  w.str(key);
  request(w.buf, kIoSlack);
}

void TcpStoreClient::abort(const std::string& reason) noexcept {
  try {
    // Set only when unset: check first (a race only changes which of two reasons wins).
    if (!check(kAbortKey)) set(kAbortKey, reason);
  } catch (...) {
    // Aborting is best effort: the store may be gone, which the others notice by themselves.
  }
}

std::string TcpStoreClient::abort_reason() {
  std::lock_guard lock(watch_mu_);
  if (!abort_reason_.empty()) return abort_reason_;
  if (!wait_readable(watch_fd_, std::chrono::milliseconds(0))) return "";
  try {
    std::string body;
    if (!wire::recv_frame(watch_fd_, body)) throw std::runtime_error("closed");
    wire::Reader r{body};
    abort_reason_ = static_cast<wire::Reply>(r.u8()) == wire::Reply::Ok
                        ? r.str()
                        : "the store is shutting down";
  } catch (const std::exception&) {
    abort_reason_ = detail::cat("lost the connection to the store at ", address(),
                                " (the process hosting it, rank 0 or the launcher, has exited, or the network to it failed)");
  }
  return abort_reason_;
}

}  // namespace tessera::comm
