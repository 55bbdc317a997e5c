#!/usr/bin/env bash
# Runs the tests that need a GPU (ctest label gpu: the cuda compute backend, the nccl backend,
# and the ucx backend with CUDA buffers staged through host memory) and the nccl plugin's other tests, on a machine with a
# CUDA GPU and the CUDA toolkit with NCCL (/usr/local/cuda). Configures and builds only what they
# need into BUILD_DIR (default build-gpu) unless it is already built, then prints the devices,
# `tessera backends`, and runs the tests verbosely. Exit status: ctest's.
#   tests/gpu/run_gpu_checks.sh [BUILD_DIR]
# Environment: JOBS (build parallelism, default nproc), NCCL_DEBUG=WARN|INFO (passed through),
# SKIP_BUILD=1 (use BUILD_DIR as it is: binaries built on another machine).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build-gpu}
jobs=${JOBS:-$(nproc)}
cd "$here"

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
else
  echo "warning: nvidia-smi not found; the tests will say whether CUDA sees a device"
fi

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake --preset minimal -B "$build" -DTESSERA_WITH_CUDA=ON -DTESSERA_WITH_NCCL=ON -DTESSERA_BUILD_BENCH=OFF
  fi
  grep -q '^NCCL_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt" ||
    { echo "error: CMake did not find NCCL in $build (see the configure summary)"; exit 2; }
  targets="tessera tessera_comm_nccl tessera_tests_nccl"
  # The ucx half where UCX was found (Debian: libucx-dev).
  if cmake --build "$build" --target help | grep tessera_tests_ucx_cuda >/dev/null; then  # no -q: no SIGPIPE under pipefail
    targets="$targets tessera_comm_ucx tessera_tests_ucx_cuda"
  else
    echo "note: UCX not found in $build: the ucx CUDA-staging tests are not built"
  fi
  # The cuda compute backend where cuDNN was found (its tests: label cuda, and gpu for the GPU ones).
  if cmake --build "$build" --target help | grep tessera_tests_cuda >/dev/null; then
    targets="$targets tessera_compute_cuda tessera_tests_cuda"
  else
    echo "note: the cuda compute backend is not built in $build (cuDNN not found? see the configure output)"
  fi
  # shellcheck disable=SC2086
  cmake --build "$build" -j"$jobs" --target $targets
fi

tessera=$(find "$build" -type f -name tessera -perm -u+x | head -n1)
"$tessera" backends || true

# Every gpu-labelled test, every cuda and every nccl test; a test that cannot run here ends skipped (ctest
# counts it so, with the reason it printed: TESSERA_TEST_SKIPPED).
ctest --test-dir "$build" -L 'gpu|nccl|cuda' --output-on-failure --verbose --timeout 600
