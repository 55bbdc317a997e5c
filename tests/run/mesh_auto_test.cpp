// A mesh with one dimension auto (dp=auto,sp=2): resolved per run from the launcher's world size
// (WORLD_SIZE) on a multi-process backend, refused on the local backend, in simulations and
// plans, with two autos or a world the other dims do not divide; the checks of the resolved mesh
// name the world size it was resolved for.
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "run/expect.hpp"
#include "run/tiny_spec.hpp"
#include "support/catch.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/registry.hpp"
#include "tessera/run/resolve.hpp"

using namespace tessera;
using run::RunSpec;
using runtest::has;
using runtest::message;

namespace {

/// Sets environment variables for one scope and puts back what was there before.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old)
        ::setenv(name.c_str(), old->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

/// A world of `n` ranks as torchrun describes it, seen from rank 0.
ScopedEnv world_of(int n) {
  return ScopedEnv(
      {{"RANK", "0"}, {"WORLD_SIZE", std::to_string(n)}, {"TESSERA_RDZV_TOKEN", "mesh-auto-test"}});
}

/// A registered multi-process comm backend of this build ("" when there is none).
std::string multi_process_backend() {
  comm::Registry comms;
  register_builtin_backends(comms);
  register_plugin_backends(comms);
  return comms.contains("ucx") ? "ucx" : "";
}

}  // namespace

TEST_CASE("an auto mesh dimension is the world size over the other dims", "[run]") {
  CHECK(run::resolve_mesh_auto("dp=auto,sp=2", 6) == "dp=3,sp=2");
  CHECK(run::resolve_mesh_auto("sp=auto", 5) == "sp=5");
  CHECK(run::resolve_mesh_auto("sp_h=2,sp_w=auto", 8) == "sp_h=2,sp_w=4");
  CHECK(run::resolve_mesh_auto("dp=2,pp=auto,sp=2", 4) == "dp=2,pp=1,sp=2");
  CHECK(run::resolve_mesh_auto("dp=2,sp=2", 7) == "dp=2,sp=2");  // no auto: as it is
  const std::string odd = message([] { run::resolve_mesh_auto("dp=auto,sp=2", 5); });
  CHECK(has(odd, "with 5 ranks, mesh dp=auto,sp=2"));
  CHECK(has(odd, "multiple of 2 ranks"));
  CHECK(has(message([] { run::resolve_mesh_auto("dp=auto,sp=4", 2); }), "with 2 ranks"));
  const std::string two = message([] { run::resolve_mesh_auto("dp=auto,sp=auto", 4); });
  CHECK(has(two, "only one dimension may be auto"));
  CHECK(has(message([] { run::resolve_mesh_auto("dp=auto,sp=0", 4); }), "'sp' is not a positive"));
  CHECK(has(message([] { run::resolve_mesh_auto("dp=auto,sp=x", 4); }), "size 'x'"));
}

TEST_CASE("the mesh field takes one auto dimension and refuses two", "[run]") {
  RunSpec s;
  s.set("mesh", "dp=auto,sp=2");
  CHECK(s.mesh == "dp=auto,sp=2");
  CHECK(RunSpec::from_json(s.to_json(), RunSpec{}, "t") == s);
  const std::string two = message([&] { s.set("mesh", "dp=auto,sp=auto"); });
  CHECK(has(two, "mesh 'dp=auto,sp=auto': "));
  CHECK(has(two, "only one dimension may be auto"));
  CHECK(has(message([&] { s.set("mesh", "dp=automatic"); }), "not a positive integer"));
  CHECK(s.mesh == "dp=auto,sp=2");  // a refused value changes nothing
}

TEST_CASE("an auto mesh is refused on the local backend and in simulations", "[run]") {
  const auto env = world_of(4);
  RunSpec local = runtest::tiny_spec(RunSpec{}, "dp=auto,sp=2", 4);
  CHECK(has(message([&] { run::resolve_train(local); }), "give a number with --backend local"));
  RunSpec sim = runtest::tiny_spec(RunSpec::for_simulation(), "dp=auto,sp=2", 4);
  CHECK(has(message([&] { run::resolve_sim(sim); }), "a simulation or plan needs"));
}

TEST_CASE("an auto mesh resolves from WORLD_SIZE and its checks name the world size", "[run]") {
  RunSpec s = runtest::tiny_spec(RunSpec{}, "dp=auto,sp=2", 4);
  s.backend = "ucx";
  s.micro_batches = 2;
  {  // 8 ranks: dp=4, micro-batches of 2 samples for 4 dp ranks (checked before the backend)
    const auto env = world_of(8);
    const std::string m = message([&] { run::resolve_train(s); });
    INFO(m);
    CHECK(has(m, "with 8 ranks, mesh dp=auto,sp=2 is dp=4,sp=2: batch 4 in micro_batches 2"));
  }
  {
    const auto env = world_of(7);
    CHECK(has(message([&] { run::resolve_train(s); }), "with 7 ranks, mesh dp=auto,sp=2"));
  }
  s.micro_batches = 1;
  const std::string backend = multi_process_backend();
  if (backend.empty()) return;  // the checks below need a multi-process backend in this build
  s.backend = backend;
  {
    const auto env = world_of(4);
    const run::TrainSetup c = run::resolve_train(s);
    CHECK(c.mesh.to_string() == "dp=2,sp=2");
    CHECK(c.mesh.size() == 4);
  }
  {  // dp=5 leaves a rank of the batch of 4 without samples
    const auto env = world_of(10);
    const std::string m = message([&] { run::resolve_train(s); });
    CHECK(has(m, "with 10 ranks, mesh dp=auto,sp=2 is dp=5,sp=2: batch 4 over dp=5"));
  }
  {  // the input, 64 wide, is too small for sp=16
    s.mesh = "dp=auto,sp=16";
    const auto env = world_of(16);
    const std::string m = message([&] { run::resolve_train(s); });
    CHECK(has(m, "with 16 ranks, mesh dp=auto,sp=16 is dp=1,sp=16: "));
  }
}
