// The rank processes one `tessera launch` starts on its node: forked and exec'd with their
// variables, their output prefixed "[rank r]" line by line, reaped, and stopped (SIGTERM with a
// SIGCONT, SIGKILL 3 s later). Elastic rounds start a group per round (cmd_launch_elastic.cpp).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace tessera::tools {

/// A rank process that ended: its world rank, waitpid status and whether the launcher's own
/// signal ended it.
struct WorkerExit {
  int rank = 0;
  int status = 0;
  bool stopped_by_us = false;
  bool ok() const;
};

/// "exit code 1", "killed by signal 9 (Killed)".
std::string describe_status(int status);

/// The program the ranks execute and its argv: this tessera binary when the command starts with
/// one of its subcommands, else the program named (a path, or a name looked up on PATH), as
/// torchrun runs `python script.py`. Throws InvalidArgument when it is neither.
std::pair<std::string, std::vector<std::string>> resolve_program(
    const std::vector<std::string>& command, const std::vector<std::string>& tessera_commands);
/// 128 random bits in hex: a job's token when TESSERA_RDZV_TOKEN is unset.
std::string fresh_token();
/// This process's environment (NAME=value) without the variables a launcher sets for its ranks.
std::vector<std::string> inherited_env();

class WorkerGroup {
 public:
  WorkerGroup() = default;
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;
  ~WorkerGroup();  ///< kills what still runs (SIGKILL) and reaps it

  /// Starts one process per entry of `envs` (its whole environment, NAME=value), world ranks
  /// first_rank, first_rank+1, …, each running `program` with `argv`. With `die_with_launcher`
  /// each gets SIGKILL when the launcher dies, so a lost member takes its ranks with it.
  void start(const std::string& program, const std::vector<std::string>& argv,
             const std::vector<std::vector<std::string>>& envs, int first_rank,
             bool die_with_launcher);

  /// Waits up to `wait` for output, prints every complete line with its prefix, reaps exits;
  /// returns the exits seen in this call.
  std::vector<WorkerExit> poll(std::chrono::milliseconds wait);
  /// SIGTERM + SIGCONT to every running rank now; SIGKILL to those still running 3 s later (done
  /// by poll()).
  void stop();
  int running() const;
  bool done() const;  ///< every process reaped and every output pipe drained
  std::vector<int> pids() const;

 private:
  struct Proc {
    int rank = 0;
    pid_t pid = -1;
    int out = -1;
    bool running = false, open = false;
    int sent = 0;
    std::string partial;
  };
  std::vector<Proc> procs_;
  std::chrono::steady_clock::time_point killed_at_{};
};

}  // namespace tessera::tools
