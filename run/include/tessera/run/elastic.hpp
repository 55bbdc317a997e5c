// Elastic jobs (`tessera launch --nproc MIN:MAX` / `--nnodes MIN:MAX --max-restarts N`): what a
// round is, the figures the launcher keeps of them, and what a rank of a round learns from its
// environment. The launcher (tools/src/cmd_launch_elastic.cpp) runs the rounds; this is the part
// a rank and a front end share. docs/launching.md, "Elastic jobs".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera::run {

/// What the launcher tells every rank of a round (environment variables TESSERA_ELASTIC_*), so
/// its metrics and Prometheus series say where the job stands.
struct ElasticRound {
  int round = 0;           ///< TESSERA_ELASTIC_ROUND: 0 for the first round
  int restarts = 0;        ///< TESSERA_ELASTIC_RESTARTS: membership changes used so far
  int max_restarts = 0;    ///< TESSERA_ELASTIC_MAX_RESTARTS
  int members = 0;  ///< TESSERA_ELASTIC_MEMBERS: ranks in this round, launchers with --nnodes
  double time_lost_s = 0;  ///< TESSERA_ELASTIC_TIME_LOST_S: seconds lost to earlier rounds' ends
  std::int64_t steps_lost = 0;  ///< TESSERA_ELASTIC_STEPS_LOST: steps redone so far
};

/// The round this process runs in, or nothing outside an elastic job (TESSERA_ELASTIC_ROUND
/// unset). Throws InvalidArgument naming the variable when one is malformed. `getenv` is for
/// tests (nullptr: the process's environment).
std::optional<ElasticRound> elastic_round_from_env(
    const std::function<const char*(const char*)>& getenv = nullptr);

/// The environment variables (NAME=value) that carry `r` to a rank, every field (time_lost_s in
/// the shortest form that reads back the same double).
std::vector<std::string> elastic_env(const ElasticRound& r);

/// A rank's elastic series in Prometheus text, appended to its live metrics (prometheus_text of
/// LiveFigures with `elastic`): tessera_elastic_round, tessera_elastic_restarts_total,
/// tessera_elastic_members, tessera_elastic_time_lost_seconds_total and
/// tessera_elastic_steps_lost_total, with their HELP and TYPE lines.
std::string elastic_round_prometheus_text(const ElasticRound& r);

/// One round as the launcher saw it: a line of `tessera launch --elastic-log` (JSON).
struct RoundRecord {
  int round = 0;
  int world = 0;                  ///< ranks in the round
  int members = 0;                ///< members (ranks with --nproc MIN:MAX, launchers with --nnodes)
  double started_s = 0;           ///< unix time the round's ranks were started
  double first_step_s = -1;       ///< unix time its first step completed (-1: none did)
  std::int64_t resumed_step = 0;  ///< the step its ranks resumed from (0: from the start)
  std::int64_t last_step = 0;     ///< the last step it completed
  double last_step_s = -1;        ///< unix time last_step completed (-1: no step did)
  std::string ended;   ///< "finished", or why it ended ("rank 2 lost: killed by signal 9")
  double ended_s = 0;  ///< unix time the event that ended it was seen
  /// From the event that ended the previous round to this round's first step (-1: first round,
  /// or no step completed).
  double restart_s = -1;
  /// From the previous round's last completed step until this round was back at that step: the
  /// wall time the change cost (finding it, the restart, the steps redone); -1: as above, or it
  /// never got there.
  double time_lost_s = -1;
  std::int64_t steps_lost = 0;  ///< the previous round's last step minus this round's resumed step
};

/// A RoundRecord as one JSON object (one line): every field, in the order above, doubles in the
/// shortest form that reads back the same; a negative first_step_s, restart_s or time_lost_s
/// (unknown) is null (docs/records.md, "Elastic round").
std::string round_json(const RoundRecord& r);

/// The launcher's series in Prometheus text (version 0.0.4): tessera_elastic_round,
/// tessera_elastic_restarts_total, tessera_elastic_max_restarts, tessera_elastic_members,
/// tessera_elastic_world_size, tessera_elastic_steps_lost_total,
/// tessera_elastic_time_lost_seconds_total, tessera_elastic_last_restart_seconds,
/// tessera_elastic_last_step. `rounds` in order, the current one last: round, members, world size
/// and last step are the last round's; steps lost is summed over the rounds, and so is time lost
/// where it is known (a round not yet back at the step reached counts nothing);
/// last_restart_seconds is the restart_s of the last round that has one, absent while none has. No
/// rounds yet: round 0 and zeros. Throws InvalidArgument for a negative restarts or max_restarts.
std::string elastic_prometheus_text(const std::vector<RoundRecord>& rounds, int restarts,
                                    int max_restarts);

}  // namespace tessera::run
