#!/usr/bin/env bash
# Runs one fuzz target on a scratch copy of its seed corpus for a bounded time; exits non-zero on
# any finding (crash, sanitizer report, escaped exception, timeout, out-of-memory), leaving the
# input in WORK/crash-* (or leak-, timeout-, oom-) and printing libFuzzer's final statistics.
#   run_fuzz.sh TARGET SEEDS WORK SECONDS [extra libFuzzer flags]
set -euo pipefail
target=$1 seeds=$2 work=$3 seconds=$4
shift 4
rm -rf "$work"
mkdir -p "$work/corpus"
cp "$seeds"/* "$work/corpus/"
exec "$target" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 -print_funcs=0 \
  -artifact_prefix="$work/" "$@" "$work/corpus"
