// `tessera launch`: starts the ranks of one node as processes with the env:// variables and a
// fresh token, serves the store (node 0), prefixes output with the rank, and stops everyone when
// one rank fails or on Ctrl-C, exiting non-zero with the failed rank and why.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <utility>

#include "commands.hpp"
#include "launch_elastic.hpp"
#include "launch_workers.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/launch.hpp"

namespace tessera::tools {

namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

struct LaunchArgs {
  int nproc = 1, nnodes = 1, node_rank = 0;
  std::string endpoint = "127.0.0.1:0";
  double grace_s = 10;
  std::vector<std::string> command;
  std::vector<std::string> tessera_commands;  ///< this binary's subcommands (train, calibrate, ...)
};

int launch(const LaunchArgs& a) {
  TESSERA_CHECK(a.nproc >= 1 && a.nnodes >= 1 && a.node_rank >= 0 && a.node_rank < a.nnodes,
                "launch: --nproc ", a.nproc, " --nnodes ", a.nnodes, " --node-rank ", a.node_rank, " is not a valid layout");
  TESSERA_CHECK(!a.command.empty(), "launch: nothing to run; e.g. tessera launch --nproc 2 -- train --backend ucx, or -- python3 train.py");
  auto [program, argv_s] = resolve_program(a.command, a.tessera_commands);
  const auto colon = a.endpoint.rfind(':');
  TESSERA_CHECK(colon != std::string::npos, "--rdzv-endpoint '", a.endpoint, "': expected host:port");
  const std::string host = a.endpoint.substr(0, colon);
  int port = std::stoi(a.endpoint.substr(colon + 1));
  std::string token = std::getenv("TESSERA_RDZV_TOKEN") ? std::getenv("TESSERA_RDZV_TOKEN") : "";
  TESSERA_CHECK(a.nnodes == 1 || (!token.empty() && port != 0), "launch: with --nnodes > 1 set TESSERA_RDZV_TOKEN to one "
                "fresh value on every node and give --rdzv-endpoint host:port with a fixed port");
  if (token.empty()) token = fresh_token();
  std::unique_ptr<run::StoreServer> server;
  if (a.node_rank == 0) {
    run::StoreServer::Options so;
    so.host = a.nnodes > 1 ? "0.0.0.0" : host;
    so.port = port;
    so.token = token;
    so.log = [](const std::string& m) { std::fprintf(stderr, "[launch] store: %s\n", m.c_str()); };
    server = std::make_unique<run::StoreServer>(so);
    port = server->port();
  }
  const int world = a.nproc * a.nnodes;
  std::vector<std::vector<std::string>> envs;
  for (int l = 0; l < a.nproc; ++l) {
    const int rank = a.node_rank * a.nproc + l;
    std::vector<std::string> env = inherited_env();
    for (auto kv : {detail::cat("RANK=", rank), detail::cat("WORLD_SIZE=", world), detail::cat("LOCAL_RANK=", l),
                    detail::cat("LOCAL_WORLD_SIZE=", a.nproc), "MASTER_ADDR=" + host, detail::cat("MASTER_PORT=", port),
                    "TESSERA_RDZV_TOKEN=" + token, std::string("TESSERA_RDZV_HOSTED=1")})
      env.push_back(kv);
    envs.push_back(std::move(env));
  }
  WorkerGroup group;
  group.start(program, argv_s, envs, a.node_rank * a.nproc, false);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  int first_failed = -1;
  // Every rank that exited badly, in the order they were reaped. A rank killed by a signal is the
  // likely cause when its peers then fail on a broken connection, even when a peer is reaped first;
  // a signal the launcher sent itself (the rank outlived --grace) is not.
  std::vector<WorkerExit> failures;
  std::chrono::steady_clock::time_point stop_at{};
  bool stopping = false;
  while (!group.done()) {
    for (const WorkerExit& x : group.poll(std::chrono::milliseconds(50))) {
      // Ctrl-C at a terminal reaches the whole process group: ranks that died of SIGINT were
      // interrupted with the launcher (which may see their exit before its own signal), not failed.
      if (WIFSIGNALED(x.status) && WTERMSIG(x.status) == SIGINT) g_interrupted = 1;
      if (g_interrupted) continue;
      if (!x.ok()) failures.push_back(x);
      if (x.ok() || first_failed >= 0) continue;
      first_failed = x.rank;
      if (server)
        server->abort(
            detail::cat("rank ", first_failed, " failed (", describe_status(x.status), ")"));
      stopping = true;
      stop_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long long>(a.grace_s * 1000));
    }
    if (g_interrupted && !stopping) {
      stopping = true;
      if (server) server->abort("the launcher was interrupted (Ctrl-C)");
      group.stop();
    }
    if (stopping && group.running() > 0 && std::chrono::steady_clock::now() > stop_at) group.stop();
  }
  if (g_interrupted && first_failed < 0) {
    std::fprintf(stderr, "tessera launch: interrupted; stopped all %d rank(s)\n", a.nproc);
    return 130;
  }
  if (first_failed >= 0) {
    auto cause = failures.begin();
    for (auto it = failures.begin(); it != failures.end(); ++it)
      if (WIFSIGNALED(it->status) && WTERMSIG(it->status) != SIGTERM && !it->stopped_by_us) {
        cause = it;
        break;
      }
    std::string others, outlived;
    for (auto it = failures.begin(); it != failures.end(); ++it) {
      if (it == cause) continue;
      std::string& list = it->stopped_by_us ? outlived : others;
      list += detail::cat(list.empty() ? "" : ", ", "rank ", it->rank, " (", describe_status(it->status), ")");
    }
    if (!outlived.empty())
      outlived = detail::cat("; still running ", a.grace_s, " s (--grace) after rank ", first_failed,
                             " failed, so the launcher stopped: ", outlived);
    std::fprintf(stderr, "tessera launch: rank %d failed (%s); stopped the other ranks%s%s%s\n", cause->rank,
                 describe_status(cause->status).c_str(), others.empty() ? "" : "; also failed: ", others.c_str(),
                 outlived.c_str());
    return 1;
  }
  return 0;
}

/// "N" or "MIN:MAX" of option `name`: {N, N} or {MIN, MAX}; refused unless 1 <= MIN <= MAX.
std::pair<int, int> parse_range(const std::string& name, const std::string& text) {
  const auto colon = text.find(':');
  auto num = [&](const std::string& t) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(t, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    TESSERA_CHECK(used == t.size() && !t.empty(), name, " '", text,
                  "': expected a number N or a range MIN:MAX, e.g. 2:4");
    return v;
  };
  const int lo = num(text.substr(0, colon));
  const int hi = colon == std::string::npos ? lo : num(text.substr(colon + 1));
  TESSERA_CHECK(lo >= 1 && lo <= hi, name, " '", text, "': needs 1 <= MIN <= MAX");
  return {lo, hi};
}

struct LaunchOptions {
  std::string nproc = "1", nnodes = "1", join;
  int node_rank = 0, max_restarts = 0;
  double join_timeout_s = 30, heartbeat_timeout_s = 5;
  std::string elastic_log, metrics_textfile;
  LaunchArgs fixed;
};

/// Elastic when a size is a range, restarts are allowed or the launcher joins a running job;
/// otherwise the fixed job as before.
int launch_chosen(const LaunchOptions& o) {
  const auto [p_lo, p_hi] = parse_range("--nproc", o.nproc);
  const auto [n_lo, n_hi] = parse_range("--nnodes", o.nnodes);
  const bool elastic = p_lo != p_hi || n_lo != n_hi || o.max_restarts > 0 || !o.join.empty();
  if (!elastic) {
    LaunchArgs a = o.fixed;
    a.nproc = p_lo;
    a.nnodes = n_lo;
    a.node_rank = o.node_rank;
    return launch(a);
  }
  TESSERA_CHECK(p_lo == p_hi || n_hi == 1, "launch: --nproc ", o.nproc, " with --nnodes ", o.nnodes,
                ": give a range to one of them (ranks on one host, or launchers)");
  TESSERA_CHECK(o.max_restarts >= 0, "launch: --max-restarts ", o.max_restarts, " must be >= 0");
  TESSERA_CHECK(o.join_timeout_s > 0 && o.heartbeat_timeout_s > 0,
                "launch: --join-timeout and "
                "--heartbeat-timeout must be > 0 seconds");
  ElasticArgs e;
  e.by_nodes = n_lo != n_hi;
  e.min = e.by_nodes ? n_lo : p_lo;
  e.max = e.by_nodes ? n_hi : p_hi;
  e.nproc = p_hi;
  e.max_restarts = o.max_restarts;
  e.join_timeout_s = o.join_timeout_s;
  e.heartbeat_timeout_s = o.heartbeat_timeout_s;
  e.grace_s = o.fixed.grace_s;
  e.member = !o.join.empty() || o.node_rank > 0;
  e.endpoint = o.join.empty() ? o.fixed.endpoint : o.join;
  e.command = o.fixed.command;
  e.tessera_commands = o.fixed.tessera_commands;
  e.elastic_log = o.elastic_log;
  e.metrics_textfile = o.metrics_textfile;
  return launch_elastic(e);
}

}  // namespace

void add_launch_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<LaunchOptions>();
  LaunchArgs* a = &o->fixed;
  CLI::App* c = app.add_subcommand("launch", "Start the ranks of a job as processes (env:// rendezvous)");
  c->add_option("--nproc-per-node,--nproc", o->nproc,
                "Ranks (processes) on this node; MIN:MAX makes an elastic job of MIN to MAX ranks")
      ->capture_default_str();
  c->add_option("--nnodes", o->nnodes,
                "Nodes (launchers) in the job; MIN:MAX: elastic, MIN to MAX launchers")
      ->capture_default_str();
  c->add_option("--node-rank", o->node_rank, "This node's index (elastic: 0 leads, others join)")
      ->capture_default_str();
  c->add_option("--rdzv-endpoint", a->endpoint, "host:port of the store (served by node 0; port 0 = any)")
      ->capture_default_str();
  c->add_option("--grace", a->grace_s, "Seconds the other ranks get to stop by themselves after one failed")
      ->capture_default_str();
  c->add_option("--max-restarts", o->max_restarts,
                "Elastic: membership changes (a rank or launcher lost or joined) the job survives")
      ->capture_default_str();
  c->add_option(
       "--join-timeout", o->join_timeout_s,
       "Elastic: seconds a round waits for members (the first for MAX, later ones for MIN)")
      ->capture_default_str();
  c->add_option("--heartbeat-timeout", o->heartbeat_timeout_s,
                "Elastic: a rank that sends no heartbeat for this long is lost (stopped or hung)")
      ->capture_default_str();
  c->add_option(
      "--join", o->join,
      "Elastic: join the job whose leading launcher serves HOST:PORT with this launcher's --nproc "
      "ranks (TESSERA_RDZV_TOKEN must be the job's)");
  c->add_option("--elastic-log", o->elastic_log,
                "Elastic (leader): write one JSON line per round here");
  c->add_option("--metrics-textfile", o->metrics_textfile,
                "Elastic (leader): the job's rounds, restarts and members as Prometheus text, "
                "rewritten per round");
  c->add_option("command", a->command,
                "What each rank runs, after --: a tessera command (train ...) or any program "
                "(python3 train.py); "
                "a launcher that joins takes the leader's");
  c->callback([&app, &action, o] {
    for (const CLI::App* sub : app.get_subcommands({}))
      o->fixed.tessera_commands.push_back(sub->get_name());
    action = [o] { return launch_chosen(*o); };
  });
}

}  // namespace tessera::tools
