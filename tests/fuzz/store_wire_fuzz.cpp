// Fuzz target: the TCP store's wire protocol as its server decodes it (comm::TcpStoreServer).
// Each input gets a fresh server listening on a per-process Unix-domain socket (the server reads
// a byte stream and cannot tell; no TCP ports pile up in TIME_WAIT) and one client connection
// that sends the bytes, half-closes and reads the replies until the server closes or falls
// silent. The first input byte picks the mode: bit 0 clear sends a valid greeting first (bit 1:
// as a rank connection) so the rest reaches the request decoder; bit 0 set sends the rest as is
// (the greeting decoder). Bit 2 gives the server a 5 ms heartbeat deadline and leaves a lost rank
// to the host (abort_on_rank_lost=false), so Heartbeat requests reach the deadline monitor; a rank
// reported lost twice is a finding.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>

#include "fuzz_support.hpp"
#include "tessera/comm/tcp_store.hpp"

namespace {

constexpr const char* kToken = "fuzz-token";

void put_u32(std::string& out, std::uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

// Magic, then one frame: version, token, rank, rank-connection flag (docs/launching.md).
std::string greeting(bool rank_connection) {
  std::string body;
  put_u32(body, 2);  // protocol version
  put_u32(body, static_cast<std::uint32_t>(std::strlen(kToken)));
  body += kToken;
  const std::int64_t rank = 0;
  body.append(reinterpret_cast<const char*>(&rank), 8);
  body.push_back(rank_connection ? 1 : 0);
  std::string out;
  put_u32(out, 0x52535354);  // "TSSR"
  put_u32(out, static_cast<std::uint32_t>(body.size()));
  return out + body;
}

sockaddr_un address(socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = "tessera-fuzz-store-" + std::to_string(::getpid());  // abstract namespace
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string bytes;
  if (data[0] % 2 == 0) bytes = greeting((data[0] & 2) != 0);
  bytes.append(reinterpret_cast<const char*>(data) + 1, size - 1);

  socklen_t len = 0;
  const sockaddr_un addr = address(len);
  const int listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0 || ::bind(listen_fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0 ||
      ::listen(listen_fd, 4) != 0)
    tessera::fuzz::finding("store_wire", std::string("cannot listen: ") + std::strerror(errno));
  return tessera::fuzz::run_one("store_wire", [&] {
    tessera::comm::TcpStoreServer::Options opt;
    opt.token = kToken;
    opt.adopt_fd = listen_fd;  // the server closes it
    opt.log = [](const std::string&) {};
    std::atomic<int> lost{0};  // the input's one connection greets as rank 0 at most
    if (data[0] & 4) {
      opt.heartbeat_timeout = std::chrono::milliseconds(5);
      opt.abort_on_rank_lost = false;
      opt.on_rank_lost = [&lost](int rank, const std::string& why) {
        if (++lost > 1)
          tessera::fuzz::finding("store_wire",
                                 "rank " + std::to_string(rank) + " reported lost twice: " + why);
      };
    }
    tessera::comm::TcpStoreServer server(std::move(opt));
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0)
      tessera::fuzz::finding("store_wire", std::string("cannot connect: ") + std::strerror(errno));
    // Send while draining replies (a long input must not deadlock on full socket buffers).
    std::size_t sent = 0;
    bool half_closed = false;
    char buf[4096];
    for (;;) {
      pollfd p{fd, static_cast<short>(POLLIN | (half_closed ? 0 : POLLOUT)), 0};
      if (::poll(&p, 1, 20) <= 0) break;  // silent for 20 ms: a request waits on a missing key
      if (p.revents & POLLIN) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;  // the server closed the connection
      } else if (p.revents & POLLOUT) {
        const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n < 0) break;  // the server dropped the connection
        sent += static_cast<std::size_t>(n);
        if (sent == bytes.size()) {
          ::shutdown(fd, SHUT_WR);
          half_closed = true;
        }
      } else {
        break;  // hang-up or error
      }
    }
    ::close(fd);
  });
}
