#!/usr/bin/env bash
# bench_train --simulate on a small ConvNeXt (convnext-atto, 3x64x256, batch 2, 4 classes, AdamW):
# 1 and 2 local ranks, overlap on and off. Every run must carry its calibrated simulation in the
# JSON (simulated_step_ms within its min/max over the calibrations, the backend's progress, the
# error against the measured step less data loading), the table must print the same rows, and the
# prediction must lie within a factor of 2 of the measured step. That bound is loose on purpose:
# this model's calibrated step is 25-40% low on this machine (docs/simulator.md, "The bench
# steps"), and the figures of a CTest on a shared 2-core machine scatter. It still fails a
# simulation that lost its calibration (the built-in cpu-host figures are off by a larger factor)
# or that replays another configuration than the one measured.
#   tests/bench_train_simulate.sh <bench_train binary>
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--model convnext-atto --input 3x64x256 --ranks 1,2 --checkpointing none --no-torch --steps 6
      --overlap both --simulate --calibrations 1)
"$bin" "${args[@]}" --json >"$tmp/out.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }
python3 - "$tmp/out.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
runs = doc["runs"]
assert [(r["ranks"], r["overlap"]) for r in runs] == [(1, True), (2, True), (2, False)], runs
for r in runs:
    label = f"P={r['ranks']} overlap {'on' if r['overlap'] else 'off'}"
    for k in ("simulated_step_ms", "simulated_step_ms_min", "simulated_step_ms_max", "simulated_error",
              "step_less_loading_ms_median", "backend_overlaps_compute", "calibrations"):
        assert k in r, f"{label}: no {k} in {sorted(r)}"
    sim, measured = r["simulated_step_ms"], r["step_less_loading_ms_median"]
    assert r["calibrations"] == 1, r["calibrations"]
    assert r["simulated_step_ms_min"] <= sim <= r["simulated_step_ms_max"], label
    assert 0 < measured <= r["step_ms_median"] + 1e-9, f"{label}: step less loading {measured} vs {r['step_ms_median']}"
    assert abs(1 + r["simulated_error"] - sim / measured) < 1e-4, label  # the JSON's figures are rounded
    print(f"{label}: measured {measured:.2f} ms, simulated {sim:.2f} ms ({r['simulated_error']:+.1%})")
    assert 0.5 <= sim / measured <= 2, f"{label}: simulated {sim:.2f} ms against measured {measured:.2f} ms"
PY
# The table gives the same configurations, with the progress the backend reports.
"$bin" "${args[@]}" >"$tmp/out.txt" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }
grep -A4 "^ckpt .* progress" "$tmp/out.txt"
test "$(grep -A3 '^ckpt .* progress' "$tmp/out.txt" | grep -cE '^none +[12] +[12] +fp32 +(on|off) +(overlaps|in-calls) ')" = 3
# One way to say which calibration: both is refused.
if "$bin" --simulate --calibration /nonexistent --no-torch 2>"$tmp/err.txt"; then exit 1; fi
grep -q "give one" "$tmp/err.txt"
echo "bench_train_simulate: ok"
