// `tessera launch` for elastic jobs: --nproc MIN:MAX (one host, process ranks) or --nnodes MIN:MAX
// (launchers), --max-restarts N, --join-timeout, and `--join HOST:PORT` for a launcher that brings
// ranks to a running job. The leading launcher keeps the membership (its agent store watches every
// member launcher's connection), runs the job in rounds (each with its own store, whose heartbeats
// find a stopped rank) and starts a new round, on the new world, when a member is lost or joins.
// docs/launching.md, "Elastic jobs".
#pragma once

#include <string>
#include <vector>

namespace tessera::tools {

struct ElasticArgs {
  int min = 1, max = 1;  ///< bounds on the members: ranks (--nproc MIN:MAX) or launchers (--nnodes)
  bool by_nodes = false;  ///< members are launchers (--nnodes MIN:MAX), not ranks
  int nproc = 1;          ///< ranks this launcher brings
  int max_restarts = 0;
  double join_timeout_s = 30;      ///< how long a round waits for members before it starts
  double heartbeat_timeout_s = 5;  ///< a rank silent this long is lost (it heartbeats 5× as often)
  double grace_s = 10;             ///< after a round's first failure, before its ranks are stopped
  std::string endpoint = "127.0.0.1:0";  ///< leader: where its store listens; member: the leader's
  bool member = false;                   ///< joins a leader's job (--join, or --node-rank > 0)
  std::vector<std::string> command;      ///< empty for a member: the leader's is used
  std::vector<std::string> tessera_commands;  ///< this binary's subcommands
  std::string elastic_log;                    ///< leader: one JSON line per round (run::round_json)
  std::string metrics_textfile;  ///< leader: run::elastic_prometheus_text after every round event
};

/// Runs the job (leader) or this launcher's part of it (member); the process exit code.
int launch_elastic(const ElasticArgs& args);

}  // namespace tessera::tools
