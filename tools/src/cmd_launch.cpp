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

/// The program the ranks execute and its argv: this tessera binary when the command starts with
/// one of its subcommands, else the program named (a path, or a name looked up on PATH), as
/// torchrun runs `python script.py`.
std::pair<std::string, std::vector<std::string>> resolve_program(const LaunchArgs& a) {
  auto runnable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  const std::string& first = a.command.front();
  if (std::find(a.tessera_commands.begin(), a.tessera_commands.end(), first) != a.tessera_commands.end()) {
    std::vector<std::string> argv = {"/proc/self/exe"};
    argv.insert(argv.end(), a.command.begin(), a.command.end());
    return {"/proc/self/exe", argv};
  }
  std::string path;
  if (first.find('/') != std::string::npos) {
    path = first;
  } else if (const char* env_path = std::getenv("PATH")) {
    const std::string dirs = env_path;
    for (std::size_t start = 0; start <= dirs.size();) {
      const auto end = std::min(dirs.find(':', start), dirs.size());
      const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
      const std::string candidate = dir + "/" + first;
      if (runnable(candidate)) {
        path = candidate;
        break;
      }
      start = end + 1;
    }
  }
  std::string known;
  for (const auto& c : a.tessera_commands) known += (known.empty() ? "" : ", ") + c;
  TESSERA_CHECK(!path.empty() && runnable(path), "launch: '", first,
                "' is neither a tessera command (", known, ") nor an executable program",
                first.find('/') != std::string::npos ? "" : " on PATH", "; e.g. tessera launch --nproc 2 -- python3 train.py");
  return {path, a.command};
}

std::string fresh_token() {
  std::ifstream f("/dev/urandom", std::ios::binary);
  unsigned char b[16] = {};
  f.read(reinterpret_cast<char*>(b), sizeof b);
  std::string t;
  char h[3];
  for (unsigned char c : b) {
    std::snprintf(h, sizeof h, "%02x", c);
    t += h;
  }
  return t;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return detail::cat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return detail::cat("exit code ", WEXITSTATUS(status));
}

int launch(const LaunchArgs& a) {
  TESSERA_CHECK(a.nproc >= 1 && a.nnodes >= 1 && a.node_rank >= 0 && a.node_rank < a.nnodes,
                "launch: --nproc ", a.nproc, " --nnodes ", a.nnodes, " --node-rank ", a.node_rank, " is not a valid layout");
  TESSERA_CHECK(!a.command.empty(), "launch: nothing to run; e.g. tessera launch --nproc 2 -- train --backend ucx, or -- python3 train.py");
  auto [program, argv_s] = resolve_program(a);
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
  // Everything the children need is built before forking (only execve after fork).
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<pid_t> pids(static_cast<std::size_t>(a.nproc));
  std::vector<int> outs(static_cast<std::size_t>(a.nproc));
  std::fflush(nullptr);
  for (int l = 0; l < a.nproc; ++l) {
    const int rank = a.node_rank * a.nproc + l;
    std::vector<std::string> env_s;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const std::string k = kv.substr(0, kv.find('='));
      if (k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "LOCAL_WORLD_SIZE" || k == "MASTER_ADDR" ||
          k == "MASTER_PORT" || k == "TESSERA_RDZV_TOKEN" || k == "TESSERA_RDZV_HOSTED")
        continue;
      env_s.push_back(kv);
    }
    for (auto kv : {detail::cat("RANK=", rank), detail::cat("WORLD_SIZE=", world), detail::cat("LOCAL_RANK=", l),
                    detail::cat("LOCAL_WORLD_SIZE=", a.nproc), "MASTER_ADDR=" + host, detail::cat("MASTER_PORT=", port),
                    "TESSERA_RDZV_TOKEN=" + token, std::string("TESSERA_RDZV_HOSTED=1")})
      env_s.push_back(kv);
    std::vector<char*> envp;
    for (auto& s : env_s) envp.push_back(s.data());
    envp.push_back(nullptr);
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw BackendError("launch", errno, "pipe failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(p[1], 1);
      ::dup2(p[1], 2);
      ::execve(program.c_str(), argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(p[1]);
    pids[static_cast<std::size_t>(l)] = pid;
    outs[static_cast<std::size_t>(l)] = p[0];
    std::fprintf(stderr, "[launch] rank %d pid %d\n", rank, static_cast<int>(pid));
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::vector<std::string> partial(static_cast<std::size_t>(a.nproc));
  std::vector<bool> running(static_cast<std::size_t>(a.nproc), true), open(static_cast<std::size_t>(a.nproc), true);
  int alive = a.nproc, first_failed = -1;
  std::string failure;
  // Every rank that exited badly, in the order they were reaped. A rank killed by a signal is the
  // likely cause when its peers then fail on a broken connection, even when a peer is reaped first;
  // a signal the launcher sent itself (the rank outlived --grace) is not.
  struct Failure {
    int rank, status;
    bool stopped_by_us;
  };
  std::vector<Failure> failures;
  std::vector<int> sent(static_cast<std::size_t>(a.nproc), 0);  // the signal the launcher sent each rank
  std::chrono::steady_clock::time_point stop_at{}, killed_at{};
  bool stopping = false;
  auto flush_line = [&](int l, const std::string& line) {
    std::printf("[rank %d] %s\n", a.node_rank * a.nproc + l, line.c_str());
    std::fflush(stdout);
  };
  while (alive > 0 || std::count(open.begin(), open.end(), true) > 0) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int l = 0; l < a.nproc; ++l)
      if (open[static_cast<std::size_t>(l)]) {
        fds.push_back({outs[static_cast<std::size_t>(l)], POLLIN, 0});
        which.push_back(l);
      }
    ::poll(fds.data(), fds.size(), 50);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const auto l = static_cast<std::size_t>(which[i]);
      char buf[4096];
      const ssize_t n = ::read(outs[l], buf, sizeof buf);
      if (n <= 0) {
        if (!partial[l].empty()) flush_line(which[i], partial[l]);
        partial[l].clear();
        open[l] = false;
        ::close(outs[l]);
        continue;
      }
      partial[l].append(buf, static_cast<std::size_t>(n));
      std::size_t nl;
      while ((nl = partial[l].find('\n')) != std::string::npos) {
        flush_line(which[i], partial[l].substr(0, nl));
        partial[l].erase(0, nl + 1);
      }
    }
    for (int l = 0; l < a.nproc; ++l) {
      const auto ul = static_cast<std::size_t>(l);
      if (!running[ul]) continue;
      int status = 0;
      if (::waitpid(pids[ul], &status, WNOHANG) != pids[ul]) continue;
      running[ul] = false;
      --alive;
      // Ctrl-C at a terminal reaches the whole process group: ranks that died of SIGINT were
      // interrupted with the launcher (which may see their exit before its own signal), not failed.
      if (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) g_interrupted = 1;
      if (g_interrupted) continue;
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        failures.push_back({a.node_rank * a.nproc + l, status, sent[ul] != 0});
      if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) || first_failed >= 0) continue;
      first_failed = a.node_rank * a.nproc + l;
      failure = describe_status(status);
      const std::string why = detail::cat("rank ", first_failed, " failed (", failure, ")");
      if (server) server->abort(why);
      stopping = true;
      stop_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long long>(a.grace_s * 1000));
    }
    if (g_interrupted && !stopping) {
      stopping = true;
      failure = "interrupted";
      if (server) server->abort("the launcher was interrupted (Ctrl-C)");
      for (int l = 0; l < a.nproc; ++l)
        if (running[static_cast<std::size_t>(l)]) ::kill(pids[static_cast<std::size_t>(l)], SIGTERM);
      stop_at = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    }
    const auto now = std::chrono::steady_clock::now();
    if (stopping && alive > 0 && now > stop_at && killed_at == std::chrono::steady_clock::time_point{}) {
      // SIGCONT too: a stopped rank (SIGSTOP, a debugger detached) gets the SIGTERM now, not the
      // SIGKILL 3 s later.
      for (int l = 0; l < a.nproc; ++l)
        if (running[static_cast<std::size_t>(l)]) {
          ::kill(pids[static_cast<std::size_t>(l)], SIGTERM);
          ::kill(pids[static_cast<std::size_t>(l)], SIGCONT);
          sent[static_cast<std::size_t>(l)] = SIGTERM;
        }
      killed_at = now;
    }
    if (killed_at != std::chrono::steady_clock::time_point{} && now > killed_at + std::chrono::seconds(3))
      for (int l = 0; l < a.nproc; ++l)
        if (running[static_cast<std::size_t>(l)]) {
          ::kill(pids[static_cast<std::size_t>(l)], SIGKILL);
          sent[static_cast<std::size_t>(l)] = SIGKILL;
        }
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

}  // namespace

void add_launch_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<LaunchArgs>();
  CLI::App* c = app.add_subcommand("launch", "Start the ranks of a job as processes (env:// rendezvous)");
  c->add_option("--nproc-per-node,--nproc", a->nproc, "Ranks (processes) on this node")->capture_default_str();
  c->add_option("--nnodes", a->nnodes, "Nodes in the job")->capture_default_str();
  c->add_option("--node-rank", a->node_rank, "This node's index")->capture_default_str();
  c->add_option("--rdzv-endpoint", a->endpoint, "host:port of the store (served by node 0; port 0 = any)")
      ->capture_default_str();
  c->add_option("--grace", a->grace_s, "Seconds the other ranks get to stop by themselves after one failed")
      ->capture_default_str();
  c->add_option("command", a->command,
                 "What each rank runs, after --: a tessera command (train ...) or any program (python3 train.py)")
      ->required();
  c->callback([&app, &action, a] {
    for (const CLI::App* sub : app.get_subcommands({})) a->tessera_commands.push_back(sub->get_name());
    action = [a] { return launch(*a); };
  });
}

}  // namespace tessera::tools
