#!/usr/bin/env bash
# Builds tessera and runs its tests (the README's test command; CI runs it too).
#   tools/test.sh          install what is missing, release build (preset ci), every test that
#                          is not labelled slow (gpu tests run too: without a GPU each one is
#                          reported skipped, with its reason)
#   tools/test.sh --asan   the same under AddressSanitizer + UndefinedBehaviorSanitizer
#                          (preset asan: core, backends and their unit tests; optional parts off)
#   tools/test.sh --tsan   the suites that run on several threads under ThreadSanitizer (preset
#                          tsan, label tsan: docs/sanitizers.md; a report fails its test)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=ci
case "${1:-}" in
  "") ;;
  --asan) preset=asan ;;
  --tsan) preset=tsan ;;
  *) echo "usage: tools/test.sh [--asan|--tsan]" >&2; exit 2 ;;
esac
tools/setup.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset"
