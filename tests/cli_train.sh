#!/usr/bin/env bash
# End to end through the command line: `tessera train` writes metrics (JSON lines), a Chrome trace
# and a checkpoint; resuming from the checkpoint continues with the same losses as one longer run;
# bad options fail with a message and a non-zero exit, never a crash; a diverged run stops with
# an error, exit 1 and its --save file untouched.
#   tests/cli_train.sh <tessera binary> <source dir>
set -euo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
common=(--model "$src/examples/convnext-mini.json" --input 3x32x128 --batch 2 --mesh sp=2 --classes 6 --threads 1)

"$bin" train "${common[@]}" --steps 4 --metrics "$tmp/full.jsonl" >"$tmp/full.out"
"$bin" train "${common[@]}" --steps 2 --save "$tmp/ckpt" --trace "$tmp/trace.json" >"$tmp/first.out"
"$bin" train "${common[@]}" --steps 4 --resume "$tmp/ckpt" --metrics "$tmp/resumed.jsonl" >"$tmp/resumed.out"
grep -q "summary: 4 steps" "$tmp/full.out" || { echo "no summary in:"; cat "$tmp/full.out"; exit 1; }
# The same run from a run description (--config) with --json: the same losses as the metrics file,
# and an option on the command line over the file's field.
printf '{"model": "%s", "input": "3x32x128", "batch": 2, "mesh": "sp=2", "classes": 6, "threads": 1, "steps": 2}' \
  "$src/examples/convnext-mini.json" >"$tmp/spec.json"
"$bin" train --config "$tmp/spec.json" --steps 4 --json >"$tmp/full.json"
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
run = json.load(open(f"{tmp}/full.json"))
metrics = [json.loads(l) for l in open(f"{tmp}/full.jsonl")]
assert [s["step"] for s in run["steps"]] == [0, 1, 2, 3], run["steps"]
assert all(s["loss"] == m["loss"] for s, m in zip(run["steps"], metrics)), (run, metrics)
assert run["mesh"] == "sp=2" and run["backend"] == "local" and run["parameters"] > 0 and "summary: 4 steps" in run["summary"]
assert len(run["steps"][0]["ranks"]) == 2 and run["steps"][0]["ranks"][1]["peak_bytes"]["total"] > 0
# One step record (docs/records.md) in --json and the metrics file: the same fields, and the
# step's time is its slowest rank's.
assert all(list(s) == list(m) for s, m in zip(run["steps"], metrics)), (run["steps"][0], metrics[0])
for s in run["steps"] + metrics:
    assert s["step_time_s"] == max(r["step_time_s"] for r in s["ranks"]), s
PY

python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
full = [json.loads(l) for l in open(f"{tmp}/full.jsonl")]
resumed = [json.loads(l) for l in open(f"{tmp}/resumed.jsonl")]
assert [m["step"] for m in full] == [0, 1, 2, 3], full
assert [m["step"] for m in resumed] == [2, 3], resumed
for key in ("loss", "step_time_s", "images_per_s", "ranks"):
    assert key in full[0], key
assert len(full[0]["ranks"]) == 2 and full[0]["ranks"][1]["peak_bytes"]["activation"] > 0
for a, b in zip(full[2:], resumed):
    assert a["loss"] == b["loss"], (a["loss"], b["loss"])  # bit for bit after resume
trace = json.load(open(f"{tmp}/trace.json"))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
phases = {e.get("ph") for e in events}
assert "X" in phases, phases
ops = [e for e in events if e.get("ph") == "X"]
assert {e["pid"] for e in ops} == {0, 1}, "both ranks appear"
assert any(e.get("args", {}).get("bytes", 0) > 0 and "peer" in e.get("args", {}) for e in ops), "halo transfers"
assert any("layer" in e.get("args", {}) for e in ops), "ops name their layer"
print(f"cli_train: {len(full)} + {len(resumed)} metric lines, {len(events)} trace events, resume bit-identical")
PY

# A diverged run must not look like a finished one: the command of issue 15 (AdamW at lr 1e8, no
# clipping, no warmup) stops at the first non-finite step with exit status 1, names the step and
# a parameter, leaves an existing --save file byte-identical, keeps the metrics of the steps that
# completed (valid JSON: no NaN line) and writes the trace up to the failure.
cp "$tmp/ckpt" "$tmp/keep.ckpt"
set +e
"$bin" train --input 3x64x256 --steps 4 --mesh sp=2 --lr 1e8 --clip 0 --warmup 0 \
  --save "$tmp/keep.ckpt" --metrics "$tmp/diverged.jsonl" --trace "$tmp/diverged.json" >"$tmp/diverged.out" 2>&1
rc=$?
set -e
show() { echo "$1"; cat "$tmp/diverged.out"; exit 1; }
[ $rc -eq 1 ] || show "diverging run: expected exit status 1, got $rc"
grep -Eq "^tessera: error: training diverged at step [0-9]+/4 .*the gradient of '[^']+'" "$tmp/diverged.out" ||
  show "diverging run: no error naming the step and a parameter"
grep -q -- "--lr" "$tmp/diverged.out" && grep -q -- "--clip" "$tmp/diverged.out" || show "diverging run: no advice"
grep -qi "nan" <(grep "^step " "$tmp/diverged.out") && show "diverging run: a step with a NaN loss was reported"
! grep -q "summary:" "$tmp/diverged.out" || show "diverging run: printed a summary as if it had finished"
cmp -s "$tmp/ckpt" "$tmp/keep.ckpt" || show "diverging run: the existing --save file was changed"
python3 - "$tmp" <<'PY'
import json, re, sys
tmp = sys.argv[1]
out = open(f"{tmp}/diverged.out").read()
failed = int(re.search(r"diverged at step (\d+)/4", out).group(1))  # 1-based
every = [json.loads(l) for l in open(f"{tmp}/diverged.jsonl")]
lines = [m for m in every if "alarm" not in m]
alarms = [m for m in every if "alarm" in m]
assert [m["step"] for m in lines] == list(range(failed - 1)), (failed, lines)
# The non-finite step is the last line, as an alarm (its value null: valid JSON, no NaN).
assert every[-1] is alarms[-1] and len(alarms) == 1, every
assert alarms[0]["alarm"] == "nonfinite" and alarms[0]["step"] == failed - 1 and alarms[0]["value"] is None, alarms
for m in lines:
    assert all(isinstance(m[k], (int, float)) and m[k] == m[k] and abs(m[k]) != float("inf") for k in ("loss", "grad_norm")), m
trace = json.load(open(f"{tmp}/diverged.json"))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
assert any(e.get("ph") == "X" for e in events), "the trace of the diverged run has no ops"
print(f"cli_train: diverged at step {failed}/4 with exit 1; {len(lines)} metric line(s) kept, "
      f"{len(events)} trace events, --save untouched")
PY

# The same divergence with one rank per process (where the ucx plugin loads): every rank prints
# the same error and exits 1 by itself, the launcher names the failed ranks and exits 1, nothing
# hangs (timeout), and the --save file is left as it was.
if "$bin" backends 2>/dev/null | awk '$1 == "ucx" && $2 != "not" && $3 != "not" {found = 1} END {exit !found}'; then
  set +e
  UCX_WARN_UNUSED_ENV_VARS=n timeout 180 "$bin" launch --nproc 2 -- train "${common[@]}" --steps 4 --lr 1e8 --clip 0 \
    --warmup 0 --backend ucx --save "$tmp/keep.ckpt" >"$tmp/launch.out" 2>&1
  rc=$?
  set -e
  show() { echo "$1"; cat "$tmp/launch.out"; exit 1; }
  [ $rc -eq 1 ] || show "diverging launch: expected exit status 1, got $rc (124: it hung)"
  for r in 0 1; do
    grep -Eq "^\[rank $r\] tessera: error: training diverged at step [0-9]+/4 .*the gradient of '[^']+'" "$tmp/launch.out" ||
      show "diverging launch: rank $r did not report the divergence"
  done
  [ "$(grep -E '^\[rank [01]\] tessera: error:' "$tmp/launch.out" | sed 's/^\[rank [01]\] //' | sort -u | wc -l)" -eq 1 ] ||
    show "diverging launch: the ranks' messages differ"
  grep -Eq "^tessera launch: rank [01] failed \(exit code 1\)" "$tmp/launch.out" || show "diverging launch: the launcher did not report it"
  cmp -s "$tmp/ckpt" "$tmp/keep.ckpt" || show "diverging launch: the existing --save file was changed"
  echo "cli_train: a diverged ucx run stopped both ranks with the same error and exit 1"
else
  echo "cli_train: no ucx backend in this build; the multi-process divergence check did not run"
fi

# Bad input: a clear message, exit status 1 or 2, no core dump (expect_fail: cli_common.sh).
expect_fail "convnext-atto" train --model no-such-model --steps 1
expect_fail "input '3x31'" train --input 3x31 --steps 1
expect_fail "mesh" train --mesh sp=0 --steps 1
expect_fail "available" train --backend nosuch --steps 1
# Micro-batches and pipeline stages: refused before any rank starts, naming the option and the fix;
# with a dim pp the step line names the rank that waited longest for a neighbouring stage and the
# metrics carry every rank's wait.
expect_fail "batch 3 is not a multiple of micro_batches 2 (--micro-batches); use batch 4 or micro_batches 1" train --batch 3 --micro-batches 2 --steps 1
expect_fail "schedule 'zigzag': expected one of: 1f1b, gpipe" train --schedule zigzag --steps 1
expect_fail "stage_starts '3': mesh sp=2 has no pipeline stages" train --stage-starts 3 --steps 1
"$bin" train --model "$src/examples/convnext-mini.json" --input 3x32x128 --batch 4 --mesh pp=2 \
  --classes 6 --threads 1 --micro-batches 2 --schedule gpipe --steps 1 --metrics "$tmp/pp.jsonl" >"$tmp/pp.out"
grep -q "pipeline wait r[01] " "$tmp/pp.out" || { echo "no pipeline wait in:"; cat "$tmp/pp.out"; exit 1; }
python3 -c 'import json, sys; s = json.loads(open(sys.argv[1]).readline()); assert [r["pipeline_wait_s"] >= 0 for r in s["ranks"]] == [True, True], s' "$tmp/pp.jsonl"
expect_fail "dtype 'bf16': the trainer keeps its weights in f32 or f64 (16-bit activations over f32 weights: precision bf16 or fp16); use one of: f32, f64" train --dtype bf16 --steps 1
# Mixed precision from the command line: fp16 with dynamic loss scaling (2^16 at the start), its
# scale and skipped steps in the metrics; bf16 without scaling; refused over f64 weights.
"$bin" train "${common[@]}" --steps 2 --precision fp16 --grad-reduce-dtype bf16 --metrics "$tmp/fp16.jsonl" >/dev/null
python3 - "$tmp/fp16.jsonl" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
assert len(steps) == 2 and steps[0]["loss_scale"] == 65536 and steps[0]["skipped"] is False, steps
assert all(s["skipped_steps"] == 0 and s["loss"] == s["loss"] for s in steps), steps
PY
"$bin" train "${common[@]}" --steps 1 --precision bf16 --metrics "$tmp/bf16.jsonl" >/dev/null
python3 -c 'import json, sys; s = json.loads(open(sys.argv[1]).readline()); assert s["loss_scale"] == 1, s' "$tmp/bf16.jsonl" ||
  { echo "bf16 runs without loss scaling:"; cat "$tmp/bf16.jsonl"; exit 1; }
expect_fail "mixed precision keeps f32 master weights" train --dtype f64 --precision bf16 --steps 1
expect_fail "expected fp32, bf16 or fp16" train --precision fp8 --steps 1
expect_fail "expected auto, dynamic, off or a positive number" train --loss-scale -3 --steps 1
expect_fail "training runs on cpu or cuda" train --device h200 --steps 1
expect_fail "expected cuda:N" train --device cuda:x --steps 1
# --device cuda: on a machine without a usable GPU, the reason (the backend not built here, or
# built with no device visible), at once.
if ! "$bin" backends | grep -qE '^ +cuda +built in'; then
  expect_fail "cuda" train --device cuda --steps 1
fi
printf 'garbage' >"$tmp/bad.ckpt"
expect_fail "$tmp/bad.ckpt" train "${common[@]}" --steps 1 --resume "$tmp/bad.ckpt"
echo "cli_train: bad options refused with clear messages"
