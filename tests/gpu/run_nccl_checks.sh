#!/usr/bin/env bash
# Runs the nccl backend's GPU tests (ctest label gpu + nccl) on a machine with a CUDA GPU and the
# CUDA toolkit with NCCL (/usr/local/cuda). Configures and builds only what they need into
# BUILD_DIR (default build-gpu) unless it is already built, then prints the devices, the
# `tessera backends` line for nccl, and runs the tests verbosely. Exit status: ctest's.
#   tests/gpu/run_nccl_checks.sh [BUILD_DIR]
# Environment: JOBS (build parallelism, default nproc), NCCL_DEBUG=WARN|INFO (passed through).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build-gpu}
jobs=${JOBS:-$(nproc)}
cd "$here"

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader || true
else
  echo "warning: nvidia-smi not found; the tests will say whether CUDA sees a device"
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake --preset minimal -B "$build" -DTESSERA_WITH_CUDA=ON -DTESSERA_WITH_NCCL=ON -DTESSERA_BUILD_BENCH=OFF
fi
grep -q '^NCCL_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt" ||
  { echo "error: CMake did not find NCCL in $build (see the configure summary)"; exit 2; }
cmake --build "$build" -j"$jobs" --target tessera tessera_comm_nccl tessera_tests_nccl

tessera=$(find "$build" -type f -name tessera -perm -u+x | head -n1)
"$tessera" backends || true

# Every nccl test, the gpu-labelled ones included; the skips print "SKIPPED" lines.
ctest --test-dir "$build" -L nccl --output-on-failure --verbose --timeout 600
