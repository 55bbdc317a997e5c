// The TCP key-value store and the env:// rendezvous: set/get/add/wait across threads and
// processes on loopback, the token, garbage on the port, deadlines naming what is missing,
// reading torchrun / Open MPI / Slurm variables.
#include <sys/socket.h>
#include <poll.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "comm/conformance.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/comm/tcp_store.hpp"

namespace {

using namespace tessera;
using namespace std::chrono_literals;
using test::conformance::missing_from;

struct Logged {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> fn() {
    return [this](const std::string& l) {
      std::lock_guard lock(mu);
      lines.push_back(l);
    };
  }
  std::string all() {
    std::lock_guard lock(mu);
    std::string s;
    for (auto& l : lines) s += l + "\n";
    return s;
  }
  /// The log once it mentions `what`, or as it is after 5 s: the server logs from its own thread,
  /// after it has answered the client.
  std::string once_it_says(const std::string& what) {
    for (int i = 0; i < 500; ++i) {
      const std::string s = all();
      if (s.find(what) != std::string::npos) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return all();
  }
};

comm::TcpStoreClient::Options client_opts(int port, int rank, std::string token = "tok") {
  comm::TcpStoreClient::Options o;
  o.port = port;
  o.rank = rank;
  o.token = std::move(token);
  o.connect_timeout = 5s;
  return o;
}

TEST_CASE("store: set, get, add and wait across threads", "[comm][store]") {
  Logged log;
  comm::TcpStoreServer server({"127.0.0.1", 0, "tok", -1, log.fn()});
  REQUIRE(server.port() > 0);
  constexpr int kThreads = 4;
  std::vector<std::thread> ts;
  std::vector<std::string> errs(kThreads);
  for (int r = 0; r < kThreads; ++r) {
    ts.emplace_back([&, r] {
      try {
        comm::TcpStoreClient c(client_opts(server.port(), r));
        c.set("k/" + std::to_string(r), std::string(1000, char('a' + r)));
        for (int q = 0; q < kThreads; ++q)
          if (c.get("k/" + std::to_string(q), 5s) != std::string(1000, char('a' + q))) errs[r] = "wrong value";
        for (int i = 0; i < 10; ++i) c.add("counter", 1);
        comm::store_barrier(c, "b", r, kThreads, 5s);
        if (c.add("counter", 0) != 10 * kThreads) errs[r] = "counter wrong";
        if (!c.check("k/0") || c.check("nope")) errs[r] = "check wrong";
      } catch (const std::exception& e) {
        errs[r] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  for (auto& e : errs) REQUIRE(e == "");
  REQUIRE(server.ranks_connected() == 0);
  REQUIRE(server.abort_reason() == "");  // everyone said goodbye
}

TEST_CASE("store: a wrong token is refused with a message", "[comm][store]") {
  Logged log;
  comm::TcpStoreServer server({"127.0.0.1", 0, "right", -1, log.fn()});
  std::string msg;
  try {
    comm::TcpStoreClient c(client_opts(server.port(), 1, "wrong"));
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "refused") == "");
  REQUIRE(missing_from(msg, "wrong token") == "");
  REQUIRE(missing_from(log.once_it_says("wrong token"), "wrong token") == "");
  comm::TcpStoreClient ok(client_opts(server.port(), 1, "right"));  // still serving
  ok.set("x", "y");
  REQUIRE(ok.get("x", 1s) == "y");
}

TEST_CASE("store: garbage on the port is dropped and logged, the store survives", "[comm][store]") {
  Logged log;
  comm::TcpStoreServer server({"127.0.0.1", 0, "tok", -1, log.fn()});
  comm::TcpStoreClient c(client_opts(server.port(), 0));
  c.set("before", "1");
  auto raw = [&](const std::string& bytes) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(server.port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    char buf[64];
    (void)::recv(fd, buf, sizeof buf, 0);  // until the server drops us
    ::close(fd);
  };
  raw("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string huge = "TSSR";
  huge += std::string("\xff\xff\xff\x7f", 4);  // a 2 GiB frame
  raw(huge);
  REQUIRE(missing_from(log.once_it_says("not a tessera store client"), "not a tessera store client") == "");
  REQUIRE(missing_from(log.once_it_says("exceeds"), "exceeds") == "");
  REQUIRE(c.get("before", 1s) == "1");
  c.set("after", "2");
  REQUIRE(c.get("after", 1s) == "2");
}

namespace {

// A raw connection to the server on `port` that has sent a valid greeting (as a tool, not a
// rank) and speaks frames: what a client with any request in it would send.
struct RawClient {
  int fd = -1;
  explicit RawClient(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    std::string body = u32(2) + str("tok") + i64(-1) + std::string(1, '\0');  // version 2
    send(u32(0x52535354) + u32(static_cast<std::uint32_t>(body.size())) + body);
    REQUIRE(reply() == std::string(1, '\0'));  // Ok
  }
  ~RawClient() { ::close(fd); }
  static std::string u32(std::uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
  static std::string i64(std::int64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
  static std::string str(const std::string& s) { return u32(static_cast<std::uint32_t>(s.size())) + s; }
  void send(const std::string& bytes) { REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size())); }
  void request(const std::string& body) { send(u32(static_cast<std::uint32_t>(body.size())) + body); }
  /// The next reply's body, or "(closed)" when the server dropped the connection.
  std::string reply() {
    std::uint32_t n = 0;
    if (::recv(fd, &n, 4, MSG_WAITALL) != 4) return "(closed)";
    std::string body(n, '\0');
    if (n > 0 && ::recv(fd, body.data(), n, MSG_WAITALL) != ssize_t(n)) return "(closed)";
    return body;
  }
};

}  // namespace

TEST_CASE("store: a client of another protocol version is refused, naming both versions",
          "[comm][store]") {
  Logged log;
  comm::TcpStoreServer server({"127.0.0.1", 0, "tok", -1, log.fn()});
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(server.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  // A version-1 greeting (before Heartbeat): magic, then version, token, rank, rank flag.
  const std::string body = RawClient::u32(1) + RawClient::str("tok") + RawClient::i64(0) + "\1";
  const std::string hello =
      RawClient::u32(0x52535354) + RawClient::u32(static_cast<std::uint32_t>(body.size())) + body;
  REQUIRE(::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == ssize_t(hello.size()));
  std::uint32_t n = 0;
  REQUIRE(::recv(fd, &n, 4, MSG_WAITALL) == 4);
  std::string reply(n, '\0');
  REQUIRE(::recv(fd, reply.data(), n, MSG_WAITALL) == ssize_t(n));
  ::close(fd);
  REQUIRE(reply.at(0) == '\2');  // Error
  REQUIRE(missing_from(reply, "refused the join: protocol version 1 (server speaks 2)") == "");
  REQUIRE(missing_from(log.once_it_says("protocol version 1"), "protocol version 1") == "");
  REQUIRE(server.ranks().empty());
}

TEST_CASE("store: a heartbeat for a rank not connected is answered and ignored", "[comm][store]") {
  Logged log;
  comm::TcpStoreServer::Options opts{"127.0.0.1", 0, "tok", -1, log.fn()};
  opts.heartbeat_timeout = std::chrono::milliseconds(50);
  comm::TcpStoreServer server(opts);
  RawClient raw(server.port());
  raw.request(std::string(1, '\7') + RawClient::i64(9));  // Heartbeat(9): no rank 9 here
  REQUIRE(raw.reply() == std::string(1, '\0'));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // four deadlines
  REQUIRE(server.abort_reason() == "");                         // no deadline was set for it
  REQUIRE(server.ranks().empty());
}

// Requests tests/fuzz/store_wire_fuzz.cpp found: each was undefined behaviour in the server.
TEST_CASE("store: a get with a deadline past the clock's range waits without one", "[comm][store]") {
  Logged log;
  comm::TcpStoreServer server({"127.0.0.1", 0, "tok", -1, log.fn()});
  RawClient raw(server.port());
  // Get "late" with a deadline of 2^62 ms: now + 2^62 ms overflowed the clock's nanoseconds.
  raw.request(std::string(1, '\2') + RawClient::str("late") + RawClient::i64(std::int64_t{1} << 62));
  std::this_thread::sleep_for(50ms);
  comm::TcpStoreClient c(client_opts(server.port(), -1));
  c.set("late", "v");
  REQUIRE(raw.reply() == std::string(1, '\0') + RawClient::str("v"));
}

TEST_CASE("store: an add that overflows 64 bits or meets a non-integer drops that connection only",
          "[comm][store]") {
  Logged log;
  comm::TcpStoreServer server({"127.0.0.1", 0, "tok", -1, log.fn()});
  auto add = [](RawClient& raw, const std::string& key, std::int64_t d) {
    raw.request(std::string(1, '\3') + RawClient::str(key) + RawClient::i64(d));
    return raw.reply();
  };
  {
    RawClient raw(server.port());
    REQUIRE(add(raw, "n", std::numeric_limits<std::int64_t>::max()) ==
            std::string(1, '\0') + RawClient::i64(std::numeric_limits<std::int64_t>::max()));
    REQUIRE(add(raw, "n", 1) == "(closed)");  // was signed overflow
  }
  {
    RawClient raw(server.port());
    raw.request(std::string(1, '\1') + RawClient::str("s") + RawClient::str("abc"));
    REQUIRE(raw.reply() == std::string(1, '\0'));
    REQUIRE(add(raw, "s", 1) == "(closed)");
  }
  // (a tool's connection is dropped without a log line; a rank's would abort the job)
  comm::TcpStoreClient c(client_opts(server.port(), -1));
  REQUIRE(c.get("s", 1s) == "abc");  // unchanged, and the store carries on
  REQUIRE(c.add("n", -1) == std::numeric_limits<std::int64_t>::max() - 1);
}

TEST_CASE("store: waits have deadlines naming the missing keys and ranks", "[comm][store]") {
  Logged log;
  comm::TcpStoreServer server({"127.0.0.1", 0, "tok", -1, log.fn()});
  comm::TcpStoreClient c(client_opts(server.port(), 0));
  c.set("a", "1");
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  try {
    c.wait({"a", "b", "c"}, 150ms);
  } catch (const TimeoutError& e) {
    msg = e.what();
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(missing_from(msg, "still missing: b, c") == "");
  REQUIRE(ms < 1000);
  msg.clear();
  try {
    comm::store_barrier(c, "join", 0, 3, 100ms);
  } catch (const TimeoutError& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "rank(s) 1, 2 of 3 never arrived") == "");
}

TEST_CASE("store: a rank that vanishes without goodbye aborts the job, naming it", "[comm][store]") {
  Logged log;
  comm::TcpStoreServer server({"127.0.0.1", 0, "tok", -1, log.fn()});
  comm::TcpStoreClient watcher(client_opts(server.port(), 0));
  REQUIRE(watcher.abort_reason() == "");
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      auto* c = new comm::TcpStoreClient(client_opts(server.port(), 3));  // leaked: no goodbye
      c->set("child", "here");
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(watcher.get("child", 2s) == "here");  // a value set by another process
  pollfd p{watcher.abort_fd(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 2000) == 1);
  REQUIRE(missing_from(watcher.abort_reason(), "rank 3 exited") == "");
}

TEST_CASE("env rendezvous: torchrun, Open MPI and Slurm variables", "[comm][store]") {
  auto from = [](std::map<std::string, std::string> env) {
    return comm::read_env([env](const char* n) -> const char* {
      auto it = env.find(n);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  auto t = from({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}, {"TESSERA_RDZV_TOKEN", "x"}});
  REQUIRE((t.rank == 2 && t.size == 4 && t.local_rank == 0 && t.local_size == 2));
  REQUIRE((t.addr == "10.0.0.1" && t.port == 1234 && t.token == "x" && t.source == "torchrun"));
  auto o = from({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                 {"TESSERA_RDZV_TOKEN", "y"}});
  REQUIRE((o.rank == 1 && o.size == 3 && o.local_rank == 1 && o.source == "openmpi" && o.addr == "127.0.0.1"));
  auto s = from({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_JOB_ID", "77"},
                 {"SLURM_JOB_NODELIST", "gpu[03-04]"}});
  REQUIRE((s.rank == 5 && s.size == 8 && s.local_rank == 1 && s.addr == "gpu03" && s.token == "slurm-77-0"));
  auto one = from({});
  REQUIRE((one.rank == 0 && one.size == 1 && one.source == "default"));
  std::string msg;
  try {
    from({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "TESSERA_RDZV_TOKEN") == "");
  msg.clear();
  try {
    from({{"RANK", "3"}, {"WORLD_SIZE", "2"}, {"TESSERA_RDZV_TOKEN", "t"}});
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "rank 3 of a job of 2") == "");
}

TEST_CASE("env rendezvous: ranks in processes join, a missing rank is named at the deadline",
          "[comm][store]") {
  // Find a free port (tiny race, acceptable on loopback in tests).
  int port = 0;
  { comm::TcpStoreServer probe({"127.0.0.1", 0, "t", -1, [](const std::string&) {}}); port = probe.port(); }
  comm::EnvInfo info;
  info.size = 3;
  info.port = port;
  info.token = "job-token";
  std::vector<pid_t> kids;
  for (int r = 1; r < 2; ++r) {  // rank 2 never arrives
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        comm::EnvInfo mine = info;
        mine.rank = r;
        comm::EnvRendezvous rv(mine, std::chrono::milliseconds(300));
        code = 3;
      } catch (const Error& e) {  // its own timeout, or rank 0's abort carrying the same message
        code = std::string(e.what()).find("rank(s) 2 of 3 never arrived") != std::string::npos ? 0 : 4;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 5;
      }
      ::_exit(code);
    }
    kids.push_back(pid);
  }
  std::string msg;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    comm::EnvRendezvous rv(info, std::chrono::milliseconds(300));
  } catch (const Error& e) {
    // Rank 0's own timeout, or (on a loaded machine rank 1's deadline can pass first) rank 1's
    // abort, which carries the same diagnosis.
    msg = e.what();
  }
  for (pid_t k : kids) {
    int status = 0;
    ::waitpid(k, &status, 0);
    REQUIRE(WEXITSTATUS(status) == 0);
  }
  REQUIRE(missing_from(msg, "rank(s) 2 of 3 never arrived") == "");
  REQUIRE(missing_from(msg, "env://127.0.0.1") == "");
  REQUIRE(std::chrono::steady_clock::now() - t0 < 3s);
}

}  // namespace
