// bench_comm: a communication backend between processes on this host (default: ucx, 2 ranks on
// loopback) beside its peers measured in the same run.
//   - all-reduce of 4 KiB … 64 MiB float32: time, algbw and busbw (nccl-tests definitions:
//     algbw = bytes / time, busbw = algbw · 2(p−1)/p; GB = 1e9 bytes), the slowest rank's time;
//   - halo exchange (batch_p2p: each rank sends n bytes to its neighbour and receives n) for
//     ConvNeXt halo sizes: latency and bandwidth per direction; a ping-pong (half the round
//     trip); for the 64 B exchange and the ping-pong also the 50th percentile of single
//     messages, timed one by one as ucx_perftest times its own (the ratios to tag_lat use these);
//     and an empty batch_p2p (the call's own cost);
//   - OpenMPI's MPI_Allreduce at the same sizes (`mpirun -np P bench_comm_mpi`, when built);
//   - ucx_perftest's tag latency and bandwidth on loopback (Debian's ucx-utils, when installed);
//   - bench_ucp_exchange (built with UCX): the ping-pong and the 64 B exchange with UCP alone, the
//     floor under the ucx backend's latency;
//   - progress while computing: each rank posts a halo exchange, computes for twice the
//     exchange's own time without calling the backend, then waits; the wait's time against the
//     exchange's says how much of the transfer moved during the compute (hidden = 1 − wait /
//     exchange). Sizes below and above the ucx backend's eager threshold (256 KiB);
//   - single-thread memcpy bandwidth, the physical limit of a copy through memory;
//   - with --cuda (a GPU machine): the same all-reduce and halo exchange on CUDA buffers (the
//     ucx plugin stages them through pinned host memory), their time over the host buffers',
//     and the pinned cudaMemcpy bandwidth each way, the limit of staging.
// Every figure is the median over --rounds × --reps repetitions, with [min-max].
//   bench_comm [--json] [--reps N] [--nproc P] [--backend ucx] [--max-mib 64] [--cuda]
//              [--only allreduce|halo|latency|progress] [--rounds R]
// (--only latency: the ping-pong and the 64 B halo exchange alone, for profiling that path)
// Rounds (default 3) alternate the ranks, OpenMPI and ucx_perftest, so that a slow spell of a
// shared machine falls on every side; each figure pools the repetitions of all rounds.
// The ranks are this program started again with --worker and the env:// variables; the store
// is served here, on loopback, with a fresh token.
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "comm_cuda.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/comm/registry.hpp"
#include "tessera/comm/tcp_store.hpp"
#include "tessera/core/version.hpp"

using namespace tessera;
using bench::Stats;

namespace {

struct Options {
  bool json = false;
  int reps = 7;
  int nproc = 2;
  std::string backend = "ucx";
  int max_mib = 64;
  int rounds = 3;
  bool cuda = false;
  std::string only;  // "", "allreduce", "halo", "latency" or "progress": run only that part
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<std::size_t> allreduce_sizes(int max_mib) {
  std::vector<std::size_t> v;
  for (std::size_t b = 4096; b <= std::size_t(max_mib) << 20; b *= 4) v.push_back(b);
  return v;
}

// ConvNeXt-T halos (3 columns of a 7×7 depthwise conv, fp32): at 3×512×2048 every stage's halo
// is 3·C·H·4 = 147456 bytes per image (C doubles as H halves); batch 1 and 7, plus small ones.
const std::vector<std::size_t> kHaloSizes = {64, 4096, 36864, 147456, 1032192};
// Progress while computing: ConvNeXt-T halos below (36 KiB, 144 KiB) and above (1008 KiB, 4 MiB)
// the ucx backend's eager threshold.
const std::vector<std::size_t> kProgressSizes = {36864, 147456, 1032192, 4194304};

/// Keeps this core busy for `seconds` without touching memory or the backend (a kernel's stand-in).
void spin_for(double seconds);

// Iterations per timed repetition: about 64 MiB moved, at least 5, at most 2000.
int iters_for(std::size_t bytes) {
  return int(std::clamp<std::size_t>((std::size_t(64) << 20) / std::max<std::size_t>(bytes, 1), 5, 2000));
}

void spin_for(double seconds) {
  volatile double acc = 1.0;
  const double end = now_s() + seconds;
  while (now_s() < end)
    for (int k = 0; k < 256; ++k) acc = acc * 1.0000001 + 1e-9;
}

// ---- worker (one rank) ---------------------------------------------------------------------

int worker(const Options& o) {
  WorldBackend job = make_world_backend(o.backend, std::chrono::milliseconds(120000));
  comm::Backend* world = job.world.get();
  const int p = world->size(), me = world->rank();
  // The slowest rank's µs per iteration, one figure per repetition: the loop's mean, or with
  // `each` the 50th percentile of single iterations, each timed alone (ucx_perftest's "typical"
  // latency, measured the same way).
  auto measure = [&](int iters, const std::function<void()>& op, bool each) {
    std::vector<double> per_rep, times(each ? static_cast<std::size_t>(iters) : 0);
    op();  // warm-up (registration, connection setup)
    for (int r = 0; r < o.reps; ++r) {
      world->barrier();
      const double start = now_s();
      double t0 = start;
      for (int i = 0; i < iters; ++i) {
        op();
        if (!each) continue;
        const double t1 = now_s();
        times[static_cast<std::size_t>(i)] = t1 - t0;
        t0 = t1;
      }
      double t = (now_s() - start) / iters;
      if (each) {
        std::nth_element(times.begin(), times.begin() + iters / 2, times.end());
        t = times[static_cast<std::size_t>(iters / 2)];
      }
      world->all_reduce({&t, 1, core::DType::F64}, comm::ReduceOp::Max)->wait();
      per_rep.push_back(t * 1e6);
    }
    return per_rep;
  };
  auto timed = [&](int iters, const std::function<void()>& op) { return measure(iters, op, false); };
  auto typical = [&](int iters, const std::function<void()>& op) { return measure(iters, op, true); };
  auto emit = [&](const char* kind, std::size_t bytes, const std::vector<double>& us) {
    if (me != 0) return;
    std::printf("%s %zu", kind, bytes);
    for (double u : us) std::printf(" %.6g", u);
    std::printf("\n");
    std::fflush(stdout);
  };
  const bool do_ar = o.only.empty() || o.only == "allreduce",
             do_halo = o.only.empty() || o.only == "halo" || o.only == "latency";
  const std::vector<std::size_t> halo_sizes =
      !do_halo ? std::vector<std::size_t>{} : o.only == "latency" ? std::vector<std::size_t>{64} : kHaloSizes;
  for (std::size_t bytes : do_ar ? allreduce_sizes(o.max_mib) : std::vector<std::size_t>{}) {
    std::vector<float> buf(bytes / 4, 1.0f);
    emit("allreduce", bytes, timed(iters_for(bytes), [&] {
           world->all_reduce({buf.data(), buf.size(), core::DType::F32}, comm::ReduceOp::Sum)->wait();
         }));
  }
  const int right = (me + 1) % p, left = (me + p - 1) % p;
  if (do_halo) {
    // Ping-pong of 8 bytes between ranks 0 and 1, one batch_p2p per message: half the round trip
    // is ucx_perftest's tag_lat definition (the halo exchange above pays both sides' overhead
    // and two messages per step).
    std::uint64_t word = 0;
    const comm::BufferView w{&word, 1, core::DType::I64};
    const int other = me == 0 ? 1 : 0;
    const std::vector<comm::P2POp> send = {{comm::P2POp::Kind::Send, w, other, 1}},
                                   recv = {{comm::P2POp::Kind::Recv, w, other, 1}};
    // One round trip, each message sent and received by the given calls.
    auto round_trip_of = [&](std::function<void()> send_one, std::function<void()> recv_one) {
      return std::function<void()>([&me, &word, send_one, recv_one] {
        if (me == 0) {
          send_one();
          recv_one();
        } else if (me == 1) {
          recv_one();
          ++word;
          send_one();
        }
      });
    };
    const std::function<void()> round_trip =
        round_trip_of([&] { world->batch_p2p(send)->wait(); }, [&] { world->batch_p2p(recv)->wait(); });
    const auto pp = timed(20000, round_trip);
    auto pp_typical = typical(20000, round_trip);
    for (double& x : pp_typical) x /= 2;
    emit("pingpong_p50", 8, pp_typical);
    // The call's own cost: a batch with nothing in it (creating, waiting for and freeing it).
    emit("empty", 0, timed(20000, [&] { world->batch_p2p({})->wait(); }));
    std::vector<double> half(pp.size());
    for (std::size_t i = 0; i < pp.size(); ++i) half[i] = pp[i] / 2;
    emit("pingpong", 8, half);
  }
  for (std::size_t bytes : halo_sizes) {
    std::vector<float> send(bytes / 4, float(me)), recv(bytes / 4);
    // The batch is built once, as a training step's halo plan is: the loop times the backend.
    const std::vector<comm::P2POp> ops = {
        {comm::P2POp::Kind::Send, {send.data(), send.size(), core::DType::F32}, right, 0},
        {comm::P2POp::Kind::Recv, {recv.data(), recv.size(), core::DType::F32}, left, 0}};
    const std::function<void()> exchange = [&] { world->batch_p2p(ops)->wait(); };
    emit("halo", bytes, timed(iters_for(bytes), exchange));
    if (bytes == 64) emit("halo_p50", bytes, typical(20000, exchange));
    if (recv[0] != float(left)) {
      std::fprintf(stderr, "bench_comm: rank %d received %g from rank %d, expected %d\n", me, recv[0], left, left);
      return 1;
    }
  }
  for (std::size_t bytes : o.only.empty() || o.only == "progress" ? kProgressSizes : std::vector<std::size_t>{}) {
    std::vector<float> send(bytes / 4, float(me)), recv(bytes / 4);
    const std::vector<comm::P2POp> ops = {
        {comm::P2POp::Kind::Send, {send.data(), send.size(), core::DType::F32}, right, 0},
        {comm::P2POp::Kind::Recv, {recv.data(), recv.size(), core::DType::F32}, left, 0}};
    const int iters = std::max(5, iters_for(bytes) / 4);
    const std::vector<double> plain = timed(iters, [&] { world->batch_p2p(ops)->wait(); });
    std::vector<double> sorted = plain;
    std::sort(sorted.begin(), sorted.end());
    // Every rank computes for the same time: twice rank 0's median exchange.
    double compute_s = std::max(2 * sorted[sorted.size() / 2] * 1e-6, 50e-6);
    world->broadcast({&compute_s, 1, core::DType::F64}, 0)->wait();
    std::vector<double> waits;
    for (int r = 0; r < o.reps; ++r) {
      world->barrier();
      double in_wait = 0;
      for (int i = 0; i < iters; ++i) {
        comm::WorkPtr w = world->batch_p2p(ops);
        spin_for(compute_s);
        const double t0 = now_s();
        w->wait();
        in_wait += now_s() - t0;
      }
      double t = in_wait / iters;
      world->all_reduce({&t, 1, core::DType::F64}, comm::ReduceOp::Max)->wait();
      waits.push_back(t * 1e6);
    }
    emit("progress_exchange", bytes, plain);
    emit("progress_wait", bytes, waits);
    if (recv[0] != float(left)) {
      std::fprintf(stderr, "bench_comm: rank %d received %g from rank %d, expected %d\n", me, recv[0], left, left);
      return 1;
    }
  }
  if (!o.cuda) return 0;
  auto cuda_view = [](const bench::CudaFloats& a) {
    return comm::BufferView{a.data(), a.count(), core::DType::F32, comm::MemorySpace::Cuda};
  };
  for (std::size_t bytes : do_ar ? allreduce_sizes(o.max_mib) : std::vector<std::size_t>{}) {
    bench::CudaFloats buf(bytes / 4, 1.0f);
    emit("allreduce_cuda", bytes, timed(iters_for(bytes), [&] {
           world->all_reduce(cuda_view(buf), comm::ReduceOp::Sum)->wait();
         }));
  }
  for (std::size_t bytes : halo_sizes) {
    bench::CudaFloats send(bytes / 4, float(me)), recv(bytes / 4, -1.0f);
    emit("halo_cuda", bytes, timed(iters_for(bytes), [&] {
           world->batch_p2p({{comm::P2POp::Kind::Send, cuda_view(send), right, 0},
                             {comm::P2POp::Kind::Recv, cuda_view(recv), left, 0}})
               ->wait();
         }));
    if (recv.first() != float(left)) {
      std::fprintf(stderr, "bench_comm: rank %d received %g (CUDA) from rank %d\n", me, recv.first(), left);
      return 1;
    }
  }
  return 0;
}

// ---- the parent: ranks, peers, table ---------------------------------------------------------

/// Runs argv, returning its stdout (stderr passes through); "" and a note when it cannot start
/// or fails.
std::string capture(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string& note) {
  int fds[2];
  if (::pipe(fds) != 0) return note = "pipe failed", "";
  std::vector<char*> av, ev;
  for (const auto& s : argv) av.push_back(const_cast<char*>(s.c_str()));
  av.push_back(nullptr);
  for (const auto& s : env) ev.push_back(const_cast<char*>(s.c_str()));
  for (char** e = environ; *e; ++e) ev.push_back(*e);
  ev.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execve(av[0], av.data(), ev.data());
    std::_Exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, std::size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) note = argv[0] + " failed (status " + std::to_string(status) + ")";
  return out;
}

using Series = std::map<std::size_t, Stats>;                 // bytes → µs
using Samples = std::map<std::size_t, std::vector<double>>;  // bytes → every repetition's µs

/// Appends the repetitions of the `kind` lines in `text` (several rounds pool their samples).
void parse_lines(const std::string& text, const std::string& kind, Samples& into) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string k;
    std::size_t bytes = 0;
    if (!(ls >> k >> bytes) || k != kind) continue;
    for (double u; ls >> u;) into[bytes].push_back(u);
  }
}

Series stats_of(const Samples& samples) {
  Series s;
  for (const auto& [bytes, us] : samples) s[bytes] = bench::stats_of(us);
  return s;
}

double median_of(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return x <= 0; }), v.end());
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string self_dir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string s(buf, n > 0 ? std::size_t(n) : 0);
  return s.substr(0, s.rfind('/'));
}

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string which(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream in(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(in, dir, ':');)
    if (executable(dir + "/" + name)) return dir + "/" + name;
  return "";
}

/// The ranks: this program with --worker, the env:// variables and a store served here.
std::string run_ranks(const Options& o, std::string& note) {
  comm::TcpStoreServer::Options so;
  so.token = "bench-comm-" + std::to_string(::getpid()) + "-" + std::to_string(long(now_s() * 1e6));
  so.log = [](const std::string&) {};
  comm::TcpStoreServer server(so);
  std::vector<pid_t> pids;
  int out_fd[2];
  if (::pipe(out_fd) != 0) return note = "pipe failed", "";
  const std::string exe = "/proc/self/exe";
  for (int r = 0; r < o.nproc; ++r) {
    std::vector<std::string> env = {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(server.port()),
                                    "RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(o.nproc),
                                    "LOCAL_RANK=" + std::to_string(r), "LOCAL_WORLD_SIZE=" + std::to_string(o.nproc),
                                    "TESSERA_RDZV_TOKEN=" + so.token, "TESSERA_RDZV_HOSTED=1"};
    std::vector<std::string> argv = {exe, "--worker", "--backend", o.backend, "--reps", std::to_string(o.reps),
                                     "--max-mib", std::to_string(o.max_mib)};
    if (o.cuda) argv.push_back("--cuda");
    if (!o.only.empty()) argv.insert(argv.end(), {"--only", o.only});
    std::vector<char*> av, ev;
    for (auto& s : argv) av.push_back(s.data());
    av.push_back(nullptr);
    for (auto& s : env) ev.push_back(s.data());
    for (char** e = environ; *e; ++e) ev.push_back(*e);
    ev.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (r == 0) ::dup2(out_fd[1], 1);
      ::close(out_fd[0]);
      ::close(out_fd[1]);
      ::execve(av[0], av.data(), ev.data());
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
  ::close(out_fd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(out_fd[0], buf, sizeof buf)) > 0;) out.append(buf, std::size_t(n));
  ::close(out_fd[0]);
  for (std::size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      note = "rank " + std::to_string(r) + " failed (status " + std::to_string(status) + ")";
  }
  return out;
}

/// ucx_perftest on loopback (a server and a client): the numbers after its "Final:" (none when
/// it is not installed or fails): iterations, latency 50th percentile, average, overall average
/// (µs), bandwidth average, overall (MB/s), message rate average, overall.
std::vector<double> ucx_perftest(const std::string& test, std::size_t bytes, int iters) {
  const std::string bin = which("ucx_perftest");
  if (bin.empty()) return {};
  const int port = 13000 + int(::getpid() % 20000);
  const pid_t server = ::fork();
  if (server == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execl(bin.c_str(), bin.c_str(), "-p", std::to_string(port).c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  std::string note, out;
  for (int attempt = 0; attempt < 50 && out.find("Final:") == std::string::npos; ++attempt) {
    ::usleep(100000);  // the server needs a moment to listen
    out = capture({bin, "127.0.0.1", "-p", std::to_string(port), "-t", test, "-s", std::to_string(bytes), "-n",
                   std::to_string(iters)},
                  {}, note);
  }
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  const auto at = out.find("Final:");
  if (at == std::string::npos) return {};
  std::istringstream in(out.substr(at + 6));
  std::vector<double> f;
  for (double x; in >> x;) f.push_back(x);
  return f;
}

double memcpy_gbps(int reps) {
  const std::size_t n = std::size_t(64) << 20;
  std::vector<char> a(n, 1), b(n, 0);
  const Stats s = bench::time_ms(reps, [&] { std::memcpy(b.data(), a.data(), n); });
  return double(n) / (s.median * 1e-3) / 1e9;
}

std::string fmt_bytes(std::size_t b) {
  char buf[32];
  if (b >= (1u << 20)) std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  else if (b >= 1024 && b % 1024 == 0) std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  else std::snprintf(buf, sizeof buf, "%zu B", b);
  return buf;
}

int parent(const Options& o) {
  std::string rank_note, mpi_note;
  // Rounds alternate tessera, OpenMPI and ucx_perftest, so a slow spell of this shared machine
  // falls on all of them; every figure pools the repetitions of all rounds.
  Samples ar_s, halo_s, mpi_s, ar_cuda_s, halo_cuda_s, pingpong_s, empty_s, pp_p50_s, halo_p50_s;
  Samples progress_x_s, progress_wait_s;  // progress while computing: exchange, wait after compute
  std::vector<double> perf_lat, perf_lat_avg, perf_bw;
  // Ratios of medians measured in the same round (back to back), one per round.
  Samples ar_ratio;                              // OpenMPI time / tessera time, per size
  std::vector<double> pingpong_ratio,
      halo_ratio;  // tessera / ucx_perftest tag_lat, 50th percentiles
  Samples ucp_s;  // bench_ucp_exchange: the same ping-pong (8) and exchange (64) with UCP alone
  std::vector<double> pingpong_ucp_ratio, halo_ucp_ratio;
  std::string ucp_note;
  const std::string ucp_bin = self_dir() + "/bench_ucp_exchange";
  const std::string mpi_bin = self_dir() + "/bench_comm_mpi", mpirun = which("mpirun");
  for (int round = 0; round < o.rounds; ++round) {
    const std::string ranks_out = run_ranks(o, rank_note);
    Samples r_ar, r_mpi, r_halo, r_pp, r_empty, r_pp50, r_halo50;
    parse_lines(ranks_out, "allreduce", r_ar);
    parse_lines(ranks_out, "halo", r_halo);
    parse_lines(ranks_out, "pingpong", r_pp);
    parse_lines(ranks_out, "empty", r_empty);
    parse_lines(ranks_out, "pingpong_p50", r_pp50);
    parse_lines(ranks_out, "halo_p50", r_halo50);
    const std::vector<std::pair<Samples*, Samples*>> parts = {
        {&r_ar, &ar_s},       {&r_halo, &halo_s},   {&r_pp, &pingpong_s},
        {&r_empty, &empty_s}, {&r_pp50, &pp_p50_s}, {&r_halo50, &halo_p50_s}};
    for (const auto& [part, into_all] : parts)
      for (const auto& [bytes, us] : *part) {
        Samples& into = *into_all;
        into[bytes].insert(into[bytes].end(), us.begin(), us.end());
      }
    parse_lines(ranks_out, "progress_exchange", progress_x_s);
    parse_lines(ranks_out, "progress_wait", progress_wait_s);
    parse_lines(ranks_out, "allreduce_cuda", ar_cuda_s);
    parse_lines(ranks_out, "halo_cuda", halo_cuda_s);
    if (o.only == "halo" || o.only == "latency" || o.only == "progress") {
      mpi_note = "not run (--only " + o.only + ")";
    } else if (executable(mpi_bin) && !mpirun.empty()) {
      std::vector<std::string> argv = {mpirun, "-np", std::to_string(o.nproc), "--oversubscribe", "--bind-to", "none"};
      if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
      argv.insert(argv.end(), {mpi_bin, std::to_string(o.reps), std::to_string(o.max_mib)});
      parse_lines(capture(argv, {}, mpi_note), "allreduce", r_mpi);
      for (const auto& [bytes, us] : r_mpi) {
        mpi_s[bytes].insert(mpi_s[bytes].end(), us.begin(), us.end());
        if (r_ar.count(bytes)) ar_ratio[bytes].push_back(median_of(us) / median_of(r_ar.at(bytes)));
      }
    } else {
      mpi_note = executable(mpi_bin) ? "mpirun not found (Debian: openmpi-bin)" : "bench_comm_mpi not built (Debian: libopenmpi-dev)";
    }
    if (o.only != "allreduce" && o.only != "progress") {
      // The ratios compare 50th percentiles of single messages, timed alike on both sides
      // (ucx_perftest's "typical" latency); its average is printed beside it.
      const std::vector<double> f = ucx_perftest("tag_lat", 8, 20000);
      const double lat = f.size() > 1 ? f[1] : -1;
      perf_lat.push_back(lat);
      perf_lat_avg.push_back(f.size() > 3 ? f[3] : -1);
      if (o.only != "latency") {
        const std::vector<double> b = ucx_perftest("tag_bw", 147456, 2000);
        perf_bw.push_back(b.size() > 4 ? b[4] : -1);
      }
      if (executable(ucp_bin) && o.backend == "ucx") {
        Samples r_ucp;
        const std::string out = capture({ucp_bin, "20000", std::to_string(o.reps)}, {}, ucp_note);
        parse_lines(out, "ucp_pingpong", r_ucp);
        parse_lines(out, "ucp_exchange", r_ucp);
        for (const auto& [bytes, us] : r_ucp) ucp_s[bytes].insert(ucp_s[bytes].end(), us.begin(), us.end());
        if (r_ucp.count(8) && r_pp50.count(8)) pingpong_ucp_ratio.push_back(median_of(r_pp50.at(8)) / median_of(r_ucp.at(8)));
        if (r_ucp.count(64) && r_halo50.count(64))
          halo_ucp_ratio.push_back(median_of(r_halo50.at(64)) / median_of(r_ucp.at(64)));
      }
      if (lat > 0 && r_pp50.count(8)) pingpong_ratio.push_back(median_of(r_pp50.at(8)) / lat);
      if (lat > 0 && r_halo50.count(64)) halo_ratio.push_back(median_of(r_halo50.at(64)) / lat);
    }
  }
  const Series ar = stats_of(ar_s), halo = stats_of(halo_s), mpi = stats_of(mpi_s),
               ar_cuda = stats_of(ar_cuda_s), halo_cuda = stats_of(halo_cuda_s),
               pingpong = stats_of(pingpong_s), ratio = stats_of(ar_ratio),
               empty = stats_of(empty_s), pp_p50 = stats_of(pp_p50_s),
               halo_p50 = stats_of(halo_p50_s), ucp = stats_of(ucp_s),
               progress_x = stats_of(progress_x_s), progress_wait = stats_of(progress_wait_s);
  // The share of an exchange that moved while the ranks computed (1 − wait / exchange, medians).
  auto hidden = [&](std::size_t bytes) {
    return std::clamp(1.0 - progress_wait.at(bytes).median / progress_x.at(bytes).median, 0.0, 1.0);
  };
  const double perf_lat_us = median_of(perf_lat), perf_lat_avg_us = median_of(perf_lat_avg),
               perf_bw_mbps = median_of(perf_bw);
  const bench::PinnedCopy pinned = o.cuda ? bench::pinned_copy_gbps(o.reps) : bench::PinnedCopy{};
  // CUDA rows: time, and time over the host buffers' (the cost of staging).
  auto cuda_rows = [](const Series& cuda, const Series& host, double factor) {
    std::vector<std::string> rows;
    for (const auto& [bytes, s] : cuda) {
      bench::Json j;
      j.num("bytes", double(bytes)).stats("time_us_", s).num("GBps", bytes / (s.median * 1e-6) / 1e9 * factor);
      if (host.count(bytes)) j.num("time_over_host", s.median / host.at(bytes).median);
      rows.push_back(j.str());
    }
    return bench::json_array(rows);
  };
  const double copy_gbps = memcpy_gbps(o.reps);
  const double p = o.nproc, bus = 2 * (p - 1) / p;

  if (o.json) {
    std::vector<std::string> rows;
    for (const auto& [bytes, s] : ar) {
      bench::Json j;
      j.num("bytes", double(bytes)).stats("time_us_", s).num("algbw_GBps", bytes / (s.median * 1e-6) / 1e9)
          .num("busbw_GBps", bytes / (s.median * 1e-6) / 1e9 * bus);
      if (mpi.count(bytes)) {
        const Stats& m = mpi.at(bytes);
        j.num("mpi_time_us_median", m.median).num("mpi_busbw_GBps", bytes / (m.median * 1e-6) / 1e9 * bus)
            .num("ratio_busbw_vs_mpi", ratio.count(bytes) ? ratio.at(bytes).median : m.median / s.median);
      }
      rows.push_back(j.str());
    }
    std::vector<std::string> halos;
    for (const auto& [bytes, s] : halo) {
      bench::Json j;
      j.num("bytes", double(bytes)).stats("time_us_", s).num("GBps_per_direction", bytes / (s.median * 1e-6) / 1e9);
      halos.push_back(j.str());
    }
    std::vector<std::string> progress;
    for (const auto& [bytes, s] : progress_x) {
      if (!progress_wait.count(bytes)) continue;
      bench::Json j;
      j.num("bytes", double(bytes)).stats("exchange_us_", s).stats("wait_after_compute_us_", progress_wait.at(bytes))
          .num("hidden", hidden(bytes));
      progress.push_back(j.str());
    }
    bench::Json top;
    top.str("tessera_version", std::string(tessera::core::version()))
        .str("build", tessera::core::build_description());
    top.raw("progress_while_computing", bench::json_array(progress));
    top.str("backend", o.backend)
        .num("ranks", o.nproc)
        .num("reps", o.reps)
        .num("rounds", o.rounds)
        .raw("all_reduce", bench::json_array(rows))
        .raw("halo_exchange", bench::json_array(halos))
        .num("ucx_perftest_tag_lat_us", perf_lat_us)
        .num("ucx_perftest_tag_lat_avg_us", perf_lat_avg_us)
        .num("pingpong_half_rtt_us", pingpong.count(8) ? pingpong.at(8).median : -1)
        .num("pingpong_half_rtt_p50_us", pp_p50.count(8) ? pp_p50.at(8).median : -1)
        .num("halo_64B_p50_us", halo_p50.count(64) ? halo_p50.at(64).median : -1)
        .num("ucp_pingpong_p50_us", ucp.count(8) ? ucp.at(8).median : -1)
        .num("ucp_exchange_64B_p50_us", ucp.count(64) ? ucp.at(64).median : -1)
        .num("pingpong_vs_ucp", median_of(pingpong_ucp_ratio))
        .num("halo_64B_vs_ucp", median_of(halo_ucp_ratio))
        .num("empty_batch_us", empty.count(0) ? empty.at(0).median : -1)
        .num("pingpong_vs_perftest", median_of(pingpong_ratio))
        .num("halo_64B_vs_perftest", median_of(halo_ratio))
        .num("ucx_perftest_tag_bw_GBps", perf_bw_mbps > 0 ? perf_bw_mbps * 1.048576e-3 : -1)
        .num("memcpy_GBps", copy_gbps)
        .str("ranks_note", rank_note)
        .str("mpi_note", mpi_note);
    if (o.cuda) {
      bench::Json c;
      c.raw("all_reduce", cuda_rows(ar_cuda, ar, bus)).raw("halo_exchange", cuda_rows(halo_cuda, halo, 1.0))
          .num("pinned_d2h_GBps", pinned.d2h_GBps).num("pinned_h2d_GBps", pinned.h2d_GBps);
      top.raw("cuda_staged", c.str());
    }
    std::printf("%s\n", top.str().c_str());
    return rank_note.empty() ? 0 : 1;
  }
  std::printf("%s\n", tessera::core::version_line().c_str());
  std::printf("bench_comm: %s, %d processes on loopback; median [min-max] of %d rounds x %d repetitions, the slowest "
              "rank's time\n",
              o.backend.c_str(), o.nproc, o.rounds, o.reps);
  if (!rank_note.empty()) std::printf("  ranks: %s\n", rank_note.c_str());
  const bool show_ar = o.only.empty() || o.only == "allreduce",
             show_halo = o.only.empty() || o.only == "halo" || o.only == "latency";
  if (show_ar) std::printf("\nall_reduce float32 sum (busbw = algbw · 2(p-1)/p, GB = 1e9 bytes)\n");
  if (show_ar)
    std::printf("  %-8s %26s %9s %9s  %22s %9s %17s\n", "size", "time us", "algbw", "busbw", "OpenMPI time us", "busbw",
                "ratio");
  for (const auto& [bytes, s] : ar) {
    const double alg = bytes / (s.median * 1e-6) / 1e9;
    std::printf("  %-8s %9.1f [%6.1f-%7.1f] %9.3f %9.3f", fmt_bytes(bytes).c_str(), s.median, s.min, s.max, alg, alg * bus);
    if (mpi.count(bytes)) {
      const Stats& m = mpi.at(bytes);
      const Stats r = ratio.count(bytes) ? ratio.at(bytes) : Stats{};
      std::printf("  %9.1f [%10.1f] %9.3f %5.2f [%4.2f-%4.2f]", m.median, m.max, bytes / (m.median * 1e-6) / 1e9 * bus,
                  r.median, r.min, r.max);
    }
    std::printf("\n");
  }
  if (show_ar && !mpi_note.empty()) std::printf("  OpenMPI: %s\n", mpi_note.c_str());
  if (show_ar)
    std::printf("  (ratio = tessera busbw / OpenMPI busbw, the median [min-max] over rounds of the ratio of the two\n"
                "   medians measured back to back in a round; target >= 0.9 from 1 MiB up)\n");
  if (show_halo) {
    std::printf("\nhalo exchange (batch_p2p: send n bytes to the next rank, receive n from the previous)\n");
    std::printf("  %-10s %28s %14s\n", "size", "time us", "GB/s each way");
  }
  for (const auto& [bytes, s] : halo)
    std::printf("  %-10s %9.2f [%7.2f-%8.2f] %14.3f\n", fmt_bytes(bytes).c_str(), s.median, s.min, s.max,
                bytes / (s.median * 1e-6) / 1e9);
  if (pingpong.count(8)) {
    const Stats& pp = pingpong.at(8);
    std::printf("  ping-pong 8 B, half round trip (batch_p2p send, then receive): %.2f us [%.2f-%.2f]\n", pp.median,
                pp.min, pp.max);
  }
  // Single messages timed one by one, as ucx_perftest times its own.
  if (pp_p50.count(8) && halo_p50.count(64))
    std::printf(
        "  50th percentile of single messages: ping-pong half round trip %.2f us [%.2f-%.2f],\n"
        "  64 B halo exchange %.2f us [%.2f-%.2f]\n",
        pp_p50.at(8).median, pp_p50.at(8).min, pp_p50.at(8).max, halo_p50.at(64).median,
        halo_p50.at(64).min, halo_p50.at(64).max);
  if (empty.count(0)) {
    const Stats& e = empty.at(0);
    std::printf("  batch_p2p with no operations (the call's own cost): %.2f us [%.2f-%.2f]\n", e.median, e.min, e.max);
  }
  if (perf_lat_us > 0)
    std::printf(
        "  ucx_perftest tag_lat 8 B: %.2f us typical (its 50th percentile), %.2f us average "
        "(medians of\n"
        "  rounds). 50th percentiles over tag_lat's (target <= 2x): ping-pong %.1fx, halo 64 B "
        "%.1fx\n"
        "  (per round, back to back; median over rounds)\n",
        perf_lat_us, perf_lat_avg_us, median_of(pingpong_ratio), median_of(halo_ratio));
  else if (show_halo)
    std::printf("  ucx_perftest: not installed or failed (Debian: ucx-utils)\n");
  if (ucp.count(8) && ucp.count(64))
    std::printf("  UCP alone (bench_ucp_exchange, the ucx backend's UCP settings; 50th percentiles): ping-pong\n"
                "  %.2f us, 64 B exchange %.2f us; tessera over them: %.1fx, %.1fx (the cost of the call chain)\n",
                ucp.at(8).median, ucp.at(64).median, median_of(pingpong_ucp_ratio), median_of(halo_ucp_ratio));
  else if (show_halo && o.backend == "ucx")
    std::printf("  UCP alone: %s\n", executable(ucp_bin) ? ("bench_ucp_exchange failed: " + ucp_note).c_str()
                                                         : "bench_ucp_exchange not built (needs UCX)");
  if (perf_bw_mbps > 0) std::printf("  ucx_perftest tag_bw 144 KiB: %.3f GB/s\n", perf_bw_mbps * 1.048576e-3);
  if (!progress_x.empty()) {
    std::printf("\nprogress while computing (post the halo exchange, compute twice its time without calling\n"
                "the backend, then wait; hidden = 1 - wait / exchange)\n");
    std::printf("  %-10s %28s %34s %7s\n", "size", "exchange us", "wait after compute us", "hidden");
    for (const auto& [bytes, s] : progress_x) {
      if (!progress_wait.count(bytes)) continue;
      const Stats& w = progress_wait.at(bytes);
      std::printf("  %-10s %9.1f [%7.1f-%8.1f] %15.1f [%7.1f-%8.1f] %6.0f%%\n", fmt_bytes(bytes).c_str(), s.median,
                  s.min, s.max, w.median, w.min, w.max, 100 * hidden(bytes));
    }
  }
  std::printf("\nmemcpy, one thread, 64 MiB: %.2f GB/s (the physical limit of a copy through memory)\n", copy_gbps);
  if (o.cuda) {
    std::printf("\nCUDA buffers (%s; x host = time over the same call on host buffers)\n",
                o.backend == "ucx" ? "staged through pinned host memory by the ucx plugin" : o.backend.c_str());
    std::printf("  all_reduce float32 sum\n  %-8s %26s %9s %8s\n", "size", "time us", "busbw", "x host");
    for (const auto& [bytes, s] : ar_cuda)
      std::printf("  %-8s %9.1f [%6.1f-%7.1f] %9.3f %8.2f\n", fmt_bytes(bytes).c_str(), s.median, s.min, s.max,
                  bytes / (s.median * 1e-6) / 1e9 * bus, ar.count(bytes) ? s.median / ar.at(bytes).median : 0.0);
    std::printf("  halo exchange\n  %-8s %26s %9s %8s\n", "size", "time us", "GB/s", "x host");
    for (const auto& [bytes, s] : halo_cuda)
      std::printf("  %-8s %9.2f [%6.2f-%7.2f] %9.3f %8.2f\n", fmt_bytes(bytes).c_str(), s.median, s.min, s.max,
                  bytes / (s.median * 1e-6) / 1e9, halo.count(bytes) ? s.median / halo.at(bytes).median : 0.0);
    std::printf("  pinned cudaMemcpy, 64 MiB: device to host %.2f GB/s, host to device %.2f GB/s (the limit of "
                "staging)\n", pinned.d2h_GBps, pinned.h2d_GBps);
  }
  return rank_note.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool is_worker = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_comm: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--json") o.json = true;
    else if (a == "--worker") is_worker = true;
    else if (a == "--reps") o.reps = std::atoi(next().c_str());
    else if (a == "--nproc") o.nproc = std::atoi(next().c_str());
    else if (a == "--backend") o.backend = next();
    else if (a == "--max-mib") o.max_mib = std::atoi(next().c_str());
    else if (a == "--cuda") o.cuda = true;
    else if (a == "--only") o.only = next();
    else if (a == "--rounds") o.rounds = std::atoi(next().c_str());
    else {
      std::fprintf(stderr,
                   "usage: bench_comm [--json] [--reps N] [--nproc P] [--backend ucx] [--max-mib "
                   "64] [--cuda] [--only allreduce|halo|latency|progress]\n"
                   "                  [--rounds R]\n"
                   "  a comm backend between P processes on this host (loopback), beside\n"
                   "  OpenMPI's MPI_Allreduce (bench_comm_mpi), ucx_perftest, UCP alone\n"
                   "  (bench_ucp_exchange) and memcpy, each run when built or installed;\n"
                   "  figures are medians [min-max]\n"
                   "  --backend: the comm backend measured (default ucx)\n"
                   "  --nproc: ranks (default 2)\n"
                   "  --max-mib: the largest all-reduce in MiB (4 KiB x4 up to it; default 64)\n"
                   "  --reps: repetitions per round (default 7); --rounds: rounds that\n"
                   "      alternate the ranks and the peers, so a slow spell falls on every\n"
                   "      side (default 3)\n"
                   "  --only allreduce|halo|latency|progress: one part (latency: the\n"
                   "      ping-pong and the 64 B halo exchange; progress: how much of a posted\n"
                   "      halo exchange moves while the ranks compute without calling the\n"
                   "      backend)\n"
                   "  --cuda: the all-reduce and halo exchange also on CUDA buffers, with the\n"
                   "      pinned cudaMemcpy bandwidth each way (a build with the CUDA toolkit)\n"
                   "  --json: one JSON object on stdout instead of the table\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (!o.only.empty() && o.only != "allreduce" && o.only != "halo" && o.only != "latency" && o.only != "progress") {
    std::fprintf(stderr, "bench_comm: --only takes allreduce, halo, latency or progress, not '%s'\n", o.only.c_str());
    return 2;
  }
  if (o.reps < 1 || o.nproc < 2 || o.max_mib < 1 || o.rounds < 1) {
    std::fprintf(stderr, "bench_comm: --reps must be >= 1, --nproc >= 2, --max-mib >= 1, --rounds >= 1\n");
    return 2;
  }
  if (o.cuda && !bench::cuda_built()) {
    std::fprintf(stderr, "bench_comm: --cuda needs a build with the CUDA toolkit (TESSERA_WITH_CUDA)\n");
    return 2;
  }
  try {
    return is_worker ? worker(o) : parent(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_comm: %s\n", e.what());
    return 1;
  }
}
