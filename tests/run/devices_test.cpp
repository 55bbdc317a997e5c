// Device names parsed once (cpu, cuda, cuda:N, with a message naming what is accepted), the
// compute backend of a device, and in-process ranks.
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/devices.hpp"

using namespace tessera;
using run::Device;

namespace {

std::string refusal(const std::string& text) {
  try {
    run::parse_device(text, "--device");
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("devices: cpu, cuda and cuda:N parse to a backend and an index", "[run]") {
  REQUIRE(run::parse_device("cpu") == Device{"cpu", -1});
  REQUIRE(run::parse_device("cuda") == Device{"cuda", 0});
  REQUIRE(run::parse_device("cuda:0") == Device{"cuda", 0});
  REQUIRE(run::parse_device("cuda:3") == Device{"cuda", 3});
  REQUIRE(run::parse_device("cuda:1234") == Device{"cuda", 1234});
  REQUIRE(run::parse_device("cuda:3").gpu());
  REQUIRE_FALSE(run::parse_device("cpu").gpu());
}

TEST_CASE("devices: malformed names are refused with what is accepted", "[run]") {
  for (const std::string bad :
       {"cuda:x", "cuda:-1", "cuda:", "cuda:12345", "cuda:1x", "CUDA", "gpu", "h200", ""}) {
    INFO(bad);
    REQUIRE_FALSE(run::try_parse_device(bad).has_value());
    const std::string m = refusal(bad);
    REQUIRE(m.find("--device '" + bad + "'") != std::string::npos);
    REQUIRE(m.find("expected cpu, cuda or cuda:N") != std::string::npos);
  }
}

TEST_CASE("devices: names_gpu routes GPU names apart from device models", "[run]") {
  REQUIRE(run::names_gpu("cuda"));
  REQUIRE(run::names_gpu("cuda:7"));
  REQUIRE(run::names_gpu("cuda:x"));  // a GPU name, malformed: the caller refuses it
  REQUIRE_FALSE(run::names_gpu("cpu"));
  REQUIRE_FALSE(run::names_gpu("h200"));
  REQUIRE_FALSE(run::names_gpu("cudax"));
}

TEST_CASE("devices: the cpu device gives the cpu compute backend", "[run]") {
  const auto cpu = run::make_compute(Device{}, 2);
  REQUIRE(cpu != nullptr);
  REQUIRE(cpu->name() == "cpu");
  REQUIRE(cpu->device_memory() == nullptr);
}

TEST_CASE("devices: local_ranks runs every rank once and rethrows a rank's failure", "[run]") {
  std::mutex mu;
  std::multiset<int> ranks;
  std::set<int> sizes;
  run::local_ranks(4, [&](comm::Backend& world) {
    std::lock_guard<std::mutex> lock(mu);
    ranks.insert(world.rank());
    sizes.insert(world.size());
  });
  REQUIRE(ranks == std::multiset<int>{0, 1, 2, 3});
  REQUIRE(sizes == std::set<int>{4});
  std::string failure;
  try {
    run::local_ranks(2, [](comm::Backend& world) {
      if (world.rank() == 1) throw InvalidArgument("rank 1 refused");
    });
  } catch (const InvalidArgument& e) {
    failure = e.what();
  }
  REQUIRE(failure.find("rank 1 refused") != std::string::npos);
}
