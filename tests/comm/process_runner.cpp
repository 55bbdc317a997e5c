// run_in_processes: fork one process per rank, a store in the parent, results over pipes.
#include "comm/process_runner.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "tessera/comm/plugin_loader.hpp"
#include "tessera/plugin_path.hpp"
#include "tessera/comm/tcp_store.hpp"

namespace tessera::test {

namespace {

class ClientRendezvous final : public comm::Rendezvous {
 public:
  explicit ClientRendezvous(comm::TcpStoreClient::Options o) : client_(std::move(o)) {}
  std::string describe() const override { return "test store " + client_.address(); }
  comm::Store* store() override { return &client_; }

 private:
  comm::TcpStoreClient client_;
};

void write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

[[noreturn]] void child(int rank, int size, int port, const std::string& token, const std::string& plugin,
                        std::chrono::milliseconds timeout, const conformance::RankFn& fn, int out) {
  std::string result = "OK";
  {
    std::shared_ptr<ClientRendezvous> rdzv;
    std::unique_ptr<comm::Backend> backend;
    try {
      comm::TcpStoreClient::Options o;
      o.port = port;
      o.token = token;
      o.rank = rank;
      o.connect_timeout = std::chrono::seconds(10);
      rdzv = std::make_shared<ClientRendezvous>(o);
      comm::Registry reg;
      const auto st = comm::load_plugin(plugin, &reg);
      if (!st.loaded) throw std::runtime_error("plugin did not load: " + st.why);
      comm::BackendOptions bo;
      bo.rank = rank;
      bo.size = size;
      bo.timeout = timeout;
      bo.rendezvous = rdzv;
      backend = reg.create(st.name, bo);
      fn(*backend);
    } catch (const conformance::CheckFailure& e) {
      result = std::string("C") + e.what();
    } catch (const TimeoutError& e) {
      result = std::string("T") + e.what();
    } catch (const BackendError& e) {
      result = std::string(e.code() == 125 ? "A" : "B") + e.what();
    } catch (const InternalError& e) {
      result = std::string("I") + e.what();
    } catch (const InvalidArgument& e) {
      result = std::string("V") + e.what();
    } catch (const std::exception& e) {
      result = std::string("E") + e.what();
    }
    if (result != "OK" && result[0] != 'A' && rdzv)
      rdzv->store()->abort(detail::cat("rank ", rank, " failed: ", result.substr(1)));
    backend.reset();
    rdzv.reset();
  }
  write_all(out, result);
  ::close(out);
  ::_exit(0);
}

}  // namespace

std::string built_plugin(const std::string& built) {
  if (::access(built.c_str(), R_OK) == 0) return built;
  const std::string found = find_plugin_file(built.substr(built.find_last_of('/') + 1));
  return found.empty() ? built : found;
}

void run_in_processes(const std::string& plugin_path_built, int size,
                      std::chrono::milliseconds timeout, const conformance::RankFn& fn) {
  const std::string plugin_path = built_plugin(plugin_path_built);
  int port = 0;
  int lfd = -1;
  {  // bound before forking so the children know the port; served after (no threads at fork)
    lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 128) != 0)
      throw std::runtime_error("cannot listen on loopback");
    socklen_t len = sizeof a;
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  const std::string token = detail::cat("test-", ::getpid(), "-", port);
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  std::fflush(nullptr);
  for (int r = 0; r < size; ++r) {
    int p[2];
    if (::pipe(p) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(lfd);
      ::close(p[0]);
      for (int q : pipes) ::close(q);
      child(r, size, port, token, plugin_path, timeout, fn, p[1]);
    }
    ::close(p[1]);
    pids.push_back(pid);
    pipes.push_back(p[0]);
  }
  std::vector<std::string> results(static_cast<std::size_t>(size));
  {
    comm::TcpStoreServer::Options so;
    so.token = token;
    so.adopt_fd = lfd;
    so.log = [](const std::string&) {};  // a killed rank is an expected case here
    comm::TcpStoreServer server(so);
    const auto deadline = std::chrono::steady_clock::now() + timeout * 3 + std::chrono::seconds(60);
    std::vector<bool> open(static_cast<std::size_t>(size), true);
    int left = size;
    while (left > 0 && std::chrono::steady_clock::now() < deadline) {
      std::vector<pollfd> fds;
      for (int r = 0; r < size; ++r)
        if (open[static_cast<std::size_t>(r)]) fds.push_back({pipes[static_cast<std::size_t>(r)], POLLIN, 0});
      ::poll(fds.data(), fds.size(), 100);
      for (int r = 0; r < size; ++r) {
        const auto ur = static_cast<std::size_t>(r);
        if (!open[ur]) continue;
        pollfd q{pipes[ur], POLLIN, 0};
        if (::poll(&q, 1, 0) <= 0) continue;
        char buf[4096];
        const ssize_t n = ::read(pipes[ur], buf, sizeof buf);
        if (n > 0) {
          results[ur].append(buf, static_cast<std::size_t>(n));
        } else {
          open[ur] = false;
          --left;
        }
      }
    }
    for (int r = 0; r < size; ++r) {
      if (open[static_cast<std::size_t>(r)]) {
        ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
        results[static_cast<std::size_t>(r)] = "Erank process hung past the test's deadline and was killed";
      }
      int status = 0;
      ::waitpid(pids[static_cast<std::size_t>(r)], &status, 0);
      ::close(pipes[static_cast<std::size_t>(r)]);
      if (results[static_cast<std::size_t>(r)].empty())
        results[static_cast<std::size_t>(r)] =
            detail::cat("Erank process died (", WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exit", ")");
    }
  }
  int pick = -1;
  for (int r = 0; r < size && pick < 0; ++r)
    if (results[static_cast<std::size_t>(r)] != "OK" && results[static_cast<std::size_t>(r)][0] != 'A') pick = r;
  for (int r = 0; r < size && pick < 0; ++r)
    if (results[static_cast<std::size_t>(r)] != "OK") pick = r;
  if (pick < 0) return;
  const std::string& res = results[static_cast<std::size_t>(pick)];
  const std::string msg = res.substr(1);
  switch (res[0]) {
    case 'C': throw conformance::CheckFailure(msg);
    case 'T': throw TimeoutError("ucx", msg);
    case 'I': throw InternalError(msg);
    case 'V': throw InvalidArgument(msg);
    case 'A': throw BackendError("ucx", 125, msg);
    case 'B': throw BackendError("ucx", 5, msg);
    default: throw std::runtime_error(msg);
  }
}

}  // namespace tessera::test
