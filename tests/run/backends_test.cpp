// The backend listing: this build's comm backends (local built in, plugins loaded or why not) and
// compute backends (cpu), its text, and --require's verdicts (0 runs here, 1 missing or not
// loading, 3 loaded but unable to run here).
#include <string>

#include "run/expect.hpp"
#include "support/catch.hpp"
#include "tessera/run/backends.hpp"

using namespace tessera;
using runtest::has;

TEST_CASE("backends: the listing has local and cpu, built in and able to run", "[run]") {
  const run::BackendListing l = run::list_backends();
  const run::BackendEntry* local = l.find("local");
  REQUIRE(local != nullptr);
  REQUIRE_FALSE(local->plugin);
  REQUIRE(local->loaded);
  REQUIRE(local->why.empty());
  REQUIRE_FALSE(local->caps.multi_process);
  const run::BackendEntry* cpu = l.find("cpu");
  REQUIRE(cpu != nullptr);
  REQUIRE(cpu->loaded);
  REQUIRE(cpu->why.empty());
  const std::string text = l.to_text();
  REQUIRE(
      text.rfind("communication backends:\n  local    built in  (in-process threads, host memory",
                 0) == 0);
  REQUIRE(has(text, "\nplugin folders searched:"));
  REQUIRE(has(text, "\ncompute backends:\n  cpu      built in\n"));
  for (const run::BackendEntry& e : l.comm) REQUIRE(has(text, "  " + e.name));
  REQUIRE(l.find("no-such-backend") == nullptr);
  const run::RequireCheck ok = run::check_required(l, {"local", "cpu"});
  REQUIRE(ok.status == 0);
  REQUIRE(ok.problems.empty());
}

TEST_CASE("backends: --require says which backend is missing, does not load or cannot run",
          "[run]") {
  run::BackendListing l;
  l.comm.push_back({"local", false, true, "", "", {}});
  l.comm.push_back({"ucx", true, false, "libtessera_comm_ucx.so not found", "", {}});
  l.comm.push_back(
      {"nccl", true, true, "no CUDA device visible", "/p/libtessera_comm_nccl.so", {}});
  l.compute.push_back({"cpu", false, true, "", "", {}});
  REQUIRE(run::check_required(l, {"local", "cpu"}).status == 0);
  const run::RequireCheck no_device = run::check_required(l, {"nccl"});
  REQUIRE(no_device.status == 3);
  REQUIRE(no_device.problems ==
          std::vector<std::string>{
              "required backend 'nccl' loads but cannot run here: no CUDA device visible"});
  const run::RequireCheck both = run::check_required(l, {"nccl", "ucx", "zzz"});
  REQUIRE(both.status == 1);  // not loading outranks not running
  REQUIRE(both.problems.size() == 3);
  REQUIRE(both.problems[1] ==
          "required backend 'ucx' does not load: libtessera_comm_ucx.so not found");
  REQUIRE(both.problems[2] ==
          "required backend 'zzz' is not in this build (it has cpu, local, nccl, ucx)");
  const std::string text = l.to_text();
  REQUIRE(has(text, "  ucx      not loaded: libtessera_comm_ucx.so not found\n"));
  REQUIRE(has(text,
              "  nccl     built, no CUDA device visible; loaded from /p/libtessera_comm_nccl.so "
              "(in-process"));
}
