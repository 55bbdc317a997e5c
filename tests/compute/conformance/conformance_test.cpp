// The compute conformance suite's test cases: one per backend × op × dtype of the suite's registry
// ("conformance.cpu.conv2d_forward.f32", registered at start-up from the registry's names), one
// that every OpKind has a case, and a summary table of backend × op × dtype → outcome. The suite's
// registry is every built-in backend plus cuda-kernels@host (the cuda backend's kernel bodies on a
// host loop, which is not for users and so not built in).
#include <algorithm>
#include <cstdio>
#include <memory>

#include "compute/conformance/conformance.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/compute/cuda_kernels.hpp"

namespace tessera::test::compute_conformance {
namespace {

using compute::OpKind;

/// The backends the suite runs: register_builtin_backends' list and cuda-kernels@host.
compute::Registry suite_registry() {
  compute::Registry r;
  register_builtin_backends(r);
  r.add("cuda-kernels@host", compute::cuda::create_host_loop);
  return r;
}

std::unique_ptr<compute::Backend> create_backend(const std::string& name) {
  compute::BackendOptions o;
  o.num_threads = kThreads;
  return suite_registry().create(name, o);
}

/// Prints "unsupported: <backend> <op> <dtype> [<variant>]: <message>" for each unsupported
/// variant.
void print_unsupported(const Report& r) {
  for (const VariantResult& v : r.results)
    if (v.outcome == Outcome::Unsupported)
      std::printf("unsupported: %s [%s]: %s\n", r.title().c_str(), v.variant.name().c_str(),
                  v.message.c_str());
  std::fflush(stdout);
}

}  // namespace

void run_conformance_case(compute::Backend& backend, OpKind op, DType dtype) {
  const Report r = check_op(backend, op, dtype);
  print_unsupported(r);
  INFO(r.details());
  if (must_support(backend.name(), op, dtype)) REQUIRE(r.count(Outcome::Unsupported) == 0);
  REQUIRE(r.overall() != Outcome::Fail);
  if (r.overall() == Outcome::Unsupported)
    TESSERA_SKIP("unsupported: " << r.title() << ": " << r.results.front().message);
}

namespace {

/// Backends that compute on a device need one: their cases carry the tag [gpu] (ctest label
/// gpu), and where the backend cannot be created (no device visible) they are skipped with why.
bool needs_gpu(const std::string& backend) { return backend == "cuda"; }

/// The backend, or null with `why` when it cannot run here (Unsupported from its factory).
std::unique_ptr<compute::Backend> try_create(const std::string& backend, std::string& why) {
  try {
    return create_backend(backend);
  } catch (const Unsupported& e) {
    why = e.what();
    return nullptr;
  }
}

/// Registers one test case per backend of the registry × op × dtype, before Catch2 runs.
const bool kRegistered = [] {
  for (const std::string& backend : suite_registry().names())
    for (int k = 0; k < int(OpKind::kCount); ++k)
      for (DType dt : kDTypes) {
        const OpKind op = static_cast<OpKind>(k);
        if (!op_has_dtype(op, dt)) continue;
        register_test_case(
            detail::cat("conformance.", backend, ".", compute::op_name(op), ".",
                        core::dtype_name(dt)),
            needs_gpu(backend) ? "[conformance][gpu]" : "[conformance]",
            [backend, op, dt] {
              std::string why;
              const auto be = try_create(backend, why);
              if (!be) TESSERA_SKIP("backend " << backend << " cannot run here: " << why);
              run_conformance_case(*be, op, dt);
            },
            __FILE__, __LINE__);
      }
  return true;
}();

TEST_CASE("conformance.every_op_has_a_case", "[conformance]") {
  REQUIRE(kRegistered);
  std::string missing;
  for (int k = 0; k < int(OpKind::kCount); ++k)
    if (!find_case(static_cast<OpKind>(k)))
      missing += std::string(" ") + std::string(compute::op_name(OpKind(k)));
  INFO(
      "ops of compute::OpKind without a conformance case (add one to "
      "tests/compute/conformance/cases_*.cpp):"
      << missing);
  REQUIRE(missing.empty());
  REQUIRE(all_cases().size() == std::size_t(OpKind::kCount));  // no op listed twice
}

TEST_CASE("conformance.summary", "[conformance]") {
  const std::vector<std::string> backends = suite_registry().names();
  REQUIRE(std::find(backends.begin(), backends.end(), "cpu") != backends.end());
  std::printf("%-17s %-28s %-5s %-12s %-32s %s\n", "backend", "op", "dtype", "outcome",
              "variants pass/unsupported/fail", "worst error / bound");
  int failed = 0, unsupported = 0;
  std::string problems;
  for (const std::string& backend : backends) {
    std::string why;
    const auto be = try_create(backend, why);
    if (!be) {
      std::printf("%-17s not run here: %s\n", backend.c_str(), why.c_str());
      continue;
    }
    for (int k = 0; k < int(OpKind::kCount); ++k)
      for (DType dt : kDTypes) {
        const OpKind op = static_cast<OpKind>(k);
        if (!op_has_dtype(op, dt)) continue;
        const Report r = check_op(*be, op, dt);
        const Outcome o = r.overall();
        const std::string counts =
            detail::cat(r.count(Outcome::Pass), "/", r.count(Outcome::Unsupported), "/",
                        r.count(Outcome::Fail));
        std::printf("%-17s %-28s %-5s %-12s %-32s %.3g\n", backend.c_str(),
                    std::string(compute::op_name(op)).c_str(),
                    std::string(core::dtype_name(dt)).c_str(), outcome_name(o), counts.c_str(),
                    r.worst_share());
        unsupported += r.count(Outcome::Unsupported) > 0;
        const bool required = must_support(backend, op, dt);
        if (o == Outcome::Fail || (required && r.count(Outcome::Unsupported) > 0)) {
          ++failed;
          problems += r.details() + (required ? " (must be supported)\n" : "\n");
        }
      }
  }
  std::printf("%d backend x op x dtype combinations failed, %d had unsupported variants\n", failed,
              unsupported);
  std::fflush(stdout);
  INFO(problems);
  REQUIRE(failed == 0);
}

}  // namespace
}  // namespace tessera::test::compute_conformance
