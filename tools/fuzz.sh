#!/usr/bin/env bash
# Builds the libFuzzer targets (preset fuzz: clang, ASan + UBSan) and runs each on its seed
# corpus for a bounded time; fails on any finding. CI runs it with the default time.
#   tools/fuzz.sh                   every target for 10 s (ctest label fuzz, 2 at a time: about 50 s)
#   tools/fuzz.sh --time 600        every target for 600 s (by hand, to look harder)
#   tools/fuzz.sh --time 600 npy    only the targets named (model_json topology_json devices
#                                   calibration chrome_trace checkpoint npy store_wire image
#                                   safetensors)
# A finding leaves its input in build/fuzz/tests/fuzz/corpus/<target>/crash-* (or leak-,
# timeout-, oom-); docs/testing.md says how it becomes a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=10
if [ "${1:-}" = "--time" ]; then
  [ $# -ge 2 ] || { echo "usage: tools/fuzz.sh [--time SECONDS] [TARGET...]" >&2; exit 2; }
  seconds=$2
  shift 2
fi
case "${1:-}" in -*) echo "usage: tools/fuzz.sh [--time SECONDS] [TARGET...]" >&2; exit 2 ;; esac
tools/setup.sh
cmake --preset fuzz -DTESSERA_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
if [ $# -eq 0 ]; then
  ctest --preset fuzz
else
  ctest --preset fuzz -R "^fuzz\\.($(IFS='|'; echo "$*"))\$"
fi
