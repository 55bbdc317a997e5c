// The nccl plugin without a GPU (label unit;comm;nccl; runs everywhere the plugin is built): it
// loads, states its capabilities, its probe says whether a device is visible, and creating it
// where none is fails with a message naming the cause and the way out.
#include <sys/wait.h>
#include <unistd.h>

#include "comm/nccl_support.hpp"
#include "comm/process_runner.hpp"
#include "tessera/comm/plugin_loader.hpp"

namespace {

using namespace tessera;

/// Runs `f` in a child process (the test process keeps CUDA uninitialised) and returns what it
/// returned, or a line saying how the child died.
template <class F>
std::string in_child(F&& f) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    std::string out;
    try {
      out = f();
    } catch (const std::exception& e) {
      out = std::string("exception: ") + e.what();
    }
    [[maybe_unused]] ssize_t w = ::write(p[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return "child died";
  return got;
}

}  // namespace

TEST_CASE("nccl plugin: loads, reports CUDA memory + multi-process, and its probe matches the devices",
          "[nccl][plugin]") {
  const auto devices = test::nccl::probe_devices();
  const std::string r = in_child([] {
    comm::Registry reg;
    const auto st = comm::load_plugin(test::built_plugin(TESSERA_NCCL_PLUGIN), &reg);
    if (!st.loaded) return "not loaded: " + st.why;
    std::string out = "name=" + st.name + ";";
    out += st.caps.cuda_memory ? "cuda;" : "host;";
    out += st.caps.multi_process ? "mp;" : "inproc;";
    out += st.caps.split ? "split;" : "";
    out += st.caps.all_to_all ? "a2a;" : "";
    out += reg.contains("nccl") ? "registered;" : "unregistered;";
    out += "desc=" + st.description + ";";
    out += "unusable=" + (st.probe ? st.probe() : std::string("(no probe)"));
    return out;
  });
  INFO(r);
  REQUIRE(r.rfind("name=nccl;cuda;mp;split;a2a;registered;desc=NCCL ", 0) == 0);
  if (devices.count == 0) {
    REQUIRE(test::conformance::missing_from(r, "unusable=no CUDA device visible (cudaGetDeviceCount") == "");
  } else {
    REQUIRE(r.size() > 9);
    REQUIRE(r.substr(r.size() - 9) == "unusable=");
  }
}

TEST_CASE("nccl plugin: with no GPU visible, create fails naming the cause and the alternatives",
          "[nccl][plugin]") {
  const auto devices = test::nccl::probe_devices();
  if (devices.count > 0)
    TESSERA_SKIP("a CUDA device is visible here; the gpu-labelled nccl tests cover creation");
  bool reached = false;
  std::string msg;
  try {
    test::run_in_processes(TESSERA_NCCL_PLUGIN, 1, std::chrono::seconds(10), [](comm::Backend&) {});
    reached = true;
  } catch (const BackendError& e) {
    msg = e.what();
  }
  INFO(msg);
  REQUIRE_FALSE(reached);
  REQUIRE(test::conformance::missing_from(msg, "rank 0: no CUDA device visible (cudaGetDeviceCount: ") == "");
  REQUIRE(test::conformance::missing_from(msg, "use ucx or local for host memory") == "");
}
