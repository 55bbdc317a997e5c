#!/usr/bin/env bash
# End to end through the command line: `tessera train` writes metrics (JSON lines), a Chrome trace
# and a checkpoint; resuming from the checkpoint continues with the same losses as one longer run;
# bad options fail with a message and a non-zero exit, never a crash.
#   tests/cli_train.sh <tessera binary> <source dir>
set -euo pipefail
bin=$1
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--model "$src/examples/convnext-mini.json" --input 3x32x128 --batch 2 --mesh sp=2 --classes 6 --threads 1)

"$bin" train "${common[@]}" --steps 4 --metrics "$tmp/full.jsonl" >"$tmp/full.out"
"$bin" train "${common[@]}" --steps 2 --save "$tmp/ckpt" --trace "$tmp/trace.json" >"$tmp/first.out"
"$bin" train "${common[@]}" --steps 4 --resume "$tmp/ckpt" --metrics "$tmp/resumed.jsonl" >"$tmp/resumed.out"
grep -q "summary: 4 steps" "$tmp/full.out" || { echo "no summary in:"; cat "$tmp/full.out"; exit 1; }

python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
full = [json.loads(l) for l in open(f"{tmp}/full.jsonl")]
resumed = [json.loads(l) for l in open(f"{tmp}/resumed.jsonl")]
assert [m["step"] for m in full] == [0, 1, 2, 3], full
assert [m["step"] for m in resumed] == [2, 3], resumed
for key in ("loss", "step_time_s", "images_per_s", "peak_bytes"):
    assert key in full[0], key
assert len(full[0]["peak_bytes"]) == 2 and full[0]["peak_bytes"][1]["activation"] > 0
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

# Bad input: a clear message, exit status 1 or 2, no core dump (expect_fail: cli_common.sh).
expect_fail "convnext-atto" train --model no-such-model --steps 1
expect_fail "--input" train --input 3x31 --steps 1
expect_fail "mesh" train --mesh sp=0 --steps 1
expect_fail "available" train --backend nosuch --steps 1
printf 'garbage' >"$tmp/bad.ckpt"
expect_fail "$tmp/bad.ckpt" train "${common[@]}" --steps 1 --resume "$tmp/bad.ckpt"
echo "cli_train: bad options refused with clear messages"
