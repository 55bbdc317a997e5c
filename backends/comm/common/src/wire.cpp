// Socket helpers and store-protocol framing (POSIX sockets only).
#include "wire.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "tessera/core/error.hpp"

namespace tessera::comm::wire {

namespace {
void need(const Reader& r, std::size_t n) {
  if (r.pos + n > r.buf.size())
    throw std::runtime_error(detail::cat("malformed frame: needs ", r.pos + n, " bytes, has ",
                                         r.buf.size()));
}
}  // namespace

std::uint8_t Reader::u8() {
  need(*this, 1);
  return static_cast<std::uint8_t>(buf[pos++]);
}
std::uint32_t Reader::u32() {
  need(*this, 4);
  std::uint32_t v;
  std::memcpy(&v, buf.data() + pos, 4);
  pos += 4;
  return v;
}
std::int64_t Reader::i64() {
  need(*this, 8);
  std::int64_t v;
  std::memcpy(&v, buf.data() + pos, 8);
  pos += 8;
  return v;
}
std::string Reader::str() {
  const std::uint32_t n = u32();
  need(*this, n);
  std::string s = buf.substr(pos, n);
  pos += n;
  return s;
}

void send_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(detail::cat("send failed: ", std::strerror(errno)));
    done += static_cast<std::size_t>(n);
  }
}

bool recv_exact(int fd, void* out, std::size_t n) {
  auto* p = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::recv(fd, p + done, n - done, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && done == 0) return false;
    if (r == 0) throw std::runtime_error(detail::cat("connection closed after ", done, " of ", n, " bytes"));
    if (r < 0) throw std::runtime_error(detail::cat("recv failed: ", std::strerror(errno)));
    done += static_cast<std::size_t>(r);
  }
  return true;
}

void send_frame(int fd, const std::string& body) {
  Writer w;
  w.u32(static_cast<std::uint32_t>(body.size()));
  w.buf += body;
  send_all(fd, w.buf);
}

bool recv_frame(int fd, std::string& body) {
  std::uint32_t n = 0;
  if (!recv_exact(fd, &n, 4)) return false;
  if (n > kMaxFrameBytes)
    throw std::runtime_error(detail::cat("frame of ", n, " bytes exceeds the ", kMaxFrameBytes >> 20,
                                         " MiB limit"));
  body.resize(n);
  if (n > 0 && !recv_exact(fd, body.data(), n))
    throw std::runtime_error("connection closed inside a frame");
  return true;
}

namespace {
addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string p = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), p.c_str(), &hints, &res);
  if (rc != 0)
    throw InvalidArgument(detail::cat("store address '", host, ":", port, "': ", gai_strerror(rc),
                                      "; check MASTER_ADDR"));
  return res;
}
}  // namespace

int listen_on(const std::string& host, int port, int& bound_port) {
  addrinfo* res = resolve(host, port, true);
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
    const int e = errno;
    ::freeaddrinfo(res);
    ::close(fd);
    throw BackendError("store", e, detail::cat("cannot listen on ", host, ":", port, ": ", std::strerror(e),
                                               e == EADDRINUSE ? " (choose another MASTER_PORT)" : ""));
  }
  ::freeaddrinfo(res);
  bound_port = local_port(fd);
  return fd;
}

int local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

int connect_to(const std::string& host, int port, std::chrono::steady_clock::time_point deadline) {
  addrinfo* res = resolve(host, port, false);
  auto backoff = std::chrono::milliseconds(2);
  int last = 0;
  for (;;) {
    const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    last = errno;
    ::close(fd);
    if (std::chrono::steady_clock::now() + backoff > deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  ::freeaddrinfo(res);
  throw TimeoutError("store", detail::cat("could not reach the store at ", host, ":", port, ": ",
                                          std::strerror(last),
                                          "; is rank 0 (or the launcher) running with the same "
                                          "MASTER_ADDR and MASTER_PORT?"));
}

std::string peer_name(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return detail::cat(ip, ":", ntohs(a.sin_port));
}

}  // namespace tessera::comm::wire
