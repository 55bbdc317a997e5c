// Plugin loading: the versioned entry point, every way a plugin can fail to load (each with its
// message), registry integration, and the C ABI round trip (statuses back to exceptions).
#include <dlfcn.h>

#include <map>

#include "comm/conformance.hpp"
#include "comm/store_rendezvous.hpp"
#include "tessera/comm/plugin_loader.hpp"

namespace {

using namespace tessera;
using test::StoreRendezvous;
using test::conformance::missing_from;

std::string lib(const char* name) { return std::string(TESSERA_TEST_PLUGIN_DIR) + "/libtessera-comm-" + name + ".so"; }

/// Whether the library at `path` exports `symbol`.
bool exports(const std::string& path, const char* symbol) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  const bool found = ::dlsym(h, symbol) != nullptr;
  ::dlclose(h);
  return found;
}

TEST_CASE("plugins that cannot load say why", "[comm][plugin]") {
  auto missing = comm::load_plugin(lib("doesnotexist"), nullptr);
  REQUIRE(!missing.loaded);
  REQUIRE(missing_from(missing.why, "cannot load") == "");
  auto badver = comm::load_plugin(lib("badver"), nullptr);
  REQUIRE(!badver.loaded);
  REQUIRE(missing_from(badver.why, "wrong version") == "");
  REQUIRE(missing_from(badver.why, "api_version 99") == "");
  auto v2 = comm::load_plugin(lib("v2only"), nullptr);
  REQUIRE(!v2.loaded);
  REQUIRE(missing_from(v2.why, "wrong version") == "");
  REQUIRE(missing_from(v2.why, "tessera_comm_plugin_v2") == "");
  auto nosym = comm::load_plugin(lib("nosym"), nullptr);
  REQUIRE(!nosym.loaded);
  REQUIRE(missing_from(nosym.why, "missing symbol tessera_comm_plugin_v1") == "");
}

TEST_CASE("load_plugins scans folders and reports every plugin", "[comm][plugin]") {
  comm::Registry reg;
  const auto all = comm::load_plugins(reg, {TESSERA_TEST_PLUGIN_DIR});
  std::map<std::string, comm::PluginStatus> by;
  for (const auto& s : all) by[s.name] = s;
  REQUIRE(by.count("selftest"));
  REQUIRE(by["selftest"].loaded);
  REQUIRE(by["selftest"].description == "one rank, for tests");
  REQUIRE(exports(lib("selftest"), "tessera_comm_plugin_v1_plans"));  // retired, yet it loads
  REQUIRE(!by["selftest"].device_stream);
  REQUIRE(by["streamtest"].loaded);
  REQUIRE(by["streamtest"].device_stream);  // the optional stream symbol was found
  REQUIRE(by["streamhost"].loaded);
  REQUIRE(!by["streamhost"].device_stream);
  REQUIRE(!by["badver"].loaded);
  REQUIRE(!by["nosym"].loaded);
  REQUIRE(!by["v2only"].loaded);
  REQUIRE(!by["nccl"].loaded);
  REQUIRE(missing_from(by["nccl"].why, "missing library: libtessera-comm-nccl.so not found") == "");
  REQUIRE(reg.names() == std::vector<std::string>{"selftest", "streamhost", "streamtest"});
  REQUIRE(reg.capabilities("selftest").split);
  REQUIRE(!reg.capabilities("selftest").all_to_all);
}

TEST_CASE("a loaded plugin works through the registry, errors cross the ABI as statuses", "[comm][plugin]") {
  comm::Registry reg;
  REQUIRE(comm::load_plugin(lib("selftest"), &reg).loaded);
  comm::BackendOptions o;
  std::string msg;
  try {
    reg.create("selftest", o);  // no store
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "needs a rendezvous with a key-value store") == "");
  o.rendezvous = std::make_shared<StoreRendezvous>();
  auto b = reg.create("selftest", o);
  REQUIRE(b->name() == "selftest");
  REQUIRE(b->size() == 1);
  std::vector<float> x = {1, 2};
  b->all_reduce(test::conformance::view(x), comm::ReduceOp::Sum)->wait();
  auto sub = b->split({0});
  REQUIRE(sub);
  REQUIRE(sub->size() == 1);
  REQUIRE(!b->split({}));
  msg.clear();
  try {
    b->broadcast(test::conformance::view(x), 3);
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "broadcast root 3") == "");
  msg.clear();
  try {
    b->batch_p2p({});
  } catch (const TimeoutError& e) {
    msg = e.what();
  }
  REQUIRE(msg == "selftest: rank 0: batch_p2p timed out (a test of the status mapping)");
  msg.clear();
  try {
    b->all_to_all(test::conformance::view(x), test::conformance::view(x));
  } catch (const Unsupported& e) {
    msg = e.what();
  }
  REQUIRE(missing_from(msg, "does not support all_to_all") == "");
}

}  // namespace
