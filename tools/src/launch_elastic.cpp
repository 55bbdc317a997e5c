// The leading launcher of an elastic job: its agent store (the membership: every member launcher's
// connection is watched), then round after round: a plan over the members, a fresh store for the
// round's ranks (heartbeats find a stopped one), its own ranks started, every rank's end collected,
// and the round judged: finished, a membership change (a rank or member lost, a member joined: a
// new round if restarts remain), or an error of the program (the job stops, as without elasticity).
#include "launch_elastic.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "launch_rounds.hpp"
#include "launch_workers.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/run/elastic.hpp"
#include "tessera/run/launch.hpp"

namespace tessera::tools {

int run_member(const ElasticArgs& a);  // launch_member.cpp

namespace {

using Clock = std::chrono::steady_clock;
volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

/// What store threads report, taken by the leader's loop.
struct Events {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> lost_members;
  struct Lost {
    int rank;
    std::string why;
    double at;
  };
  std::vector<Lost> lost_ranks;
};

struct Member {
  int id = 0, slots = 0;
  bool alive = true;
};

enum class Outcome { Finished, Changed, Failed, Interrupted };

/// One round's ranks as the leader follows them.
struct RoundState {
  rounds::Plan plan;
  std::map<int, int> member_of;     ///< rank → member id
  std::set<int> pending;            ///< ranks not yet ended
  std::vector<WorkerExit> exits;    ///< in the order seen
  std::map<int, std::string> lost;  ///< rank → why (the store's word, a signal, its member)
  std::string joined;               ///< why it ends for a joiner ("" none)
  bool ending = false, interrupted = false, ended_key = false;
  Clock::time_point stop_at{};
};

class Leader {
 public:
  explicit Leader(const ElasticArgs& a);
  int run();

 private:
  void take_joiners();
  void take_lost_members(RoundState* s);
  int usable_world() const;
  bool gather(int round);
  rounds::Plan make_plan(int round) const;
  Outcome run_round(int round, run::RoundRecord& rec);
  void follow(RoundState& s, WorkerGroup& group, run::StoreServer& store, run::RoundRecord& rec,
              int r);
  void watch_progress(run::StoreServer& store, run::RoundRecord& rec);
  void begin_end(RoundState& s, run::StoreServer& store, const std::string& why, bool at_once);
  void record(const run::RoundRecord& rec);
  int finish(int code, const std::string& why);
  void shrink(const RoundState& s);

  ElasticArgs a_;
  std::string host_, bind_, token_;
  std::pair<std::string, std::vector<std::string>> program_;
  std::shared_ptr<Events> events_ = std::make_shared<Events>();
  std::unique_ptr<run::StoreServer> agents_;
  std::map<int, Member> members_;
  int restarts_ = 0;
  std::vector<run::RoundRecord> records_;
};

Leader::Leader(const ElasticArgs& a) : a_(a) {
  TESSERA_CHECK(!a.command.empty(),
                "launch: nothing to run; e.g. tessera launch --nproc 2:3 --max-restarts 3 -- "
                "train --backend ucx --mesh dp=auto --save ck --save-every 5 --resume auto");
  program_ = resolve_program(a.command, a.tessera_commands);
  const auto colon = a.endpoint.rfind(':');
  TESSERA_CHECK(colon != std::string::npos, "--rdzv-endpoint '", a.endpoint,
                "': expected host:port");
  host_ = a.endpoint.substr(0, colon);
  bind_ = a.by_nodes ? "0.0.0.0" : host_;
  const char* t = std::getenv("TESSERA_RDZV_TOKEN");
  token_ = t && *t ? t : fresh_token();
  run::StoreServer::Options so;
  so.host = bind_;
  so.port = std::stoi(a.endpoint.substr(colon + 1));
  so.token = token_;
  so.abort_on_rank_lost = false;  // a lost member launcher ends a round, not the job
  so.on_rank_lost = [ev = events_](int member, const std::string& why) {
    std::lock_guard lock(ev->mu);
    ev->lost_members.emplace_back(member, why);
  };
  so.log = [](const std::string& m) { std::fprintf(stderr, "[launch] members: %s\n", m.c_str()); };
  agents_ = std::make_unique<run::StoreServer>(so);
  agents_->set(rounds::kCommandKey, rounds::join_words(a.command));
  members_[0] = Member{0, a.nproc, true};
  std::fprintf(stderr,
               "[launch] elastic job: %d to %d %s, up to %d restart(s); launchers join with "
               "`tessera launch --join %s:%d --nproc K` and this job's TESSERA_RDZV_TOKEN%s\n",
               a.min, a.max, a.by_nodes ? "launchers" : "ranks", a.max_restarts, host_.c_str(),
               agents_->port(),
               t && *t ? "" : " (none was set: this one is random, so no launcher can join)");
}

void Leader::take_joiners() {
  const auto n = agents_->get(rounds::kMembersKey);
  const int known = n ? std::stoi(*n) : 0;
  for (int id = 1; id <= known; ++id) {
    if (members_.count(id)) continue;
    const auto slots = agents_->get(rounds::member_key(id));
    if (!slots) continue;  // counted but not yet announced: next time
    members_[id] = Member{id, std::stoi(*slots), true};
    std::fprintf(stderr, "[launch] launcher %d joined with %s rank(s)\n", id, slots->c_str());
  }
}

/// Marks the launchers the agent store lost; with a round running (`s`), their ranks end lost.
void Leader::take_lost_members(RoundState* s) {
  std::vector<std::pair<int, std::string>> lost;
  {
    std::lock_guard lock(events_->mu);
    lost.swap(events_->lost_members);
  }
  for (auto& [id, why] : lost) {
    auto it = members_.find(id);
    if (it == members_.end() || !it->second.alive) continue;
    it->second.alive = false;
    std::fprintf(stderr, "[launch] launcher %d lost: %s\n", id, why.c_str());
    if (!s) continue;
    for (auto [rank, m] : s->member_of)
      if (m == id && s->pending.erase(rank))
        s->lost[rank] = detail::cat("its launcher ", id, " was lost");
  }
}

/// The world the next round would have (make_plan's), or 0 when it would be below MIN.
int Leader::usable_world() const {
  const rounds::Plan p = make_plan(0);
  return p.figures.members >= a_.min ? p.world : 0;
}

/// Waits for members: the first round up to --join-timeout for MAX, later rounds only until MIN.
bool Leader::gather(int round) {
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(std::llround(a_.join_timeout_s * 1000));
  for (;;) {
    take_joiners();
    take_lost_members(nullptr);
    int launchers = 0, ranks = 0;
    for (const auto& [id, m] : members_)
      if (m.alive && m.slots > 0) ++launchers, ranks += m.slots;
    const int have = a_.by_nodes ? launchers : ranks;
    if (have >= a_.max || (round > 0 && have >= a_.min)) return true;
    if (Clock::now() > deadline || g_stop) return have >= a_.min;
    ::usleep(50000);
  }
}

rounds::Plan Leader::make_plan(int round) const {
  rounds::Plan p;
  int launchers = 0;
  for (const auto& [id, m] : members_) {
    if (!m.alive || m.slots == 0) continue;
    if (a_.by_nodes && launchers == a_.max) break;
    const int n = a_.by_nodes ? m.slots : std::min(m.slots, a_.max - p.world);
    if (n == 0) break;
    p.parts.push_back({id, p.world, n});
    p.world += n;
    ++launchers;
  }
  p.heartbeat_ms = std::max(50, static_cast<int>(std::lround(a_.heartbeat_timeout_s * 1000 / 5)));
  p.figures.round = round;
  p.figures.restarts = restarts_;
  p.figures.max_restarts = a_.max_restarts;
  // What --nproc MIN:MAX and --nnodes MIN:MAX count: ranks, or launchers.
  p.figures.members = a_.by_nodes ? static_cast<int>(p.parts.size()) : p.world;
  for (const auto& r : records_) {
    p.figures.steps_lost += r.steps_lost;
    if (r.time_lost_s > 0) p.figures.time_lost_s += r.time_lost_s;
  }
  return p;
}

void Leader::begin_end(RoundState& s, run::StoreServer& store, const std::string& why,
                       bool at_once) {
  const auto soon = Clock::now() + std::chrono::seconds(3);
  if (s.ending) {
    if (at_once) s.stop_at = std::min(s.stop_at, soon);
    return;
  }
  s.ending = true;
  store.abort(why);
  // A membership change leaves the survivors nothing to finish: they stop by themselves within
  // a fraction of a second of the abort (a rank writing a checkpoint finishes it first), and any
  // still running after 3 s are stopped. A program's own error gets --grace, as without
  // elasticity.
  s.stop_at =
      at_once ? soon : Clock::now() + std::chrono::milliseconds(std::llround(a_.grace_s * 1000));
}

void Leader::watch_progress(run::StoreServer& store, run::RoundRecord& rec) {
  auto read = [&](const std::string& key, long long& step, double& at) {
    const auto v = store.get(key);
    return v && std::sscanf(v->c_str(), "%lld %lf", &step, &at) == 2;
  };
  long long step = 0;
  double at = 0;
  if (rec.first_step_s < 0 && read("tessera/first_step", step, at)) {
    rec.first_step_s = at;
    rec.resumed_step = step - 1;
  }
  if (!read("tessera/progress", step, at)) return;
  rec.last_step = step;
  rec.last_step_s = at;
  if (records_.empty() || rec.time_lost_s >= 0) return;
  const run::RoundRecord& prev = records_.back();
  if (rec.first_step_s >= 0 && rec.restart_s < 0) {
    rec.restart_s = rec.first_step_s - prev.ended_s;
    rec.steps_lost = std::max<std::int64_t>(0, prev.last_step - rec.resumed_step);
  }
  // From the last step known good: the part of a step cut short, the time until the loss was
  // seen (a stall's heartbeat deadline) and the steps redone all count.
  if (step >= prev.last_step)
    rec.time_lost_s = at - (prev.last_step_s >= 0 ? prev.last_step_s : prev.ended_s);
}

/// Whether a loss seen at `at` is one of those that ended the round: before it began ending, or
/// within half a second of that (ranks lost together). Later ones are the round's own teardown (a
/// rank stopped by the launcher, one that crashed while going) and do not change the membership.
bool counts(const RoundState& s, const run::RoundRecord& rec, double at = rounds::unix_now()) {
  return !s.ending || at <= rec.ended_s + 0.5;
}

void Leader::follow(RoundState& s, WorkerGroup& group, run::StoreServer& store,
                    run::RoundRecord& rec, int r) {
  while (!s.pending.empty()) {
    std::vector<WorkerExit> seen = group.poll(std::chrono::milliseconds(50));
    {
      // Before the exits: a peer's error exit usually comes from the abort this loss caused. Ranks
      // the launcher stopped itself also drop their connections: those are not losses.
      std::lock_guard lock(events_->mu);
      for (const auto& l : events_->lost_ranks)
        if (counts(s, rec, l.at) && s.lost.emplace(l.rank, l.why).second) {
          if (!s.ending) rec.ended_s = l.at;
          begin_end(s, store, l.why, true);
        }
      events_->lost_ranks.clear();
    }
    for (int rank : std::set<int>(s.pending))
      if (s.member_of[rank] != 0)
        if (auto v = agents_->get(rounds::exit_key(r, rank))) {
          int status = 0, stopped = 0;  // "<waitpid status> <1: its launcher stopped it>"
          std::sscanf(v->c_str(), "%d %d", &status, &stopped);
          seen.push_back({rank, status, stopped != 0});
        }
    for (const WorkerExit& x : seen) {
      if (!s.pending.erase(x.rank)) continue;
      s.exits.push_back(x);
      if (WIFSIGNALED(x.status) && !x.stopped_by_us && WTERMSIG(x.status) != SIGINT &&
          counts(s, rec))
        s.lost.emplace(x.rank, describe_status(x.status));
      if (!x.ok() && !s.ending) {
        rec.ended_s = rounds::unix_now();
        begin_end(s, store,
                  detail::cat("rank ", x.rank, " ended (", describe_status(x.status), ")"),
                  WIFSIGNALED(x.status));
      }
    }
    take_lost_members(&s);
    watch_progress(store, rec);
    take_joiners();
    if (!s.ending && usable_world() > s.plan.world) {
      s.joined = "a launcher joined: the mesh re-forms in a new round";
      rec.ended_s = rounds::unix_now();
      begin_end(s, store, "re-forming: " + s.joined, true);
    }
    if (!s.ending && !s.lost.empty()) {
      rec.ended_s = rounds::unix_now();
      begin_end(s, store, s.lost.begin()->second, true);
    }
    if (g_stop && !s.interrupted) {
      s.interrupted = true;
      begin_end(s, store, "the launcher was interrupted (Ctrl-C)", true);
      s.stop_at = Clock::now();
    }
    // Only lost ranks left: a stalled one never ends by itself, so there is nothing to wait for.
    if (s.ending &&
        std::all_of(s.pending.begin(), s.pending.end(), [&](int x) { return s.lost.count(x) > 0; }))
      s.stop_at = std::min(s.stop_at, Clock::now());
    if (s.ending && Clock::now() > s.stop_at && !s.ended_key) {
      s.ended_key = true;
      group.stop();
      agents_->set(rounds::end_key(r), "1");
    }
  }
  while (!group.done()) group.poll(std::chrono::milliseconds(50));
  agents_->set(rounds::end_key(r), "1");
}

Outcome Leader::run_round(int r, run::RoundRecord& rec) {
  RoundState s;
  s.plan = make_plan(r);
  run::StoreServer::Options so;
  so.host = bind_;
  so.port = 0;
  so.token = token_;
  so.heartbeat_timeout = std::chrono::milliseconds(std::llround(a_.heartbeat_timeout_s * 1000));
  so.on_rank_lost = [ev = events_](int rank, const std::string& why) {
    std::lock_guard lock(ev->mu);
    ev->lost_ranks.push_back({rank, why, rounds::unix_now()});
  };
  so.log = [r](const std::string& m) {
    std::fprintf(stderr, "[launch] round %d store: %s\n", r, m.c_str());
  };
  run::StoreServer store(so);
  s.plan.port = store.port();
  for (const auto& part : s.plan.parts)
    for (int i = 0; i < part.count; ++i) {
      s.member_of[part.first + i] = part.member;
      s.pending.insert(part.first + i);
    }
  rec.round = r;
  rec.world = s.plan.world;
  rec.members = s.plan.figures.members;
  rec.started_s = rounds::unix_now();
  agents_->set(rounds::round_key(r), s.plan.encode());
  agents_->set(rounds::kLatestKey, std::to_string(r));
  std::string who;
  for (const auto& p : s.plan.parts)
    who += detail::cat(who.empty() ? "" : ", ", "launcher ", p.member, ": ", p.count);
  std::fprintf(stderr, "[launch] round %d: %d rank(s) (%s), restarts used %d of %d\n", r,
               s.plan.world, who.c_str(), restarts_, a_.max_restarts);
  WorkerGroup group;
  if (const auto* own = s.plan.part_of(0)) {
    std::vector<std::vector<std::string>> envs;
    for (int l = 0; l < own->count; ++l)
      envs.push_back(rounds::rank_env(inherited_env(), s.plan, *own, l, host_, token_));
    group.start(program_.first, program_.second, envs, own->first, true);
  }
  follow(s, group, store, rec, r);
  watch_progress(store, rec);
  // Every rank of the plan ended well: the job is done, whatever a store saw of their exits.
  const auto ok =
      std::count_if(s.exits.begin(), s.exits.end(), [](const WorkerExit& x) { return x.ok(); });
  if (s.interrupted) return Outcome::Interrupted;
  if (ok == s.plan.world) {
    rec.ended = "finished";
    rec.ended_s = rounds::unix_now();  // its last rank's end: the event that ended it
    return Outcome::Finished;
  }
  if (!s.lost.empty() || !s.joined.empty()) {
    for (const auto& [rank, why] : s.lost) {
      // The store's words already name the rank ("rank 2 stopped answering: ...").
      const std::string named = detail::cat("rank ", rank, " ");
      rec.ended += (rec.ended.empty() ? "" : "; ") +
                   (why.rfind(named, 0) == 0 ? why : detail::cat("rank ", rank, " lost: ", why));
    }
    if (!s.joined.empty()) rec.ended += (rec.ended.empty() ? "" : "; ") + s.joined;
    shrink(s);
    return Outcome::Changed;
  }
  // The rank that failed first says so in the round's store ("rank 0 failed: <its error>")
  // before it exits; the first exit reaped may be a peer's that stopped on that abort.
  const std::string reason = store.abort_reason();
  if (reason.rfind("rank ", 0) == 0 && reason.find(" failed: ") != std::string::npos) {
    rec.ended = reason;
    return Outcome::Failed;
  }
  for (const auto& x : s.exits)
    if (!x.ok()) {
      rec.ended = detail::cat("rank ", x.rank, " failed (", describe_status(x.status), ")");
      break;
    }
  return Outcome::Failed;
}

/// A lost rank gives up its place (--nproc MIN:MAX) while the world stays at MIN or more; at MIN
/// it is started again in the next round, as a fixed-size job restarts its ranks. Launchers
/// (--nnodes) keep their ranks: only a lost launcher leaves.
void Leader::shrink(const RoundState& s) {
  if (a_.by_nodes) return;
  int world = 0;
  for (const auto& [id, m] : members_)
    if (m.alive) world += m.slots;
  for (const auto& [rank, why] : s.lost) {
    auto it = members_.find(s.member_of.at(rank));
    if (!it->second.alive || world - 1 < a_.min) continue;
    --it->second.slots;
    --world;
  }
}

void Leader::record(const run::RoundRecord& rec) {
  records_.push_back(rec);
  try {
    if (!a_.elastic_log.empty()) {
      std::string text;
      for (const auto& r : records_) text += run::round_json(r) + "\n";
      core::write_file_atomic(a_.elastic_log, text);
    }
    if (!a_.metrics_textfile.empty())
      core::write_file_atomic(a_.metrics_textfile,
                              run::elastic_prometheus_text(records_, restarts_, a_.max_restarts));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[launch] could not write the round log: %s\n", e.what());
  }
}

int Leader::finish(int code, const std::string& why) {
  agents_->set(rounds::kDoneKey, detail::cat(code, " ", why));
  std::fprintf(stderr, "tessera launch: %s\n", why.c_str());
  // Member launchers read the verdict before the store goes: give them a moment to see it.
  for (int i = 0; i < 20 && !agents_->ranks().empty(); ++i) ::usleep(50000);
  return code;
}

int Leader::run() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  for (int r = 0;; ++r) {
    if (!gather(r)) {
      if (g_stop) return finish(130, "interrupted while waiting for members");
      return finish(1, detail::cat("round ", r, ": fewer than ", a_.min,
                                   a_.by_nodes ? " launchers" : " ranks", " (the MIN of ",
                                   a_.by_nodes ? "--nnodes" : "--nproc", ") within --join-timeout ",
                                   a_.join_timeout_s, " s; stopped"));
    }
    run::RoundRecord rec;
    const Outcome o = run_round(r, rec);
    record(rec);
    if (o == Outcome::Finished)
      return finish(0, detail::cat("finished in round ", r, " after ", restarts_, " restart(s)"));
    if (o == Outcome::Interrupted) return finish(130, "interrupted; stopped every rank");
    if (o == Outcome::Failed)
      return finish(1, rec.ended +
                           "; stopped the other ranks (an error of the program, not of membership: "
                           "no restart)");
    if (restarts_ == a_.max_restarts)
      return finish(1, detail::cat("round ", r, " ended (", rec.ended, ") but --max-restarts ",
                                   a_.max_restarts, " are used up; stopped"));
    ++restarts_;
    std::fprintf(stderr, "[launch] round %d ended: %s; restart %d of %d\n", r, rec.ended.c_str(),
                 restarts_, a_.max_restarts);
  }
}

}  // namespace

int launch_elastic(const ElasticArgs& a) {
  if (a.member) return run_member(a);
  Leader leader(a);
  return leader.run();
}

}  // namespace tessera::tools
