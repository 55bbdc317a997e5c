// FaultComm: TESSERA_FAULT parsed, and the faults injected (fault_comm.hpp says what each is).
#include "fault_comm.hpp"

#include "tessera/run/elastic.hpp"

#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "tessera/nn/halo_exchange.hpp"

namespace tessera::run {

namespace {

[[noreturn]] void bad(const std::string& value, const std::string& why) {
  throw InvalidArgument(detail::cat(kFaultVariable, "='", value, "': ", why, "; expected ",
                                    kFaultSyntax, " (unset it to run without an injected fault)"));
}

std::int64_t parse_number(const std::string& value, const std::string& field,
                          const std::string& text, std::int64_t min) {
  std::int64_t x = 0;
  std::size_t used = 0;
  try {
    x = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || x < min)
    bad(value, detail::cat(field, "=", text, " is not an integer >= ", min));
  return x;
}

const char* action_name(FaultSpec::Action a) {
  switch (a) {
    case FaultSpec::Action::Kill:
      return "killing this rank (SIGKILL)";
    case FaultSpec::Action::Stall:
      return "stopping this rank (SIGSTOP)";
    case FaultSpec::Action::Drop:
      return "dropping every TCP connection of this rank";
  }
  return "?";
}

const char* place_name(FaultSpec::Place p) {
  switch (p) {
    case FaultSpec::Place::Forward:
      return "its first forward halo exchange";
    case FaultSpec::Place::Halo:
      return "its first backward halo exchange";
    case FaultSpec::Place::AllReduce:
      return "its first gradient all-reduce";
    case FaultSpec::Place::Pipeline:
      return "its first transfer to or from another pipeline stage";
  }
  return "?";
}

/// The microseconds of `t` as six digits ("%06ld").
std::string microseconds(const timespec& t) {
  const std::string us = std::to_string(t.tv_nsec / 1000);
  return std::string(us.size() < 6 ? 6 - us.size() : 0, '0') + us;
}

}  // namespace

FaultSpec parse_fault(const std::string& value) {
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t colon = value.find(':', start);
    parts.push_back(
        value.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() != 4 && parts.size() != 5)
    bad(value,
        detail::cat(parts.size(), " field(s) separated by ':', not 4 (or 5 with round=<R>)"));
  FaultSpec f;
  f.text = value;
  if (parts[0] == "kill")
    f.action = FaultSpec::Action::Kill;
  else if (parts[0] == "stall")
    f.action = FaultSpec::Action::Stall;
  else if (parts[0] == "drop")
    f.action = FaultSpec::Action::Drop;
  else
    bad(value, "unknown action '" + parts[0] + "'");
  if (parts[1] == "forward")
    f.place = FaultSpec::Place::Forward;
  else if (parts[1] == "halo")
    f.place = FaultSpec::Place::Halo;
  else if (parts[1] == "allreduce")
    f.place = FaultSpec::Place::AllReduce;
  else if (parts[1] == "pipeline")
    f.place = FaultSpec::Place::Pipeline;
  else
    bad(value, "unknown place '" + parts[1] + "'");
  bool have_step = false, have_rank = false, have_round = false;
  for (std::size_t i = 2; i < parts.size(); ++i) {
    const std::string& kv = parts[i];
    const std::size_t eq = kv.find('=');
    const std::string key = kv.substr(0, eq),
                      val = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (key == "step" && !have_step) {
      f.step = parse_number(value, key, val, 1);
      have_step = true;
    } else if (key == "rank" && !have_rank) {
      f.rank = static_cast<int>(parse_number(value, key, val, 0));
      have_rank = true;
    } else if (key == "round" && !have_round) {
      f.round = static_cast<int>(parse_number(value, key, val, 0));
      have_round = true;
    } else {
      bad(value, "'" + kv + "' is neither step=<N>, rank=<R> nor round=<R> (each once)");
    }
  }
  if (!have_step || !have_rank) bad(value, "step=<N> and rank=<R> are both needed");
  return f;
}

std::optional<FaultSpec> fault_from_env() {
  const char* v = std::getenv(kFaultVariable);
  if (!v || !*v) return std::nullopt;
  FaultSpec f = parse_fault(v);
  // round=<R>: only in that round of an elastic job (outside one, the job is round 0); the other
  // rounds run without it, whatever their world size.
  const auto round = elastic_round_from_env();
  if (f.round >= 0 && f.round != (round ? round->round : 0)) return std::nullopt;
  return f;
}

int drop_tcp_connections() noexcept {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  std::vector<int> fds;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && fd != ::dirfd(d)) fds.push_back(static_cast<int>(fd));
  }
  ::closedir(d);
  int n = 0;
  for (int fd : fds) {
    int type = 0, proto = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    len = sizeof proto;
    if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0 || proto != IPPROTO_TCP)
      continue;
    sockaddr_storage addr{};
    len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) continue;
    if (::shutdown(fd, SHUT_RDWR) == 0) ++n;
  }
  return n;
}

void FaultComm::maybe_inject(FaultSpec::Place here) {
  FaultState& s = *state_;
  if (here != s.spec.place || s.world_rank != s.spec.rank || s.step.load() + 1 != s.spec.step)
    return;
  if (s.fired.exchange(true)) return;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  // One line, reported (the CLI prints it to stderr at once) before the fault, with the
  // wall-clock time the bench measures from; stdout is flushed so the steps before it are shown.
  core::report(core::ReportLevel::Warning,
               detail::cat(kFaultVariable, "=", s.spec.text, ": rank ", s.world_rank, ": ",
                           action_name(s.spec.action), " at ", place_name(here), " of step ",
                           s.spec.step, " (unix time ", now.tv_sec, ".", microseconds(now), ")"));
  std::fflush(stdout);
  switch (s.spec.action) {
    case FaultSpec::Action::Kill:
      ::kill(::getpid(), SIGKILL);
      break;
    case FaultSpec::Action::Stall:
      ::kill(::getpid(), SIGSTOP);
      break;
    case FaultSpec::Action::Drop: {
      const int n = drop_tcp_connections();
      core::report(core::ReportLevel::Warning,
                   detail::cat(kFaultVariable, ": rank ", s.world_rank, ": shut down ", n,
                               " TCP connection(s); carrying on"));
      break;
    }
  }
}

void FaultComm::p2p_place(const std::vector<comm::P2POp>& ops) {
  // Pipeline stages send and receive under the trainer's "pipeline.*" scopes.
  if (state_->scope && state_->scope->layer.rfind("pipeline.", 0) == 0)
    return maybe_inject(FaultSpec::Place::Pipeline);
  // Forward halos travel under nn::kHaloTag, their adjoint (backward) under kHaloTag + 1.
  for (const comm::P2POp& op : ops) {
    if (op.tag == nn::kHaloTag) return maybe_inject(FaultSpec::Place::Forward);
    if (op.tag == nn::kHaloTag + 1) return maybe_inject(FaultSpec::Place::Halo);
  }
}

comm::WorkPtr FaultComm::all_reduce(comm::BufferView buf, comm::ReduceOp op) {
  if (state_->scope && state_->scope->layer == "grad_bucket")
    maybe_inject(FaultSpec::Place::AllReduce);
  return inner().all_reduce(buf, op);
}

comm::WorkPtr FaultComm::batch_p2p(const std::vector<comm::P2POp>& ops) {
  p2p_place(ops);
  return inner().batch_p2p(ops);
}

std::unique_ptr<comm::Backend> FaultComm::decorate_split(std::unique_ptr<comm::Backend> sub,
                                                         const std::vector<int>&) {
  return std::make_unique<FaultComm>(std::move(sub), state_);
}

}  // namespace tessera::run
