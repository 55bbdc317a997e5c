#!/usr/bin/env bash
# Elastic jobs on one host (docs/launching.md, "Elastic jobs"): `tessera launch --nproc 2:3` loses
# a killed rank and finishes on 2 from the newest checkpoint, with the final parameters of the
# by-hand sequence (train on 3, resume its step-4 checkpoint on 2) bit for bit on ucx, and on the
# local backend wherever the two sum in the same order (see 1a); --max-restarts 0 stops the job
# naming it; a stalled rank is found by the heartbeat deadline; `--resume auto` passes over a
# corrupted newest checkpoint, naming it.
#   tests/cli_elastic.sh <tessera binary> <source dir>
set -uo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
export UCX_WARN_UNUSED_ENV_VARS=n
# Batch 6: divisible by both worlds, 3 and 2.
common=(--classes 6 --threads 1 --batch 6 --input 3x32x128)
mini=(--model "$src/examples/convnext-mini.json" "${common[@]}")
fail() { echo "FAIL: $1"; cat "$2"; exit 1; }
# field LOG ROUND KEY: KEY of round ROUND's line of an --elastic-log.
field() {
  python3 -c 'import json, sys
rounds = [json.loads(l) for l in open(sys.argv[1])]
print([r for r in rounds if r["round"] == int(sys.argv[2])][0][sys.argv[3]])' "$@"
}
# quick_restart LOG: round 1 started within 2.9 s of round 0's end. The survivors stop by themselves
# within a fraction of a second of the abort, and a stalled rank is stopped at once, so nothing
# should wait for the launcher's 3 s limit on a membership change.
quick_restart() {
  python3 -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
gap = r[1]["started_s"] - r[0]["ended_s"]
print(f"round 1 started {gap:.2f} s after round 0 ended")
sys.exit(not 0 <= gap < 2.9)' "$1" || fail "round 1 did not start within 2.9 s of round 0's end" "$1"
}
# same_bits A B WHAT LOG: the two checkpoints are byte-identical.
same_bits() { cmp -s "$1" "$2" || fail "$3: $1 and $2 differ" "$4"; }

# A dp=auto job of 2 to 3 ranks (model args in "$@") whose rank 2 is killed in its step-5 gradient
# all-reduce in round 0 (a dp-only mesh has no halo exchange, so `forward` would never fire).
# Checkpoints every 2 steps: round 1 runs on 2 ranks from ck.step4.
elastic_kill() {
  local dir=$1; shift
  mkdir -p "$dir"
  TESSERA_FAULT=kill:allreduce:step=5:rank=2:round=0 timeout 120 "$bin" launch --nproc 2:3 --max-restarts 2 \
    --elastic-log "$dir/log.jsonl" -- train "$@" --steps 8 --backend ucx --mesh dp=auto --timeout 10 \
    --save "$dir/ck" --save-every 2 --resume auto >"$dir/out" 2>&1
  local code=$?
  [ $code -eq 0 ] || fail "elastic kill: launcher exited $code, expected 0" "$dir/out"
  grep -q "^\[rank 2\] TESSERA_FAULT=kill:allreduce:step=5:rank=2:round=0: rank 2: killing this rank" "$dir/out" ||
    fail "elastic kill: the fault did not fire" "$dir/out"
  grep -q "^\[launch\] round 1: 2 rank(s)" "$dir/out" || fail "elastic kill: no round 1 on 2 ranks" "$dir/out"
  grep -q "^\[rank 0\] resume auto: resuming from '$dir/ck.step4' (step 4)" "$dir/out" ||
    fail "elastic kill: round 1 did not resume from ck.step4" "$dir/out"
  grep -q "^tessera launch: finished in round 1 after 1 restart(s)" "$dir/out" ||
    fail "elastic kill: the launcher's verdict" "$dir/out"
  [ "$(field "$dir/log.jsonl" 0 world)" = 3 ] && [ "$(field "$dir/log.jsonl" 1 world)" = 2 ] &&
    [ "$(field "$dir/log.jsonl" 1 resumed_step)" = 4 ] && [ "$(field "$dir/log.jsonl" 1 last_step)" = 8 ] ||
    fail "elastic kill: the round log does not show round 1 on 2 ranks from step 4 to 8" "$dir/log.jsonl"
  field "$dir/log.jsonl" 0 ended | grep -qE "^rank 2 (lost: killed by signal 9|exited or lost its connection)" ||
    fail "elastic kill: round 0's end does not name rank 2 lost" "$dir/log.jsonl"
  quick_restart "$dir/log.jsonl"
}

# The by-hand sequence (model args in "$@"): 3 ranks to the end, checkpoint at step 4; its
# step-4 checkpoint resumed on 2 ranks. On ucx (launched) and on local (threads) into $dir.
by_hand() {
  local dir=$1; shift
  mkdir -p "$dir"
  timeout 120 "$bin" launch --nproc 3 -- train "$@" --steps 8 --backend ucx --mesh dp=3 --timeout 10 --save-every 4 \
    --save "$dir/A" >"$dir/a.out" 2>&1 || fail "by hand: the 3-rank ucx run" "$dir/a.out"
  timeout 120 "$bin" launch --nproc 2 -- train "$@" --steps 8 --backend ucx --mesh dp=2 --timeout 10 --resume "$dir/A.step4" \
    --save "$dir/B" >"$dir/b.out" 2>&1 || fail "by hand: the 2-rank ucx run" "$dir/b.out"
  timeout 120 "$bin" train "$@" --steps 8 --backend local --mesh dp=3 --save-every 4 --save "$dir/LA" >"$dir/la.out" 2>&1 ||
    fail "by hand: the 3-rank local run" "$dir/la.out"
  timeout 120 "$bin" train "$@" --steps 8 --backend local --mesh dp=2 --resume "$dir/LA.step4" --save "$dir/LB" \
    >"$dir/lb.out" 2>&1 || fail "by hand: the 2-rank local run" "$dir/lb.out"
  # The world-2 part alone on local, from ucx's step-4 checkpoint.
  timeout 120 "$bin" train "$@" --steps 8 --backend local --mesh dp=2 --resume "$dir/A.step4" --save "$dir/LB_from_A" \
    >"$dir/lba.out" 2>&1 || fail "by hand: the 2-rank local run from ucx's checkpoint" "$dir/lba.out"
}

# 1a. convnext-mini (2.3 MiB of gradients): the elastic run equals the by-hand sequence on ucx bit
# for bit, and its world-2 round equals local's. The 3-rank rounds of ucx and local differ in the
# last bits: ucx all-reduces a bucket over 32 KiB on a ring whose block b is summed from rank b+1
# on ((x1 + x2) + x0 for block 0), local in rank order ((x0 + x1) + x2); with 2 ranks both orders
# are one commutative sum (backends/comm/ucx/src/collectives.cpp). 1b checks the whole sequence on
# local where ucx reduces in rank order too.
elastic_kill "$tmp/k" "${mini[@]}"
by_hand "$tmp/h" "${mini[@]}"
same_bits "$tmp/k/ck" "$tmp/h/B" "elastic vs by hand on ucx" "$tmp/k/out"
same_bits "$tmp/h/B" "$tmp/h/LB_from_A" "world 2 from the same checkpoint: ucx vs local" "$tmp/h/lba.out"

# 1b. A convnext of 5222 parameters (20 KiB of gradients: every all-reduce one direct round, in
# rank order on ucx as on local): the elastic run equals both by-hand sequences, and they are equal.
cat >"$tmp/small.json" <<'EOF'
{"name": "convnext-8", "family": "convnext", "depths": [1, 1, 1, 1], "dims": [8, 8, 8, 8], "num_classes": 6, "drop_path": 0.05}
EOF
small=(--model "$tmp/small.json" "${common[@]}")
elastic_kill "$tmp/ks" "${small[@]}"
by_hand "$tmp/hs" "${small[@]}"
same_bits "$tmp/ks/ck" "$tmp/hs/B" "small model: elastic vs by hand on ucx" "$tmp/ks/out"
same_bits "$tmp/ks/ck" "$tmp/hs/LB" "small model: elastic vs by hand on local" "$tmp/hs/lb.out"
same_bits "$tmp/hs/A.step4" "$tmp/hs/LA.step4" "small model: step 4 on 3 ranks, ucx vs local" "$tmp/hs/la.out"
# And the result depends on the change: 8 steps on 3 ranks without it end elsewhere.
! cmp -s "$tmp/ks/ck" "$tmp/hs/A" || fail "small model: the elastic result equals the 3-rank run's" "$tmp/ks/out"

# 3. --max-restarts 0: a fixed --nproc 3 is the fixed launcher (today's message), a range stops
# at the first change naming --max-restarts.
kill0=(-- train "${mini[@]}" --steps 8 --backend ucx --mesh dp=auto --timeout 10)
TESSERA_FAULT=kill:allreduce:step=3:rank=2:round=0 timeout 60 "$bin" launch --nproc 3 --max-restarts 0 \
  "${kill0[@]}" >"$tmp/fixed.out" 2>&1
code=$?
[ $code -eq 1 ] || fail "--nproc 3 --max-restarts 0: exit $code, expected 1" "$tmp/fixed.out"
grep -q "^tessera launch: rank 2 failed (killed by signal 9" "$tmp/fixed.out" ||
  fail "--nproc 3 --max-restarts 0 is not the fixed launcher" "$tmp/fixed.out"
! grep -q "elastic job" "$tmp/fixed.out" || fail "--nproc 3 --max-restarts 0 started an elastic job" "$tmp/fixed.out"
TESSERA_FAULT=kill:allreduce:step=3:rank=2:round=0 timeout 60 "$bin" launch --nproc 2:3 --max-restarts 0 \
  "${kill0[@]}" >"$tmp/r0.out" 2>&1
code=$?
[ $code -eq 1 ] || fail "--nproc 2:3 --max-restarts 0: exit $code, expected 1" "$tmp/r0.out"
grep -q "^tessera launch: round 0 ended (rank 2 .*) but --max-restarts 0 are used up; stopped" "$tmp/r0.out" ||
  fail "--nproc 2:3 --max-restarts 0: the verdict does not name --max-restarts" "$tmp/r0.out"
! grep -q "round 1" "$tmp/r0.out" || fail "--max-restarts 0 started a round 1" "$tmp/r0.out"

# 5. A stall (SIGSTOP) with --timeout 60: the round store's heartbeat deadline (2 s) finds it,
# within 1.5-4.5 s of the fault's stamp; the job goes on with 2 ranks and ends 0.
mkdir -p "$tmp/st"
TESSERA_FAULT=stall:allreduce:step=5:rank=2:round=0 timeout 120 "$bin" launch --nproc 2:3 --max-restarts 2 \
  --heartbeat-timeout 2 --elastic-log "$tmp/stall.jsonl" -- train "${mini[@]}" --steps 8 --backend ucx --mesh dp=auto \
  --timeout 60 --save "$tmp/st/ck" --save-every 2 --resume auto >"$tmp/stall.out" 2>&1
code=$?
[ $code -eq 0 ] || fail "stall: launcher exited $code, expected 0" "$tmp/stall.out"
field "$tmp/stall.jsonl" 0 ended | grep -qE "^(rank 2 lost: )?rank 2 stopped answering: no heartbeat for" ||
  fail "stall: round 0's end does not say rank 2 stopped answering" "$tmp/stall.jsonl"
[ "$(field "$tmp/stall.jsonl" 1 world)" = 2 ] && [ "$(field "$tmp/stall.jsonl" 1 last_step)" = 8 ] ||
  fail "stall: no round 1 on 2 ranks to step 8" "$tmp/stall.jsonl"
quick_restart "$tmp/stall.jsonl"
fault_s=$(sed -n 's/^\[rank 2\] TESSERA_FAULT=stall.*(unix time \([0-9.]*\))$/\1/p' "$tmp/stall.out")
[ -n "$fault_s" ] || fail "stall: no injection line" "$tmp/stall.out"
python3 -c 'import sys; d = float(sys.argv[2]) - float(sys.argv[1]); print(f"stall found after {d:.2f} s"); sys.exit(not 1.5 <= d <= 4.5)' \
  "$fault_s" "$(field "$tmp/stall.jsonl" 0 ended_s)" || fail "stall: not found 1.5-4.5 s after it" "$tmp/stall.jsonl"

# 6. --resume auto over a corrupted newest SAVE.step<N> (no elastic job): a run that stopped after
# step 4 (its final SAVE removed), ck.step4 corrupted: the resume takes ck.step2, warns naming
# ck.step4, and ends with the bits of the uninterrupted run.
mkdir -p "$tmp/ra"
run6=("$bin" train "${mini[@]}" --steps 6 --backend local --mesh dp=2 --save "$tmp/ra/ck" --save-every 2)
timeout 120 "${run6[@]}" >"$tmp/ra/full.out" 2>&1 || fail "resume auto: the full run" "$tmp/ra/full.out"
mv "$tmp/ra/ck" "$tmp/ra/full"
python3 -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-4096, 2); b = f.read(16); f.seek(-4096, 2); f.write(bytes(x ^ 0xFF for x in b))' "$tmp/ra/ck.step4"
timeout 120 "${run6[@]}" --resume auto >"$tmp/ra/auto.out" 2>&1 || fail "resume auto: the resumed run" "$tmp/ra/auto.out"
grep -q "resume auto: skipping checkpoint '$tmp/ra/ck.step4': .*checksum mismatch" "$tmp/ra/auto.out" ||
  fail "resume auto: no warning naming the corrupted ck.step4" "$tmp/ra/auto.out"
grep -q "resume auto: resuming from '$tmp/ra/ck.step2' (step 2)" "$tmp/ra/auto.out" ||
  fail "resume auto: did not take ck.step2" "$tmp/ra/auto.out"
same_bits "$tmp/ra/ck" "$tmp/ra/full" "resume auto from step 2 vs the uninterrupted run" "$tmp/ra/auto.out"
echo "cli_elastic: ok"
