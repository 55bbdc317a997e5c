// The store's membership: heartbeats with deadlines (a stopped rank is found lost, a beating one
// is not), on_rank_lost called once per lost rank, abort_on_rank_lost=false leaving the abort to
// the host, the host's own get/set/ranks, and TESSERA_HEARTBEAT_MS.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "comm/conformance.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/comm/tcp_store.hpp"

extern char** environ;

namespace {

using namespace tessera;
using namespace std::chrono_literals;
using test::conformance::missing_from;
using Clock = std::chrono::steady_clock;

/// What on_rank_lost and the log saw, with when the first loss arrived.
struct Seen {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> lost;
  std::string log;
  Clock::time_point first_lost{};

  void watch(comm::TcpStoreServer::Options& o) {
    o.log = [this](const std::string& l) {
      std::lock_guard lock(mu);
      log += l + "\n";
    };
    o.on_rank_lost = [this](int rank, const std::string& why) {
      std::lock_guard lock(mu);
      if (lost.empty()) first_lost = Clock::now();
      lost.emplace_back(rank, why);
    };
  }
  /// The losses once there are `n`, or as they are after `wait`.
  std::vector<std::pair<int, std::string>> losses(std::size_t n, std::chrono::milliseconds wait) {
    const auto end = Clock::now() + wait;
    for (;;) {
      {
        std::lock_guard lock(mu);
        if (lost.size() >= n || Clock::now() > end) return lost;
      }
      std::this_thread::sleep_for(5ms);
    }
  }
  std::string all_log() {
    std::lock_guard lock(mu);
    return log;
  }
};

comm::TcpStoreServer::Options server_opts(Seen& seen, std::chrono::milliseconds heartbeat_timeout) {
  comm::TcpStoreServer::Options o;
  o.token = "tok";
  o.heartbeat_timeout = heartbeat_timeout;
  seen.watch(o);
  return o;
}

comm::TcpStoreClient::Options client_opts(int port, int rank,
                                          std::chrono::milliseconds beat = 0ms) {
  comm::TcpStoreClient::Options o;
  o.port = port;
  o.rank = rank;
  o.token = "tok";
  o.connect_timeout = 5s;
  o.heartbeat_interval = beat;
  return o;
}

/// Another process of this test binary running the hidden case "[.store_member]" below: it joins
/// the store at `port` (`how`: "client" as rank `rank` heartbeating every `beat_ms`, or "env"
/// through EnvRendezvous from the variables in `vars`), sets "member<rank>/ready" and idles until
/// killed. fork + exec, not a bare fork: a forked copy of a multi-threaded process may not start
/// threads (ThreadSanitizer refuses to), and heartbeats need one. The destructor kills and reaps.
struct Member {
  pid_t pid = -1;
  Member(const std::string& how, int port, int rank, int beat_ms,
         std::vector<std::string> vars = {}) {
    vars.push_back(detail::cat("TESSERA_TEST_MEMBER=", how, " ", port, " ", rank, " ", beat_ms));
    for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    char self[] = "/proc/self/exe";
    char spec[] = "[.store_member]";
    char* argv[] = {self, spec, nullptr};
    pid = ::fork();
    if (pid == 0) {
      ::execve(self, argv, envp.data());
      ::_exit(127);
    }
  }
  ~Member() {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
};

TEST_CASE("store member process (run by the cases below, in a process of its own)",
          "[.store_member]") {
  const char* spec = std::getenv("TESSERA_TEST_MEMBER");
  REQUIRE(spec != nullptr);
  std::istringstream in(spec);
  std::string how;
  int port = 0, rank = 0, beat_ms = 0;
  in >> how >> port >> rank >> beat_ms;
  // Leaked on purpose: this process ends by a signal, never with a goodbye.
  if (how == "client")
    new comm::TcpStoreClient(client_opts(port, rank, std::chrono::milliseconds(beat_ms)));
  else
    new comm::EnvRendezvous(comm::read_env(), 5s);
  comm::TcpStoreClient tool(client_opts(port, -1));
  tool.set(detail::cat("member", rank, "/ready"), "1");
  for (;;) ::pause();
}

/// Waits for `key` on the host's side of the store (the child sets it when it has joined).
bool appears(comm::TcpStoreServer& server, const std::string& key) {
  for (int i = 0; i < 1000; ++i) {
    if (server.get(key)) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST_CASE("store heartbeat: a beating rank outlives the deadline, a silent one has none",
          "[comm][store]") {
  Seen seen;
  comm::TcpStoreServer server(server_opts(seen, 300ms));
  comm::TcpStoreClient beating(client_opts(server.port(), 0, 40ms));
  comm::TcpStoreClient never_beat(client_opts(server.port(), 1));  // no heartbeat: no deadline
  std::this_thread::sleep_for(1200ms);                             // four deadlines
  REQUIRE(seen.losses(0, 0ms).empty());
  REQUIRE(server.ranks() == std::set<int>{0, 1});
  REQUIRE(server.abort_reason() == "");
  beating.set("still", "here");
  REQUIRE(never_beat.get("still", 1s) == "here");
}

TEST_CASE("store heartbeat: a stopped rank is lost within the deadline, named once",
          "[comm][store]") {
  Seen seen;
  constexpr auto kTimeout = 400ms;
  comm::TcpStoreServer server(server_opts(seen, kTimeout));
  comm::TcpStoreClient watcher(client_opts(server.port(), 0, 40ms));
  const int port = server.port();
  Member child("client", port, 2, 40);
  REQUIRE(appears(server, "member2/ready"));
  std::this_thread::sleep_for(200ms);  // several heartbeats in
  REQUIRE(server.ranks() == std::set<int>{0, 2});
  const auto t0 = Clock::now();
  REQUIRE(::kill(child.pid, SIGSTOP) == 0);
  const auto lost = seen.losses(1, 5s);
  REQUIRE(lost.size() == 1);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(seen.first_lost - t0);
  INFO("found lost after " << ms.count() << " ms");
  // Not before the deadline (less one heartbeat interval, sent just before the stop), and at
  // most a monitor period (a quarter deadline) plus a margin for a loaded machine after it.
  REQUIRE(ms.count() >= (kTimeout - 100ms).count());
  REQUIRE(ms.count() <= (kTimeout + kTimeout / 4 + 1500ms).count());
  REQUIRE(lost[0].first == 2);
  REQUIRE(missing_from(lost[0].second, "rank 2 stopped answering: no heartbeat for ") == "");
  REQUIRE(missing_from(lost[0].second, "s (stopped, hung or its host unreachable)") == "");
  REQUIRE(missing_from(seen.all_log(), "rank 2 stopped answering") == "");
  pollfd p{watcher.abort_fd(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 2000) == 1);
  REQUIRE(missing_from(watcher.abort_reason(), "rank 2 stopped answering") == "");
  REQUIRE(server.ranks() == std::set<int>{0});
  // Killed now, its connection closes without a goodbye: already lost, not reported again.
  REQUIRE(::kill(child.pid, SIGKILL) == 0);
  std::this_thread::sleep_for(300ms);
  REQUIRE(seen.losses(2, 0ms).size() == 1);
}

TEST_CASE("store: with abort_on_rank_lost=false a lost rank is only reported to the host",
          "[comm][store]") {
  Seen seen;
  auto opts = server_opts(seen, 0ms);
  opts.abort_on_rank_lost = false;
  comm::TcpStoreServer server(opts);
  comm::TcpStoreClient watcher(client_opts(server.port(), 0));
  const int port = server.port();
  {
    Member child("client", port, 3, 0);
    REQUIRE(appears(server, "member3/ready"));
  }  // killed: its rank connection closes without a goodbye
  const auto lost = seen.losses(1, 5s);
  REQUIRE(lost.size() == 1);
  REQUIRE(lost[0].first == 3);
  REQUIRE(missing_from(lost[0].second, "rank 3 exited or lost its connection") == "");
  REQUIRE(missing_from(seen.all_log(), "rank 3 exited") == "");
  REQUIRE(server.abort_reason() == "");
  pollfd p{watcher.abort_fd(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 200) == 0);  // no abort reached the ranks
  REQUIRE(watcher.abort_reason() == "");
  REQUIRE(server.ranks() == std::set<int>{0});
  watcher.set("job", "goes on");
  REQUIRE(server.get("job") == std::optional<std::string>("goes on"));
}

TEST_CASE("store: the host's get and set, waking a waiting client, and its ranks",
          "[comm][store]") {
  Seen seen;
  comm::TcpStoreServer server(server_opts(seen, 0ms));
  REQUIRE(!server.get("k").has_value());
  std::string got;
  std::thread waiter([&] {
    try {
      comm::TcpStoreClient c(client_opts(server.port(), 0));
      got = c.get("k", 5s);
    } catch (const std::exception& e) {
      got = std::string("threw: ") + e.what();
    }
  });
  std::this_thread::sleep_for(100ms);  // the client is waiting by now
  const auto t0 = Clock::now();
  server.set("k", "v");
  waiter.join();
  REQUIRE(got == "v");
  REQUIRE(std::chrono::duration<double>(Clock::now() - t0).count() < 2.0);
  comm::TcpStoreClient tool(client_opts(server.port(), -1));
  auto five = std::make_unique<comm::TcpStoreClient>(client_opts(server.port(), 5));
  comm::TcpStoreClient seven(client_opts(server.port(), 7));
  five->set("from/5", "x");
  REQUIRE(server.get("from/5") == std::optional<std::string>("x"));
  REQUIRE(server.ranks() == std::set<int>{5, 7});  // not the tool, not the rank that left
  five.reset();                                    // goodbye: it leaves, not lost
  REQUIRE(server.ranks() == std::set<int>{7});
  REQUIRE(seen.losses(0, 0ms).empty());
}

TEST_CASE("env rendezvous: TESSERA_HEARTBEAT_MS is read, checked and heartbeats the rank",
          "[comm][store]") {
  auto from = [](std::map<std::string, std::string> env) {
    return comm::read_env([env](const char* n) -> const char* {
      auto it = env.find(n);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  REQUIRE(from({}).heartbeat_ms == 0);
  REQUIRE(from({{"TESSERA_HEARTBEAT_MS", "250"}}).heartbeat_ms == 250);
  for (const char* bad : {"-5", "soon", "2.5"}) {
    std::string msg;
    try {
      from({{"TESSERA_HEARTBEAT_MS", bad}});
    } catch (const InvalidArgument& e) {
      msg = e.what();
    }
    REQUIRE(missing_from(msg, std::string("TESSERA_HEARTBEAT_MS='") + bad + "'") == "");
  }
  // The rendezvous's client beats at that interval: stopped, its rank is found lost. (With
  // heartbeat_ms 0 it never would be: a rank that never beat has no deadline.)
  Seen seen;
  comm::TcpStoreServer server(server_opts(seen, 300ms));
  const int port = server.port();
  // As tessera launch starts a rank: the store is served by this test (hosted).
  Member child(
      "env", port, 0, 0,
      {"RANK=0", "WORLD_SIZE=1", detail::cat("MASTER_PORT=", port), "MASTER_ADDR=127.0.0.1",
       "TESSERA_RDZV_TOKEN=tok", "TESSERA_RDZV_HOSTED=1", "TESSERA_HEARTBEAT_MS=40"});
  REQUIRE(appears(server, "member0/ready"));
  std::this_thread::sleep_for(150ms);
  REQUIRE(::kill(child.pid, SIGSTOP) == 0);
  const auto lost = seen.losses(1, 5s);
  REQUIRE(lost.size() == 1);
  REQUIRE(missing_from(lost[0].second, "rank 0 stopped answering") == "");
}

}  // namespace
