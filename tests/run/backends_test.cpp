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

TEST_CASE("backends: the cpu kernels' lines name what runs on oneDNN, and why not", "[run]") {
  run::CpuKernels k;
  k.onednn = {true, "2.6.3", "avx2", true, false, "gemm:jit", "", "", "no bf16 product for avx2"};
  const std::string widened = "Eigen GEMM (widened to f32)";
  k.conv = {{"pointwise", "oneDNN gemm:jit", widened, widened, "Eigen GEMM"}};
  k.other_ops = "tessera's kernels";
  REQUIRE(k.to_text("  ") ==
          "  kernels: oneDNN 2.6.3, ISA avx2, pointwise f32 gemm:jit, bf16 not on oneDNN: no bf16 "
          "product for avx2\n"
          "  Auto's convolution paths:\n"
          "    pointwise:     f32: oneDNN gemm:jit; bf16, f16: Eigen GEMM (widened to f32); f64: "
          "Eigen GEMM\n"
          "  other ops: tessera's kernels\n");
  k.onednn.bf16 = true, k.onednn.impl_bf16 = "brg:avx512_core_amx";
  REQUIRE(k.onednn.summary() ==
          "oneDNN 2.6.3, ISA avx2, pointwise f32 gemm:jit, bf16 brg:avx512_core_amx");
  REQUIRE(has(k.to_text(""), "\nbf16 convolutions on the CPU's bf16 instructions"));
  k.onednn = {true, "2.6.3", "avx2", false, false, "", "", "switched off", "switched off"};
  REQUIRE(k.onednn.summary() ==
          "oneDNN 2.6.3, ISA avx2, not used: switched off; pointwise on Eigen GEMM");
  k.onednn = {false, "", "", false, false, "", "", "built without oneDNN", "built without oneDNN"};
  REQUIRE(k.onednn.summary() == "no oneDNN: built without oneDNN; pointwise on Eigen GEMM");

  // This build's listing carries them under cpu, four classes of convolution in four dtypes.
  const run::BackendListing l = run::list_backends();
  REQUIRE(l.cpu.conv.size() == 4);
  for (const run::ConvPaths& c : l.cpu.conv)
    REQUIRE_FALSE((c.f32.empty() || c.bf16.empty() || c.f16.empty() || c.f64.empty()));
  REQUIRE(has(l.to_text(), "\n  cpu      built in\n           kernels: "));
  run::BackendListing bare;  // never probed: no kernel lines
  bare.compute.push_back({"cpu", false, true, "", "", {}});
  REQUIRE_FALSE(has(bare.to_text(), "kernels:"));
}
