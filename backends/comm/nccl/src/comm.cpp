// The NCCL communicator: device choice, the unique id through the store, non-blocking init and
// split, the poll/wait loop with deadlines, and abort on failure.
#include "comm.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tessera/core/error.hpp"

namespace tessera::comm::nccl {

namespace {

// Yield (not sleep) while idle for this long, then sleep briefly between polls: small
// collectives stay in the tens of microseconds, and a rank waiting for a dead peer does not burn
// a core.
constexpr auto kYieldPhase = std::chrono::microseconds(2000);
constexpr auto kSleep = std::chrono::microseconds(200);
constexpr auto kAbortCheckEvery = std::chrono::milliseconds(100);
// Longest a destructor waits for ncclCommFinalize before aborting instead.
constexpr auto kFinalizeLimit = std::chrono::milliseconds(10'000);

void idle(Clock::time_point started) {
  if (Clock::now() - started < kYieldPhase) {
    ::sched_yield();
  } else {
    std::this_thread::sleep_for(kSleep);
  }
}

// TESSERA_NCCL_BLOCKING=1 creates blocking communicators (init and group launches then cannot be
// interrupted by a deadline; only for ruling out the non-blocking path when debugging).
bool blocking_mode() {
  const char* v = std::getenv("TESSERA_NCCL_BLOCKING");
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace

std::string cuda_text(cudaError_t e) {
  return detail::cat(cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

std::string nccl_text(ncclResult_t r) {
  const char* name = "ncclError";
  switch (r) {
    case ncclSuccess: name = "ncclSuccess"; break;
    case ncclUnhandledCudaError: name = "ncclUnhandledCudaError"; break;
    case ncclSystemError: name = "ncclSystemError"; break;
    case ncclInternalError: name = "ncclInternalError"; break;
    case ncclInvalidArgument: name = "ncclInvalidArgument"; break;
    case ncclInvalidUsage: name = "ncclInvalidUsage"; break;
    case ncclRemoteError: name = "ncclRemoteError"; break;
    case ncclInProgress: name = "ncclInProgress"; break;
    default: break;
  }
  return detail::cat(ncclGetErrorString(r), " (", name, ")");
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return detail::cat("no CUDA device visible (cudaGetDeviceCount: ", cuda_text(e), ")");
  if (n <= 0) return "no CUDA device visible (cudaGetDeviceCount returned 0)";
  return "";
}

int pick_device(int rank, int device_count) {
  if (const char* v = std::getenv("TESSERA_CUDA_DEVICE"); v && *v) {
    const int d = std::atoi(v);
    TESSERA_CHECK(d >= 0 && d < device_count, "nccl: rank ", rank, ": TESSERA_CUDA_DEVICE=", v, " but ",
                  device_count, " CUDA device(s) are visible");
    return d;
  }
  int local = rank;
  for (const char* var : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* v = std::getenv(var); v && *v) {
      local = std::atoi(v);
      break;
    }
  return (local < 0 ? 0 : local) % device_count;
}

Comm::Comm(std::shared_ptr<Rendezvous> rdzv, int world_rank, int device, std::chrono::milliseconds timeout)
    : rdzv_(std::move(rdzv)), world_rank_(world_rank), device_(device), timeout_(timeout) {}

void Comm::init_stream() {
  // A blocking stream (default flags): operations are ordered after work the caller queued on the
  // legacy default stream (cudaMemcpy, kernels launched without a stream). Work on non-blocking
  // streams (the cuda compute backend's) is ordered by an event the host has this stream wait for
  // before each call (tessera_comm_plugin_v1_stream).
  const cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamDefault);
  if (e != cudaSuccess) fail(Failure::System, detail::cat("cudaStreamCreate: ", cuda_text(e)));
}

std::shared_ptr<Comm> Comm::create_world(std::shared_ptr<Rendezvous> rdzv, int rank, int size,
                                         std::chrono::milliseconds timeout) {
  int n = 0;
  const cudaError_t ce = cudaGetDeviceCount(&n);
  if (ce != cudaSuccess || n <= 0)
    throw BackendError("nccl", 5, detail::cat("rank ", rank, ": no CUDA device visible (cudaGetDeviceCount: ",
                                              ce != cudaSuccess ? cuda_text(ce) : std::string("0 devices"),
                                              "); the nccl backend needs one GPU per rank: use ucx or local for "
                                              "host memory"));
  const int dev = pick_device(rank, n);
  if (const cudaError_t e = cudaSetDevice(dev); e != cudaSuccess)
    throw BackendError("nccl", 5, detail::cat("rank ", rank, ": cudaSetDevice(", dev, "): ", cuda_text(e)));
  std::shared_ptr<Comm> c(new Comm(std::move(rdzv), rank, dev, timeout));
  Store& store = c->store();
  const auto deadline = Clock::now() + timeout;

  // Worlds created one after another over the same store get their own key: every rank of world k
  // adds once before any rank can finish joining world k, so (count - 1) / size is k on all ranks.
  const std::int64_t joins = store.add("tessera/nccl/world/joins", 1);
  const std::string key = detail::cat("tessera/nccl/world/", (joins - 1) / size, "/id");
  ncclUniqueId id{};
  if (rank == 0) {
    if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      throw BackendError("nccl", static_cast<int>(r), detail::cat("rank 0: ncclGetUniqueId: ", nccl_text(r)));
    store.set(key, std::string(reinterpret_cast<const char*>(&id), sizeof id));
  } else {
    std::string v;
    try {
      v = store.get(key, timeout);
    } catch (const TimeoutError& e) {
      throw TimeoutError("nccl", detail::cat("rank ", rank, ": waiting ", timeout.count(),
                                             " ms for rank 0's NCCL unique id (store key ", key, "): ", e.what()));
    }
    if (v.size() != sizeof id)
      throw InternalError(detail::cat("nccl: rank ", rank, ": the unique id at ", key, " has ", v.size(),
                                      " bytes, expected ", sizeof id));
    std::memcpy(&id, v.data(), sizeof id);
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = blocking_mode() ? 1 : 0;
  cfg.commName = "tessera";
  const ncclResult_t r = ncclCommInitRankConfig(&c->comm_, size, id, rank, &cfg);
  const std::string where = detail::cat("rank ", rank);
  c->settle(r, where,
            detail::cat("joining the world of ", size, " ranks on CUDA device ", dev, " (ncclCommInitRankConfig)"),
            deadline);
  c->init_stream();
  return c;
}

std::shared_ptr<Comm> Comm::split(int color, int key, const std::string& where) {
  begin(where, "split");
  const auto deadline = Clock::now() + timeout_;
  ncclComm_t sub = nullptr;
  const ncclResult_t r = ncclCommSplit(comm_, color, key, &sub, nullptr);  // inherits our config
  const std::string what = detail::cat("split (ncclCommSplit color ", color, " key ", key, ")");
  if (r != ncclSuccess && r != ncclInProgress) {
    const char* last = ncclGetLastError(comm_);
    fail(Failure::System, detail::cat(where, ": ", what, ": ", nccl_text(r), last && *last ? ": " : "",
                                      last ? last : ""));
  }
  settle(ncclSuccess, where, what, deadline);  // the parent's part
  if (!sub) return nullptr;
  std::shared_ptr<Comm> c(new Comm(rdzv_, world_rank_, device_, timeout_));
  c->comm_ = sub;
  c->settle(ncclSuccess, where, what, deadline);
  c->init_stream();
  return c;
}

Comm::~Comm() {
  cudaSetDevice(device_);
  if (comm_) {
    bool clean = failed_.empty();
    try {
      if (clean && !job_abort().empty()) clean = false;  // the job failed: do not wait for peers
    } catch (...) {
      clean = false;  // the store is gone: so is the job
    }
    if (clean) {
      // Flush, then destroy; a flush that does not finish in time (a peer gone) is aborted.
      const ncclResult_t r = ncclCommFinalize(comm_);
      bool timed_out = false;
      clean = (r == ncclSuccess || r == ncclInProgress) &&
              settle_comm(comm_, Clock::now() + std::min<std::chrono::milliseconds>(timeout_, kFinalizeLimit),
                          &timed_out).empty();
    }
    if (clean) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  if (scratch_) cudaFree(scratch_);
  if (stream_) cudaStreamDestroy(stream_);
}

void Comm::begin(const std::string& where, const std::string& what) {
  if (!failed_.empty())
    throw BackendError("nccl", 125, detail::cat(where, ": ", what, ": this group failed earlier (", failed_, ")"));
  if (const cudaError_t e = cudaSetDevice(device_); e != cudaSuccess)
    fail(Failure::System, detail::cat(where, ": ", what, ": cudaSetDevice(", device_, "): ", cuda_text(e)));
}

float* Comm::scratch() {
  if (!scratch_) {
    void* p = nullptr;
    if (const cudaError_t e = cudaMalloc(&p, sizeof(float)); e != cudaSuccess)
      throw BackendError("nccl", 5, detail::cat("rank ", world_rank_, ": cudaMalloc(4 bytes) for barrier: ",
                                                cuda_text(e)));
    scratch_ = static_cast<float*>(p);
  }
  return scratch_;
}

std::string Comm::job_abort() {
  Store& s = store();
  const int fd = s.abort_fd();
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return "";
    return s.abort_reason();
  }
  const auto now = Clock::now();
  if (now < next_abort_check_) return "";
  next_abort_check_ = now + kAbortCheckEvery;
  return s.abort_reason();
}

std::string Comm::settle_comm(ncclComm_t c, Clock::time_point deadline, bool* timed_out) {
  const auto started = Clock::now();
  for (;;) {
    ncclResult_t st = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(c, &st);
    if (q != ncclSuccess) return detail::cat("ncclCommGetAsyncError: ", nccl_text(q));
    if (st == ncclSuccess) return "";
    if (st != ncclInProgress) {
      const char* last = ncclGetLastError(c);
      return detail::cat(nccl_text(st), last && *last ? ": " : "", last ? last : "");
    }
    if (Clock::now() >= deadline) {
      *timed_out = true;
      return "still in progress";
    }
    idle(started);
  }
}

void Comm::settle(ncclResult_t r, const std::string& where, const std::string& what, Clock::time_point deadline) {
  if (r != ncclSuccess && r != ncclInProgress) {
    const char* last = comm_ ? ncclGetLastError(comm_) : nullptr;
    fail(Failure::System,
         detail::cat(where, ": ", what, ": ", nccl_text(r), last && *last ? ": " : "", last ? last : ""));
  }
  if (!comm_) return;
  // Poll in slices so that an abort of the job (another rank failed) ends the wait early.
  for (;;) {
    bool timed_out = false;
    const auto slice = std::min(deadline, Clock::now() + kAbortCheckEvery);
    const std::string why = settle_comm(comm_, slice, &timed_out);
    if (why.empty()) return;
    if (!timed_out) fail(Failure::System, detail::cat(where, ": ", what, ": ", why));
    if (const std::string a = job_abort(); !a.empty())
      fail(Failure::Remote, detail::cat(where, ": ", what, " aborted: ", a));
    if (Clock::now() >= deadline)
      fail(Failure::Timeout, detail::cat(where, ": ", what, " timed out after ", timeout_.count(),
                                         " ms (NCCL still in progress: a rank has not joined or a peer is gone); "
                                         "the communicator was aborted"));
  }
}

bool Comm::poll(cudaEvent_t ev, const std::string& where, const std::string& what) {
  if (!failed_.empty())
    throw BackendError("nccl", 125, detail::cat(where, ": ", what, ": this group failed earlier (", failed_, ")"));
  const cudaError_t e = cudaEventQuery(ev);
  if (e == cudaSuccess) return true;
  if (e != cudaErrorNotReady) fail(Failure::System, detail::cat(where, ": ", what, ": cudaEventQuery: ", cuda_text(e)));
  ncclResult_t st = ncclSuccess;
  const ncclResult_t q = ncclCommGetAsyncError(comm_, &st);
  if (q != ncclSuccess) st = q;
  if (st != ncclSuccess && st != ncclInProgress) {
    const char* last = ncclGetLastError(comm_);
    fail(st == ncclRemoteError ? Failure::Remote : Failure::System,
         detail::cat(where, ": ", what, ": ", nccl_text(st), last && *last ? ": " : "", last ? last : ""));
  }
  if (const std::string a = job_abort(); !a.empty())
    fail(Failure::Remote, detail::cat(where, ": ", what, " aborted: ", a));
  return false;
}

void Comm::wait(cudaEvent_t ev, Clock::time_point deadline, const std::string& where, const std::string& what,
                const std::string& waiting_for) {
  const auto started = Clock::now();
  while (!poll(ev, where, what)) {
    if (Clock::now() >= deadline)
      fail(Failure::Timeout, detail::cat(where, ": ", what, " timed out after ", timeout_.count(), " ms waiting for ",
                                         waiting_for, "; the communicator was aborted (ncclCommAbort)"));
    idle(started);
  }
}

void Comm::abort_nccl() noexcept {
  if (!comm_) return;
  cudaSetDevice(device_);
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

void Comm::fail(Failure kind, const std::string& msg) {
  abort_nccl();
  failed_ = msg;
  switch (kind) {
    case Failure::Remote:
      throw BackendError("nccl", 125, msg);
    case Failure::Timeout:
      store().abort(msg);  // the peers stop waiting for a communicator that is gone
      throw TimeoutError("nccl", msg);
    case Failure::System:
      break;
  }
  store().abort(msg);
  throw BackendError("nccl", 5, msg);
}

}  // namespace tessera::comm::nccl
