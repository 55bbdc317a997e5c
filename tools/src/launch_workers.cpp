// WorkerGroup: fork + execve with everything built before the fork (only async-signal-safe calls
// in the child), one output pipe per rank, non-blocking reaping.
#include "launch_workers.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "tessera/core/error.hpp"

namespace tessera::tools {

bool WorkerExit::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string describe_status(int status) {
  if (WIFSIGNALED(status))
    return detail::cat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                       ")");
  return detail::cat("exit code ", WEXITSTATUS(status));
}

WorkerGroup::~WorkerGroup() {
  for (auto& p : procs_) {
    if (p.running) {
      ::kill(p.pid, SIGKILL);
      ::waitpid(p.pid, nullptr, 0);
    }
    if (p.open) ::close(p.out);
  }
}

void WorkerGroup::start(const std::string& program, const std::vector<std::string>& argv_s,
                        const std::vector<std::vector<std::string>>& envs, int first_rank,
                        bool die_with_launcher) {
  std::vector<std::string> args = argv_s;
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  for (std::size_t l = 0; l < envs.size(); ++l) {
    std::vector<std::string> env_s = envs[l];
    std::vector<char*> envp;
    for (auto& s : env_s) envp.push_back(s.data());
    envp.push_back(nullptr);
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw BackendError("launch", errno, "pipe failed");
    const pid_t pid = ::fork();
    if (pid < 0) throw BackendError("launch", errno, "fork failed");
    if (pid == 0) {
      // The parent may have died between fork and prctl: then nobody would kill this rank.
      if (die_with_launcher && (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent))
        ::_exit(126);
      ::dup2(p[1], 1);
      ::dup2(p[1], 2);
      ::execve(program.c_str(), argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(p[1]);
    Proc pr;
    pr.rank = first_rank + static_cast<int>(l);
    pr.pid = pid;
    pr.out = p[0];
    pr.running = pr.open = true;
    procs_.push_back(std::move(pr));
    std::fprintf(stderr, "[launch] rank %d pid %d\n", first_rank + static_cast<int>(l),
                 static_cast<int>(pid));
  }
}

std::vector<WorkerExit> WorkerGroup::poll(std::chrono::milliseconds wait) {
  std::vector<pollfd> fds;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < procs_.size(); ++i)
    if (procs_[i].open) {
      fds.push_back({procs_[i].out, POLLIN, 0});
      which.push_back(i);
    }
  if (fds.empty()) {
    if (running() > 0) ::usleep(static_cast<useconds_t>(wait.count() * 1000));
  } else {
    ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
  }
  auto flush_line = [](int rank, const std::string& line) {
    std::printf("[rank %d] %s\n", rank, line.c_str());
    std::fflush(stdout);
  };
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (!fds[i].revents) continue;
    Proc& p = procs_[which[i]];
    char buf[4096];
    const ssize_t n = ::read(p.out, buf, sizeof buf);
    if (n <= 0) {
      if (!p.partial.empty()) flush_line(p.rank, p.partial);
      p.partial.clear();
      p.open = false;
      ::close(p.out);
      continue;
    }
    p.partial.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = p.partial.find('\n')) != std::string::npos) {
      flush_line(p.rank, p.partial.substr(0, nl));
      p.partial.erase(0, nl + 1);
    }
  }
  std::vector<WorkerExit> exits;
  for (auto& p : procs_) {
    if (!p.running) continue;
    int status = 0;
    if (::waitpid(p.pid, &status, WNOHANG) != p.pid) continue;
    p.running = false;
    exits.push_back({p.rank, status, p.sent != 0});
  }
  const auto now = std::chrono::steady_clock::now();
  if (killed_at_ != std::chrono::steady_clock::time_point{} &&
      now > killed_at_ + std::chrono::seconds(3))
    for (auto& p : procs_)
      if (p.running && p.sent != SIGKILL) {
        ::kill(p.pid, SIGKILL);
        p.sent = SIGKILL;
      }
  return exits;
}

void WorkerGroup::stop() {
  // SIGCONT too: a stopped rank (SIGSTOP, a debugger detached) gets the SIGTERM now, not the
  // SIGKILL 3 s later.
  for (auto& p : procs_)
    if (p.running && p.sent == 0) {
      ::kill(p.pid, SIGTERM);
      ::kill(p.pid, SIGCONT);
      p.sent = SIGTERM;
    }
  if (killed_at_ == std::chrono::steady_clock::time_point{})
    killed_at_ = std::chrono::steady_clock::now();
}

int WorkerGroup::running() const {
  int n = 0;
  for (const auto& p : procs_) n += p.running;
  return n;
}

bool WorkerGroup::done() const {
  for (const auto& p : procs_)
    if (p.running || p.open) return false;
  return true;
}

std::vector<int> WorkerGroup::pids() const {
  std::vector<int> v;
  for (const auto& p : procs_) v.push_back(static_cast<int>(p.pid));
  return v;
}

std::pair<std::string, std::vector<std::string>> resolve_program(
    const std::vector<std::string>& command, const std::vector<std::string>& tessera_commands) {
  auto runnable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  const std::string& first = command.front();
  if (std::find(tessera_commands.begin(), tessera_commands.end(), first) !=
      tessera_commands.end()) {
    std::vector<std::string> argv = {"/proc/self/exe"};
    argv.insert(argv.end(), command.begin(), command.end());
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
  for (const auto& c : tessera_commands) known += (known.empty() ? "" : ", ") + c;
  TESSERA_CHECK(!path.empty() && runnable(path), "launch: '", first,
                "' is neither a tessera command (", known, ") nor an executable program",
                first.find('/') != std::string::npos ? "" : " on PATH",
                "; e.g. tessera launch --nproc 2 -- python3 train.py");
  return {path, command};
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

std::vector<std::string> inherited_env() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string k = kv.substr(0, kv.find('='));
    if (k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "LOCAL_WORLD_SIZE" ||
        k == "MASTER_ADDR" || k == "MASTER_PORT" || k == "TESSERA_RDZV_TOKEN" ||
        k == "TESSERA_RDZV_HOSTED" || k == "TESSERA_HEARTBEAT_MS" ||
        k.rfind("TESSERA_ELASTIC_", 0) == 0)
      continue;
    env.push_back(kv);
  }
  return env;
}

}  // namespace tessera::tools
