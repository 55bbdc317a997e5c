#!/usr/bin/env bash
# bench_train --simulate on a small ConvNeXt (convnext-atto, 3x64x256, batch 2, 4 classes, AdamW):
# 1 and 2 local ranks, overlap on and off, two rounds (a calibration, then every run). Every run
# must carry its calibrated simulation in the JSON (simulated_step_ms within its min/max over the
# calibrations, the backend's progress, each round's error against the steps measured just after
# its calibration, and their median), the table must print the same rows with the errors' range,
# and each round's prediction must lie within a factor of 2 of its measured step. That bound is
# loose on purpose: this model's two-rank step is predicted 17-32% low on this machine
# (docs/simulator-measurements.md, "bench_train --simulate"), and the figures of a CTest on a
# shared 2-core machine scatter. It still fails a simulation that lost its calibration (the
# built-in cpu-host figures are off by a larger factor) or that replays another configuration
# than the one measured.
#   tests/bench_train_simulate.sh <bench_train binary>
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--model convnext-atto --input 3x64x256 --ranks 1,2 --checkpointing none --no-torch --steps 6
      --overlap both --simulate --calibrations 2)
"$bin" "${args[@]}" --json >"$tmp/out.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }
python3 - "$tmp/out.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
runs = doc["runs"]
assert [(r["ranks"], r["overlap"]) for r in runs] == [(1, True), (2, True), (2, False)], runs
for r in runs:
    label = f"P={r['ranks']} overlap {'on' if r['overlap'] else 'off'}"
    for k in ("simulated_step_ms", "simulated_step_ms_min", "simulated_step_ms_max", "simulated_error",
              "simulated_error_min", "simulated_error_max", "simulated_errors",
              "step_less_loading_ms_median", "backend_overlaps_compute", "calibrations"):
        assert k in r, f"{label}: no {k} in {sorted(r)}"
    sim, measured = r["simulated_step_ms"], r["step_less_loading_ms_median"]
    # Two rounds of a calibration and the run's steps: two predictions, each paired with its round.
    assert r["calibrations"] == 2, r["calibrations"]
    errors = r["simulated_errors"]
    assert len(errors) == 2, errors
    assert abs(r["simulated_error"] - (errors[0] + errors[1]) / 2) < 1e-4, label  # the median of two
    assert abs(r["simulated_error_min"] - min(errors)) < 1e-4 and abs(r["simulated_error_max"] - max(errors)) < 1e-4
    assert r["simulated_step_ms_min"] <= sim <= r["simulated_step_ms_max"], label
    assert 0 < measured <= r["step_ms_median"] + 1e-9, f"{label}: step less loading {measured} vs {r['step_ms_median']}"
    print(f"{label}: measured {measured:.2f} ms, simulated {sim:.2f} ms (paired errors {errors})")
    for e in errors:
        assert 0.5 <= 1 + e <= 2, f"{label}: a round's prediction is {1 + e:.2f}x its measured step"
PY
# The table gives the same configurations, with the progress the backend reports and the range
# of the paired errors; the rounds alternate calibrating and training.
# (Two ranks only, to keep the test short.)
"$bin" "${args[@]}" --ranks 2 >"$tmp/out.txt" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }
grep -A3 "^ckpt .* progress" "$tmp/out.txt"
test "$(grep -A2 '^ckpt .* progress' "$tmp/out.txt" | grep -cE '^none +2 +1 +fp32 +(on|off) +(overlaps|in-calls) .*%  \[[-+][0-9.]+% \.\. [-+][0-9.]+%\]')" = 2
test "$(grep -cE '^round [12]/2: calibrating' "$tmp/err.txt")" = 2
# One way to say which calibration: both is refused.
if "$bin" --simulate --calibration /nonexistent --no-torch 2>"$tmp/err.txt"; then exit 1; fi
grep -q "give one" "$tmp/err.txt"
echo "bench_train_simulate: ok"
