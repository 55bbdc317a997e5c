#!/usr/bin/env bash
# `tessera launch` end to end with the ucx plugin: the same losses as the local backend (2 ranks
# W-sharded, 3 ranks H-sharded, 4 ranks dp=2 × sp=2, 2 pipeline stages of 3 micro-batches), a
# killed rank stops the job naming it, Ctrl-C stops every rank, a rank that never arrives is named
# by the rendezvous timeout.
#   tests/cli_launch.sh <tessera binary> <source dir>
set -euo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
export UCX_WARN_UNUSED_ENV_VARS=n
model=(--model "$src/examples/convnext-mini.json" --classes 6 --threads 1)

# Float64 runs are the proof (ucx equals local to 1e-9); float32 runs are held to the float32 rule
# (tests/nn/train_equivalence.hpp): a float32 loss is within 16x as far from the float64 one as
# the local float32 run's loss is, so far in the run, plus 2 float32 ulps.
same_losses() {  # name, nproc, train options...
  local name=$1 n=$2 d; shift 2
  for d in f32 f64; do
    "$bin" train "${model[@]}" "$@" --dtype $d --metrics "$tmp/$name.local.$d.jsonl" >"$tmp/$name.local.out"
    timeout 120 "$bin" launch --nproc "$n" -- train "${model[@]}" "$@" --dtype $d --backend ucx \
      --metrics "$tmp/$name.ucx.$d.jsonl" >"$tmp/$name.ucx.out" 2>&1 || { cat "$tmp/$name.ucx.out"; exit 1; }
  done
  python3 - "$tmp/$name" "$name" <<'PY'
import json, sys
base, name = sys.argv[1:]
loss = {k: [json.loads(l)["loss"] for l in open(f"{base}.{k}.jsonl")] for k in ("local.f32", "local.f64", "ucx.f32", "ucx.f64")}
l64 = loss["local.f64"]
assert all(len(v) == len(l64) > 0 for v in loss.values()), loss
nu = 0.0
for t, x in enumerate(l64):
    assert abs(loss["ucx.f64"][t] - x) <= 1e-9 * abs(x), (name, "float64", loss)
    nu = max(nu, abs(loss["local.f32"][t] - x) / abs(x))
    allowed = 16 * nu * abs(x) + 2 * abs(x) * 2.0**-23
    assert abs(loss["ucx.f32"][t] - x) <= allowed, (name, "float32 step", t, allowed, loss)
print(f"{name}: ucx losses match local (float64 to 1e-9, float32 by the rule): {loss['ucx.f32']}")
PY
}
same_losses w2 2 --input 3x32x128 --mesh sp=2 --shard W --steps 3 --batch 2
same_losses h3 3 --input 3x96x64 --mesh sp=3 --shard H --steps 2 --batch 2
same_losses dpsp4 4 --input 3x32x128 --mesh dp=2,sp=2 --shard W --batch 4 --steps 2
same_losses pp2 2 --input 3x32x128 --mesh pp=2 --micro-batches 3 --batch 6 --steps 2

# --trace with one rank per process: rank 0 writes the file named, rank r the one beside it
# with .rank<r> before the extension, each holding that rank's events only.
timeout 120 "$bin" launch --nproc 2 -- train "${model[@]}" --input 3x32x128 --mesh sp=2 --steps 1 --batch 2 \
  --backend ucx --trace "$tmp/run.trace.json" >"$tmp/trace.out" 2>&1 || { cat "$tmp/trace.out"; exit 1; }
grep -q "trace written to $tmp/run.trace.json (this rank; the others beside it as .rank<r>)" "$tmp/trace.out" ||
  { cat "$tmp/trace.out"; echo "FAIL: the trace message"; exit 1; }
python3 - "$tmp/run.trace.json" "$tmp/run.trace.rank1.json" <<'PY'
import json, sys
for rank, path in enumerate(sys.argv[1:]):
    ev = json.load(open(path))["traceEvents"]
    pids = {e["pid"] for e in ev if e.get("ph") == "X"}
    assert pids == {rank}, (path, pids)
    assert sum(e.get("cat") == "halo" for e in ev) > 0, path
print("per-rank traces: rank 0 and rank 1 each wrote their own")
PY

# A rank killed mid-run: the others stop with an error naming it, the launcher exits non-zero.
set +e
timeout 120 "$bin" launch --nproc 2 --grace 20 -- train "${model[@]}" --batch 2 --input 3x32x128 --mesh sp=2 --steps 100000 \
  --backend ucx >"$tmp/kill.out" 2>&1 &
launcher=$!
for _ in $(seq 100); do grep -q "step 2/" "$tmp/kill.out" && break; sleep 0.1; done
victim=$(sed -n 's/^\[launch\] rank 1 pid \([0-9]*\)$/\1/p' "$tmp/kill.out")
kill -9 "$victim"
wait $launcher
code=$?
set -e
[ $code -ne 0 ] || { echo "launcher exited 0 after a rank was killed"; cat "$tmp/kill.out"; exit 1; }
grep -q "rank 1 failed (killed by signal 9" "$tmp/kill.out" || { echo "launcher did not name rank 1:"; cat "$tmp/kill.out"; exit 1; }
grep -q "\[rank 0\].*rank 1" "$tmp/kill.out" || { echo "rank 0 did not name rank 1:"; cat "$tmp/kill.out"; exit 1; }

# Ctrl-C (SIGINT to the launcher): every rank stops, the launcher says so and exits 130.
set +e
timeout 120 "$bin" launch --nproc 2 -- train "${model[@]}" --batch 2 --input 3x32x128 --mesh sp=2 --steps 100000 \
  --backend ucx >"$tmp/int.out" 2>&1 &
launcher=$!
for _ in $(seq 100); do grep -q "step 2/" "$tmp/int.out" && break; sleep 0.1; done
ranks=$(sed -n 's/^\[launch\] rank [0-9]* pid \([0-9]*\)$/\1/p' "$tmp/int.out")
kill -INT $launcher
wait $launcher
code=$?
set -e
[ $code -eq 130 ] || { echo "launcher exited $code after Ctrl-C, expected 130"; cat "$tmp/int.out"; exit 1; }
grep -q "interrupted; stopped all 2 rank(s)" "$tmp/int.out" || { echo "no interrupt message:"; cat "$tmp/int.out"; exit 1; }
for pid in $ranks; do
  if kill -0 "$pid" 2>/dev/null; then echo "rank pid $pid still running after Ctrl-C"; exit 1; fi
done

# A rank that never arrives: rank 0 alone, timeout naming rank 1.
set +e
RANK=0 WORLD_SIZE=2 MASTER_PORT=$((20000 + RANDOM % 20000)) TESSERA_RDZV_TOKEN=t timeout 60 \
  "$bin" train "${model[@]}" --batch 2 --input 3x32x128 --mesh sp=2 --backend ucx --timeout 1 >"$tmp/late.out" 2>&1
code=$?
set -e
[ $code -ne 0 ] && grep -q "rank(s) 1 of 2 never arrived" "$tmp/late.out" || { echo "no rendezvous timeout:"; cat "$tmp/late.out"; exit 1; }
echo "cli_launch: ok"
