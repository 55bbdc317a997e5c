// run::StoreServer and run::StoreClient, what `tessera launch` and its elastic member launchers
// use of the store: requests and their deadlines, the token, aborts, the host's get/set/ranks, and
// a member (a rank of the store) found lost by its heartbeats without aborting the job.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "run/expect.hpp"
#include "support/catch.hpp"
#include "tessera/run/launch.hpp"

extern char** environ;

namespace {

using namespace tessera;
using namespace std::chrono_literals;
using runtest::has;

run::StoreClient::Options client_opts(int port, int rank, std::string token = "tok") {
  run::StoreClient::Options o;
  o.port = port;
  o.rank = rank;
  o.token = std::move(token);
  o.connect_timeout = 5s;
  return o;
}

run::StoreServer::Options server_opts() {
  run::StoreServer::Options o;
  o.token = "tok";
  o.log = [](const std::string&) {};
  return o;
}

TEST_CASE("store client: set, get, add, check and a get that times out naming the key", "[run]") {
  run::StoreServer server(server_opts());
  run::StoreClient a(client_opts(server.port(), 0));
  run::StoreClient tool(client_opts(server.port(), -1));
  a.set("k", "v");
  REQUIRE(tool.get("k", 1s) == "v");
  REQUIRE(tool.add("n", 5) == 5);
  REQUIRE(a.add("n", -2) == 3);
  REQUIRE(a.check("n"));
  REQUIRE_FALSE(a.check("nope"));
  REQUIRE(server.get("n") == std::optional<std::string>("3"));
  std::string msg;
  try {
    tool.get("never", 100ms);
  } catch (const TimeoutError& e) {
    msg = e.what();
  }
  REQUIRE(has(msg, "key 'never' did not appear"));
  REQUIRE(has(msg, "within 100 ms"));
  REQUIRE(server.ranks() == std::set<int>{0});
}

TEST_CASE("store client: a wrong token is refused with a message", "[run]") {
  run::StoreServer server(server_opts());
  std::string msg;
  try {
    run::StoreClient c(client_opts(server.port(), 1, "wrong"));
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(has(msg, "refused the join: wrong token"));
  REQUIRE(server.ranks().empty());
  run::StoreClient ok(client_opts(server.port(), 1));
  REQUIRE(server.ranks() == std::set<int>{1});
}

TEST_CASE("store client: an abort reaches the host and the other clients, the first reason wins",
          "[run]") {
  run::StoreServer server(server_opts());
  run::StoreClient a(client_opts(server.port(), 0));
  run::StoreClient b(client_opts(server.port(), 1));
  REQUIRE(b.abort_reason() == "");
  a.abort("member 0 gave up");
  a.abort("a later reason");
  REQUIRE(server.abort_reason() == "member 0 gave up");
  std::string seen;
  for (int i = 0; i < 400 && seen.empty(); ++i) {  // the watcher's reply comes over the network
    seen = b.abort_reason();
    if (seen.empty()) std::this_thread::sleep_for(5ms);
  }
  REQUIRE(seen == "member 0 gave up");
  std::string msg;
  try {
    b.get("never", 5s);  // released at once by the abort, not after 5 s
  } catch (const BackendError& e) {
    msg = e.what();
  }
  REQUIRE(has(msg, "the job was aborted: member 0 gave up"));
}

TEST_CASE("store server: a stopped member is lost by its heartbeats, the host decides", "[run]") {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> lost;
  auto opts = server_opts();
  opts.heartbeat_timeout = 300ms;
  opts.abort_on_rank_lost = false;
  opts.on_rank_lost = [&](int rank, const std::string& why) {
    std::lock_guard lock(mu);
    lost.emplace_back(rank, why);
  };
  run::StoreServer server(opts);
  const int port = server.port();
  run::StoreClient alive(client_opts(port, 0));
  // The member is this test binary run again on the hidden case below (fork + exec: a forked copy
  // of a multi-threaded process should not start threads, and heartbeats need one).
  std::vector<std::string> vars{detail::cat("TESSERA_TEST_STORE_MEMBER=", port, " 4 40")};
  for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  char self[] = "/proc/self/exe";
  char spec[] = "[.run_store_member]";
  char* argv[] = {self, spec, nullptr};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execve(self, argv, envp.data());
    ::_exit(127);
  }
  for (int i = 0; i < 400 && server.ranks().count(4) == 0; ++i) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(150ms);  // several heartbeats in
  const bool joined = server.ranks() == std::set<int>{0, 4};
  ::kill(pid, SIGSTOP);
  std::size_t n = 0;
  for (int i = 0; i < 500 && n == 0; ++i) {
    std::this_thread::sleep_for(10ms);
    std::lock_guard lock(mu);
    n = lost.size();
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  REQUIRE(joined);
  std::lock_guard lock(mu);
  REQUIRE(lost.size() == 1);
  REQUIRE(lost[0].first == 4);
  REQUIRE(has(lost[0].second, "rank 4 stopped answering: no heartbeat for"));
  REQUIRE(server.abort_reason() == "");  // left to the host
  REQUIRE(alive.abort_reason() == "");
  REQUIRE(server.ranks() == std::set<int>{0});
  server.set("round", "2");  // the host goes on, and the members see it
  REQUIRE(alive.get("round", 1s) == "2");
}

TEST_CASE("store member process (run by the case above, in a process of its own)",
          "[.run_store_member]") {
  const char* spec = std::getenv("TESSERA_TEST_STORE_MEMBER");
  REQUIRE(spec != nullptr);
  std::istringstream in(spec);
  int port = 0, rank = 0, beat_ms = 0;
  in >> port >> rank >> beat_ms;
  auto o = client_opts(port, rank);
  o.heartbeat_interval = std::chrono::milliseconds(beat_ms);
  new run::StoreClient(o);  // leaked on purpose: this process ends by a signal
  for (;;) ::pause();
}

}  // namespace
