// Socket helpers and the framing of the store protocol (length-prefixed frames of typed fields).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tessera::comm::wire {

/// Greeting a client sends first: magic, protocol version, token, rank, flags.
inline constexpr std::uint32_t kMagic = 0x52535354;  // "TSSR" little-endian
/// 2 added Heartbeat: a job mixing builds is refused at the greeting rather than half watched.
inline constexpr std::uint32_t kVersion = 2;
/// Frames larger than this are garbage: the connection is dropped.
inline constexpr std::uint32_t kMaxFrameBytes = 64u << 20;

/// Heartbeat(i64 rank): the rank is alive (sent on a connection of its own, see TcpStoreClient).
enum class Op : std::uint8_t {
  Set = 1,
  Get = 2,
  Add = 3,
  Check = 4,
  Erase = 5,
  Bye = 6,
  Heartbeat = 7,
};
enum class Reply : std::uint8_t { Ok = 0, Missing = 1, Error = 2 };

/// Appends fields to a frame body.
struct Writer {
  std::string buf;
  void u8(std::uint8_t v) { buf.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) { buf.append(reinterpret_cast<const char*>(&v), 4); }
  void i64(std::int64_t v) { buf.append(reinterpret_cast<const char*>(&v), 8); }
  void str(const std::string& s) {
    u32(static_cast<std::uint32_t>(s.size()));
    buf += s;
  }
};

/// Reads fields from a frame body; throws std::runtime_error on a short or malformed body.
struct Reader {
  const std::string& buf;
  std::size_t pos = 0;
  std::uint8_t u8();
  std::uint32_t u32();
  std::int64_t i64();
  std::string str();
};

/// Writes all of `data` (throws std::runtime_error naming errno on failure).
void send_all(int fd, const std::string& data);
/// Reads exactly `n` bytes; returns false on a clean EOF before the first byte.
bool recv_exact(int fd, void* out, std::size_t n);
/// Sends one frame (u32 length + body).
void send_frame(int fd, const std::string& body);
/// Reads one frame; false on clean EOF. Throws on a frame over kMaxFrameBytes.
bool recv_frame(int fd, std::string& body);

/// Listens on host:port (port 0 = any); returns the fd and sets `bound_port`.
int listen_on(const std::string& host, int port, int& bound_port);
/// The local port of a bound socket.
int local_port(int fd);
/// Connects to host:port, retrying until `deadline`; throws BackendError naming the address.
int connect_to(const std::string& host, int port, std::chrono::steady_clock::time_point deadline);
/// "127.0.0.1:12345" of the peer of a connected socket.
std::string peer_name(int fd);

}  // namespace tessera::comm::wire
