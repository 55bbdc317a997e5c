// What the leading launcher of an elastic job and its member launchers say to each other through
// the job's agent store: the keys, and a round's plan (which member runs which ranks, where the
// round's store listens). Text, so a person can read it with any store client.
#pragma once

#include <string>
#include <vector>

#include "tessera/run/elastic.hpp"

namespace tessera::tools::rounds {

inline const std::string kCommandKey = "elastic/command";  ///< the ranks' argv, '\x1f'-separated
inline const std::string kMembersKey = "elastic/members";  ///< counter: member ids, from 1
inline const std::string kLatestKey = "elastic/latest";    ///< the newest round announced
inline const std::string kDoneKey = "elastic/done";        ///< "<exit code> <why>": the job is over
inline std::string member_key(int id) { return "elastic/member/" + std::to_string(id); }
inline std::string round_key(int r) { return "elastic/round/" + std::to_string(r); }
/// "<waitpid status> <1 when its launcher stopped it, else 0>"
inline std::string exit_key(int r, int rank) {
  return round_key(r) + "/exit/" + std::to_string(rank);
}
inline std::string end_key(int r) { return round_key(r) + "/end"; }

/// One round: its store's port, world and figures, and the ranks each member starts.
struct Plan {
  struct Part {
    int member = 0, first = 0, count = 0;
  };
  int port = 0;
  int world = 0;
  int heartbeat_ms = 0;
  run::ElasticRound figures;
  std::vector<Part> parts;

  std::string encode() const;
  /// Throws InvalidArgument naming the text when it is not a plan.
  static Plan decode(const std::string& text);
  const Part* part_of(int member) const;
};

std::string join_words(const std::vector<std::string>& words);
std::vector<std::string> split_words(const std::string& text);

/// The whole environment of one rank of `plan`: `base` plus the rendezvous variables (the round's
/// store at master_addr:plan.port) and the round's TESSERA_ELASTIC_* and TESSERA_HEARTBEAT_MS.
std::vector<std::string> rank_env(const std::vector<std::string>& base, const Plan& plan,
                                  const Plan::Part& part, int local, const std::string& master_addr,
                                  const std::string& token);

double unix_now();

}  // namespace tessera::tools::rounds
