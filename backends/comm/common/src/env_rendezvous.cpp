// env:// rendezvous: torchrun / Open MPI / Slurm variables, the store on rank 0, the join barrier.
#include "tessera/comm/env_rendezvous.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"

namespace tessera::comm {

namespace {

int parse_int(const char* name, const char* v) {
  try {
    std::size_t used = 0;
    const int x = std::stoi(v, &used);
    if (used == std::string(v).size()) return x;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(detail::cat("environment variable ", name, "='", v, "' is not an integer"));
}

/// First host of a Slurm node list: "node[01-04,07],gpu2" -> "node01".
std::string first_slurm_host(std::string list) {
  const auto comma = list.find(',');
  const auto bracket = list.find('[');
  if (bracket != std::string::npos && (comma == std::string::npos || bracket < comma)) {
    std::string prefix = list.substr(0, bracket), rest = list.substr(bracket + 1);
    const auto end = rest.find_first_of("-,]");
    return prefix + rest.substr(0, end);
  }
  return list.substr(0, comma);
}

}  // namespace

EnvInfo read_env(const std::function<const char*(const char*)>& getenv_fn) {
  auto get = [&](const char* n) -> const char* { return getenv_fn ? getenv_fn(n) : std::getenv(n); };
  auto num = [&](const char* n, int dflt) { const char* v = get(n); return v && *v ? parse_int(n, v) : dflt; };
  EnvInfo e;
  if (get("RANK") && get("WORLD_SIZE")) {
    e.source = "torchrun";
    e.rank = num("RANK", 0);
    e.size = num("WORLD_SIZE", 1);
    e.local_rank = num("LOCAL_RANK", e.rank);
    e.local_size = num("LOCAL_WORLD_SIZE", e.size);
  } else if (get("OMPI_COMM_WORLD_RANK")) {
    e.source = "openmpi";
    e.rank = num("OMPI_COMM_WORLD_RANK", 0);
    e.size = num("OMPI_COMM_WORLD_SIZE", 1);
    e.local_rank = num("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    e.local_size = num("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (get("SLURM_PROCID")) {
    e.source = "slurm";
    e.rank = num("SLURM_PROCID", 0);
    e.size = num("SLURM_NTASKS", 1);
    e.local_rank = num("SLURM_LOCALID", 0);
    e.local_size = num("SLURM_NTASKS_PER_NODE", 1);
    if (const char* nodes = get("SLURM_JOB_NODELIST")) e.addr = first_slurm_host(nodes);
  } else if (get("PMI_RANK")) {
    e.source = "pmi";
    e.rank = num("PMI_RANK", 0);
    e.size = num("PMI_SIZE", 1);
  } else {
    e.source = "default";
  }
  if (const char* a = get("MASTER_ADDR"); a && *a) e.addr = a;
  e.port = num("MASTER_PORT", e.port);
  e.bind = get("TESSERA_RDZV_BIND") ? get("TESSERA_RDZV_BIND") : e.addr;
  e.hosted = get("TESSERA_RDZV_HOSTED") && std::string(get("TESSERA_RDZV_HOSTED")) == "1";
  e.heartbeat_ms = num("TESSERA_HEARTBEAT_MS", 0);
  TESSERA_CHECK(e.heartbeat_ms >= 0, "environment variable TESSERA_HEARTBEAT_MS='", e.heartbeat_ms,
                "' must be an integer >= 0: the milliseconds between the rank's heartbeats "
                "(0 = none)");
  if (const char* t = get("TESSERA_RDZV_TOKEN"); t && *t) e.token = t;
  else if (const char* j = get("SLURM_JOB_ID")) e.token = detail::cat("slurm-", j, "-", get("SLURM_STEP_ID") ? get("SLURM_STEP_ID") : "0");
  else if (const char* ns = get("PMIX_NAMESPACE")) e.token = detail::cat("pmix-", ns);
  TESSERA_CHECK(e.size >= 1 && e.rank >= 0 && e.rank < e.size, "rank ", e.rank, " of a job of ", e.size,
                " ranks (from the ", e.source, " variables): the rank must lie in [0, size)");
  TESSERA_CHECK(e.port > 0 && e.port < 65536, "MASTER_PORT ", e.port, " is not a TCP port");
  TESSERA_CHECK(e.size == 1 || !e.token.empty(), "a job of ", e.size,
                " ranks needs a rendezvous token: set TESSERA_RDZV_TOKEN to the same fresh value on every "
                "rank (tessera launch does this for you)");
  return e;
}

EnvRendezvous::EnvRendezvous(const EnvInfo& info, std::chrono::milliseconds timeout)
    : info_(info), timeout_(timeout) {
  if (info_.rank == 0 && !info_.hosted) {
    TcpStoreServer::Options so;
    so.host = info_.bind;
    so.port = info_.port;
    so.token = info_.token;
    server_ = std::make_unique<TcpStoreServer>(so);
  }
  TcpStoreClient::Options co;
  co.host = info_.addr;
  co.port = info_.port;
  co.token = info_.token;
  co.rank = info_.rank;
  co.connect_timeout = timeout;
  co.heartbeat_interval = std::chrono::milliseconds(info_.heartbeat_ms);
  client_ = std::make_unique<TcpStoreClient>(co);
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  client_->set(detail::cat("tessera/rank/", info_.rank), detail::cat(host, ":", ::getpid()));
  try {
    store_barrier(*client_, "tessera/join", info_.rank, info_.size, timeout);
  } catch (const TimeoutError& e) {
    const std::string msg = detail::cat(describe(), ": ", e.what(),
                                        "; start every rank with the same WORLD_SIZE, MASTER_ADDR and "
                                        "MASTER_PORT, or raise the timeout");
    client_->abort(msg);  // releases the ranks still waiting, with this reason
    client_.reset();
    if (server_) server_->wait_until_ranks_left(std::min(timeout_, std::chrono::milliseconds(2000)));
    throw TimeoutError("rendezvous", msg);
  }
}

EnvRendezvous::~EnvRendezvous() {
  client_.reset();  // says goodbye
  if (server_ && !server_->wait_until_ranks_left(timeout_))
    core::report(core::ReportLevel::Warning,
                 detail::cat("tessera store: ", server_->ranks_connected(),
                             " rank(s) still connected after ",
                             static_cast<long long>(timeout_.count()), " ms; stopping the store"));
}

std::string EnvRendezvous::describe() const {
  return detail::cat("env://", info_.addr, ":", info_.port, " (rank ", info_.rank, " of ", info_.size,
                     ", from the ", info_.source, " variables)");
}

void store_barrier(Store& store, const std::string& name, int rank, int size,
                   std::chrono::milliseconds timeout) {
  store.set(detail::cat(name, "/", rank), "1");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 0; r < size; ++r) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    try {
      store.get(detail::cat(name, "/", r), std::max(left, std::chrono::milliseconds(0)));
    } catch (const TimeoutError&) {
      std::string missing;
      int n = 0;
      for (int q = 0; q < size; ++q)
        if (!store.check(detail::cat(name, "/", q))) missing += detail::cat(n++ ? ", " : "", q);
      throw TimeoutError("store", detail::cat("rank ", rank, ": barrier '", name, "' timed out after ",
                                              timeout.count(), " ms; rank(s) ", missing, " of ", size,
                                              " never arrived"));
    }
  }
}

}  // namespace tessera::comm
