// bench_ucp_exchange: the floor under tessera's ucx latency, measured with UCP alone. Two
// processes of this program (forked; worker addresses passed through pipes) run, with the UCP
// settings of tessera's ucx backend (UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP, a serialised worker):
//   - a ping-pong of 8 bytes (send, then receive; half the round trip, as ucx_perftest tag_lat);
//   - the halo exchange's pattern at 64 bytes: each side posts its receive, sends, and
//     progresses until both are done;
// each message timed alone, like ucx_perftest. bench_comm runs it in every round beside tessera's
// own figures, so the distance between the two is the cost of tessera's call chain.
//   bench_ucp_exchange [iterations per repetition] [repetitions]
// prints "ucp_pingpong 8 <us per repetition...>" and "ucp_exchange 64 <us ...>" (each figure the
// 50th percentile of single messages of one repetition), as bench_comm's ranks print theirs.
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "bench_ucp_exchange: %s\n", why.c_str());
  std::exit(1);
}

void check(ucs_status_t st, const char* what) {
  if (st != UCS_OK) die(std::string(what) + ": " + ucs_status_string(st));
}

bool write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    const ssize_t w = ::write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, std::size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    const ssize_t r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

struct Peer {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
  Clock::time_point deadline;

  // Progresses until `req` (a request, NULL or an error pointer) completes.
  void finish(void* req, const char* what) {
    if (req == nullptr) return;
    if (UCS_PTR_IS_ERR(req)) die(std::string(what) + ": " + ucs_status_string(UCS_PTR_STATUS(req)));
    ucs_status_t st;
    for (unsigned polls = 0; (st = ucp_request_check_status(req)) == UCS_INPROGRESS; ++polls) {
      ucp_worker_progress(worker);
      if ((polls & 1023) == 1023 && Clock::now() > deadline) die(std::string(what) + ": the peer is gone (60 s)");
    }
    ucp_request_free(req);
    if (st != UCS_OK) die(std::string(what) + ": " + ucs_status_string(st));
  }
  void* post_recv(void* buf, std::size_t n) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(1);
    return ucp_tag_recv_nbx(worker, buf, n, 1, ~std::uint64_t{0}, &p);
  }
  void* post_send(const void* buf, std::size_t n) {
    ucp_request_param_t p{};
    return ucp_tag_send_nbx(ep, buf, n, 1, &p);
  }
};

void connect(Peer& me, int to_peer, int from_peer) {
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  const ucs_status_t st = ucp_init(&params, config, &me.ctx);
  ucp_config_release(config);
  check(st, "ucp_init");
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  check(ucp_worker_create(me.ctx, &wp, &me.worker), "ucp_worker_create");
  ucp_address_t* addr = nullptr;
  std::size_t len = 0;
  check(ucp_worker_get_address(me.worker, &addr, &len), "ucp_worker_get_address");
  if (!write_all(to_peer, &len, sizeof len) || !write_all(to_peer, addr, len)) die("the peer did not take our address");
  ucp_worker_release_address(me.worker, addr);
  std::size_t plen = 0;
  if (!read_all(from_peer, &plen, sizeof plen) || plen > (1u << 20)) die("no address from the peer");
  std::vector<char> peer(plen);
  if (!read_all(from_peer, peer.data(), plen)) die("no address from the peer");
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = reinterpret_cast<const ucp_address_t*>(peer.data());
  check(ucp_ep_create(me.worker, &ep, &me.ep), "ucp_ep_create");
}

double median_us(std::vector<double>& s) {
  std::nth_element(s.begin(), s.begin() + static_cast<long>(s.size() / 2), s.end());
  return s[s.size() / 2] * 1e6;
}

int run(bool first, int to_peer, int from_peer, int iters, int reps) {
  Peer me;
  connect(me, to_peer, from_peer);
  me.deadline = Clock::now() + std::chrono::seconds(60);
  char sbuf[64] = {}, rbuf[64];
  auto pingpong = [&] {
    if (first) {
      me.finish(me.post_send(sbuf, 8), "ping-pong send");
      me.finish(me.post_recv(rbuf, 8), "ping-pong receive");
    } else {
      me.finish(me.post_recv(rbuf, 8), "ping-pong receive");
      me.finish(me.post_send(sbuf, 8), "ping-pong send");
    }
  };
  auto exchange = [&] {
    void* r = me.post_recv(rbuf, 64);
    me.finish(me.post_send(sbuf, 64), "exchange send");
    me.finish(r, "exchange receive");
  };
  std::vector<double> each(static_cast<std::size_t>(iters)), pp, ex;
  for (int k = 0; k < 2; ++k) {
    auto& out = k == 0 ? pp : ex;
    for (int i = 0; i < 100; ++i) k == 0 ? pingpong() : exchange();  // warm-up
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) {
        k == 0 ? pingpong() : exchange();
        const auto t1 = Clock::now();
        each[static_cast<std::size_t>(i)] = std::chrono::duration<double>(t1 - t0).count();
        t0 = t1;
      }
      out.push_back(median_us(each) / (k == 0 ? 2 : 1));
    }
  }
  // Both sides leave together: the last messages must not meet a closed worker.
  me.finish(me.post_send(sbuf, 8), "closing send");
  me.finish(me.post_recv(rbuf, 8), "closing receive");
  ucp_request_param_t cp{};
  me.finish(ucp_ep_close_nbx(me.ep, &cp), "ucp_ep_close_nbx");
  ucp_worker_destroy(me.worker);
  ucp_cleanup(me.ctx);
  if (first) {
    std::printf("ucp_pingpong 8");
    for (double x : pp) std::printf(" %.6g", x);
    std::printf("\nucp_exchange 64");
    for (double x : ex) std::printf(" %.6g", x);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000, reps = argc > 2 ? std::atoi(argv[2]) : 5;
  if (iters < 1 || reps < 1 || argc > 3) {
    std::fprintf(stderr, "usage: bench_ucp_exchange [iterations >= 1] [repetitions >= 1]\n");
    return 2;
  }
  int a[2], b[2];
  if (::pipe(a) != 0 || ::pipe(b) != 0) die("pipe failed");
  const pid_t child = ::fork();
  if (child < 0) die("fork failed");
  if (child == 0) {
    ::close(a[1]);
    ::close(b[0]);
    std::fflush(stdout);
    std::_Exit(run(false, b[1], a[0], iters, reps));
  }
  ::close(a[0]);
  ::close(b[1]);
  const int rc = run(true, a[1], b[0], iters, reps);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("the second process failed");
  return rc;
}
