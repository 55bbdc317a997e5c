// A member launcher of an elastic job (`tessera launch --join HOST:PORT --nproc K`, or a node other
// than 0 of `--nnodes MIN:MAX`): announces its ranks to the leader's agent store, keeps a
// connection open there so the leader sees it go, and runs its part of every round it is given,
// reporting each rank's end. It takes the leader's command unless given its own.
#include <signal.h>

#include <cstdio>
#include <optional>

#include "launch_elastic.hpp"
#include "launch_rounds.hpp"
#include "launch_workers.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/launch.hpp"

namespace tessera::tools {

namespace {

volatile sig_atomic_t g_member_stop = 0;
void on_member_signal(int) { g_member_stop = 1; }

/// Runs this member's part of `plan` until every one of its ranks ended; each end is reported.
void run_part(run::StoreClient& store, const rounds::Plan& plan, const rounds::Plan::Part& part,
              int r, const std::pair<std::string, std::vector<std::string>>& program,
              const std::string& host, const std::string& token) {
  std::vector<std::vector<std::string>> envs;
  for (int l = 0; l < part.count; ++l)
    envs.push_back(rounds::rank_env(inherited_env(), plan, part, l, host, token));
  WorkerGroup group;
  group.start(program.first, program.second, envs, part.first, true);
  bool stopped = false;
  while (!group.done()) {
    for (const WorkerExit& x : group.poll(std::chrono::milliseconds(50)))
      store.set(rounds::exit_key(r, x.rank), detail::cat(x.status, " ", x.stopped_by_us ? 1 : 0));
    if (!stopped && (g_member_stop || store.check(rounds::end_key(r)))) {
      group.stop();
      stopped = true;
    }
  }
}

}  // namespace

int run_member(const ElasticArgs& a) {
  const auto colon = a.endpoint.rfind(':');
  TESSERA_CHECK(colon != std::string::npos && colon > 0, "launch --join '", a.endpoint,
                "': expected the leading launcher's host:port");
  const std::string host = a.endpoint.substr(0, colon);
  const int port = std::stoi(a.endpoint.substr(colon + 1));
  const char* t = std::getenv("TESSERA_RDZV_TOKEN");
  TESSERA_CHECK(
      t && *t, "launch --join: set TESSERA_RDZV_TOKEN to the job's token (the leading launcher's)");
  run::StoreClient::Options co;
  co.host = host;
  co.port = port;
  co.token = t;
  run::StoreClient store(co);
  const int id = static_cast<int>(store.add(rounds::kMembersKey, 1));
  co.rank = id;  // the leader's agent store watches this connection: closing it means "lost"
  run::StoreClient watched(co);
  const auto latest = store.check(rounds::kLatestKey)
                          ? std::stoi(store.get(rounds::kLatestKey, std::chrono::seconds(5)))
                          : -1;
  store.set(rounds::member_key(id), std::to_string(a.nproc));
  const auto command =
      a.command.empty()
          ? rounds::split_words(store.get(rounds::kCommandKey, std::chrono::seconds(10)))
          : a.command;
  const auto program = resolve_program(command, a.tessera_commands);
  std::fprintf(stderr, "[launch] joined the job at %s as launcher %d with %d rank(s)\n",
               a.endpoint.c_str(), id, a.nproc);
  struct sigaction sa {};
  sa.sa_handler = on_member_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  for (int r = latest + 1;;) {
    if (g_member_stop) {
      std::fprintf(stderr, "tessera launch: interrupted; left the job\n");
      return 130;
    }
    if (store.check(rounds::kDoneKey)) {
      const std::string done = store.get(rounds::kDoneKey, std::chrono::seconds(5));
      const auto sp = done.find(' ');
      std::fprintf(stderr, "tessera launch: the job ended: %s\n", done.substr(sp + 1).c_str());
      return std::stoi(done.substr(0, sp));
    }
    if (!store.check(rounds::round_key(r))) {
      ::usleep(50000);
      continue;
    }
    const auto plan =
        rounds::Plan::decode(store.get(rounds::round_key(r), std::chrono::seconds(5)));
    if (const auto* part = plan.part_of(id))
      run_part(store, plan, *part, r, program, host, co.token);
    else
      std::fprintf(stderr, "[launch] round %d: the job is full; this launcher waits for the next\n",
                   r);
    ++r;
  }
}

}  // namespace tessera::tools
