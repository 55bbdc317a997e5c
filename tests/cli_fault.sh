#!/usr/bin/env bash
# TESSERA_FAULT, the fault-injection hook (docs/launching.md, "Faults"): a malformed value is
# refused naming the variable and its syntax, a rank out of the mesh is refused, a rank killed in
# its gradient all-reduce is named by the surviving rank and by the launcher, and a stalled rank is
# named by its peer's timeout while the launcher blames the rank that failed, not its own signal.
#   tests/cli_fault.sh <tessera binary> <source dir>
set -uo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
export UCX_WARN_UNUSED_ENV_VARS=n
model=(--model "$src/examples/convnext-mini.json" --classes 6 --threads 1 --batch 2 --input 3x32x128 --mesh sp=2)
fail() { echo "FAIL: $1"; cat "$2"; exit 1; }

for bad in "kill:forwrd:step=2:rank=1" "kill:forward:step=0:rank=1" "kill:forward:rank=1" "kill:forward:step=2:rank=x" \
  "kill:forward:step=2:rank=1:round=x" "kill:forward:step=2:round=0:round=1" "kill:forward:step=2:rank=1:step=3"; do
  TESSERA_FAULT=$bad timeout 60 "$bin" train "${model[@]}" --steps 1 >"$tmp/bad.out" 2>&1
  [ $? -eq 1 ] || fail "TESSERA_FAULT=$bad was not refused" "$tmp/bad.out"
  grep -q "TESSERA_FAULT='$bad': .*expected <kill|stall|drop>:<forward|halo|allreduce|pipeline>:step=<N>:rank=<R>" "$tmp/bad.out" ||
    fail "the refusal of TESSERA_FAULT=$bad does not name the variable and the syntax" "$tmp/bad.out"
done
# round=R: only in that elastic round; a job without rounds is round 0, so round=1 is inert here
# (and its rank is not checked against this mesh).
TESSERA_FAULT=kill:forward:step=1:rank=5:round=1 timeout 60 "$bin" train "${model[@]}" --steps 1 >"$tmp/round.out" 2>&1 ||
  fail "TESSERA_FAULT=...:round=1 fired (or was refused) outside an elastic round" "$tmp/round.out"
# A place this mesh never communicates at would never fire: refused, naming why.
TESSERA_FAULT=kill:forward:step=1:rank=1 timeout 60 "$bin" train "${model[@]/sp=2/dp=2}" --steps 1 >"$tmp/place.out" 2>&1
[ $? -eq 1 ] && grep -q "mesh dp=2 shards no spatial dimension, so no rank exchanges halos" "$tmp/place.out" ||
  fail "a forward fault on a dp-only mesh was not refused" "$tmp/place.out"
TESSERA_FAULT=kill:pipeline:step=1:rank=1 timeout 60 "$bin" train "${model[@]}" --steps 1 >"$tmp/place.out" 2>&1
[ $? -eq 1 ] && grep -q "has no pipeline stages (pp)" "$tmp/place.out" ||
  fail "a pipeline fault on a mesh without pp was not refused" "$tmp/place.out"
TESSERA_FAULT=kill:forward:step=1:rank=2 timeout 60 "$bin" train "${model[@]}" --steps 1 >"$tmp/rank.out" 2>&1
[ $? -eq 1 ] && grep -q "names rank 2 but mesh sp=2 has 2 rank(s)" "$tmp/rank.out" || fail "rank 2 of 2 accepted" "$tmp/rank.out"

# Rank 1 kills itself in its first gradient all-reduce of step 2.
TESSERA_FAULT=kill:allreduce:step=2:rank=1 timeout 60 "$bin" launch --nproc 2 -- train "${model[@]}" --steps 4 \
  --backend ucx --timeout 10 >"$tmp/kill.out" 2>&1
code=$?
[ $code -eq 1 ] || fail "launcher exited $code, expected 1" "$tmp/kill.out"
grep -q "^\[rank 1\] TESSERA_FAULT=kill:allreduce:step=2:rank=1: rank 1: killing this rank (SIGKILL) at its first gradient all-reduce of step 2 (unix time " \
  "$tmp/kill.out" || fail "no injection line from rank 1" "$tmp/kill.out"
! grep -q "^\[rank 0\] step 2/" "$tmp/kill.out" || fail "rank 0 finished step 2 without rank 1" "$tmp/kill.out"
grep -q "^\[rank 0\] tessera: error: .*rank 1" "$tmp/kill.out" || fail "rank 0 did not name rank 1" "$tmp/kill.out"
grep -q "^tessera launch: rank 1 failed (killed by signal 9" "$tmp/kill.out" || fail "the launcher did not name rank 1" "$tmp/kill.out"

# Rank 1 stops (SIGSTOP) in a forward halo exchange: rank 0's wait times out naming it, and the
# launcher names rank 0's failure as the cause, not the signal it sent rank 1 itself after --grace
# (SIGTERM, delivered at once with a SIGCONT, not the SIGKILL 3 s later).
TESSERA_FAULT=stall:forward:step=2:rank=1 timeout 60 "$bin" launch --nproc 2 --grace 1 -- train "${model[@]}" --steps 4 \
  --backend ucx --timeout 1 >"$tmp/stall.out" 2>&1
code=$?
[ $code -eq 1 ] || fail "launcher exited $code after a stall, expected 1" "$tmp/stall.out"
grep -q "^\[rank 0\] tessera: error: .*timed out after 1000 ms waiting for receive from rank 1" "$tmp/stall.out" ||
  fail "rank 0 did not name the stalled rank 1" "$tmp/stall.out"
grep -q "^tessera launch: rank 0 failed (exit code 1); stopped the other ranks; still running 1 s (--grace) after rank 0 failed, so the launcher stopped: rank 1 (killed by signal 15" \
  "$tmp/stall.out" || fail "the launcher's summary of a stall" "$tmp/stall.out"
for pid in $(sed -n 's/^\[launch\] rank [0-9]* pid \([0-9]*\)$/\1/p' "$tmp/stall.out"); do
  ! kill -0 "$pid" 2>/dev/null || fail "rank pid $pid still running after the launcher exited" "$tmp/stall.out"
done
# A pipeline (pp=2, two micro-batches): a rank killed in either stage, at its first transfer to or
# from the other stage, is named by the surviving stage and by the launcher within the deadline.
for r in 0 1; do
  other=$((1 - r))
  TESSERA_FAULT=kill:pipeline:step=2:rank=$r timeout 60 "$bin" launch --nproc 2 -- train "${model[@]/sp=2/pp=2}" \
    --micro-batches 2 --steps 4 --backend ucx --timeout 10 >"$tmp/pp$r.out" 2>&1
  code=$?
  [ $code -eq 1 ] || fail "pipeline: launcher exited $code after rank $r was killed, expected 1" "$tmp/pp$r.out"
  grep -q "^\[rank $r\] TESSERA_FAULT=kill:pipeline:step=2:rank=$r: rank $r: killing this rank (SIGKILL) at its first transfer to or from another pipeline stage of step 2" \
    "$tmp/pp$r.out" || fail "pipeline: no injection line from rank $r" "$tmp/pp$r.out"
  grep -q "^\[rank $other\] tessera: error: .*rank $r" "$tmp/pp$r.out" || fail "pipeline: rank $other did not name rank $r" "$tmp/pp$r.out"
  grep -q "^tessera launch: rank $r failed (killed by signal 9" "$tmp/pp$r.out" ||
    fail "pipeline: the launcher did not name rank $r" "$tmp/pp$r.out"
done
echo "cli_fault: ok"
