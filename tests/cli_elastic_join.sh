#!/usr/bin/env bash
# Launchers joining an elastic job (docs/launching.md, "Elastic jobs"): a leader of
# `--nnodes 1:2 --nproc 2` running on 2 ranks takes a member launcher (`--join HOST:PORT --nproc 1`)
# started mid-run: the next round runs on 3 ranks and the final parameters equal the by-hand
# sequence (2 ranks, then 3 from the step the round log names) bit for bit; a member with another
# token is refused and the running job goes on untouched.
#   tests/cli_elastic_join.sh <tessera binary> <source dir>
set -uo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
export UCX_WARN_UNUSED_ENV_VARS=n
# 40 steps: the run is still going when the member arrives (about 0.1 s after step 3). Batch 6:
# divisible by 2 and by 3.
model=(--model "$src/examples/convnext-mini.json" --classes 6 --threads 1 --batch 6 --input 3x32x128 --steps 40)
fail() { echo "FAIL: $1"; cat "$2"; exit 1; }
field() {
  python3 -c 'import json, sys
rounds = [json.loads(l) for l in open(sys.argv[1])]
print([r for r in rounds if r["round"] == int(sys.argv[2])][0][sys.argv[3]])' "$@"
}
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# leader DIR TOKEN: starts the leading launcher in the background (its pid in $leader_pid).
leader() {
  mkdir -p "$1"
  TESSERA_RDZV_TOKEN=$2 timeout 120 "$bin" launch --nnodes 1:2 --nproc 2 --join-timeout 1 --max-restarts 1 \
    --elastic-log "$1/log.jsonl" -- train "${model[@]}" --backend ucx --mesh dp=auto --timeout 10 \
    --save "$1/ck" --save-every 2 --resume auto >"$1/lead.out" 2>&1 &
  leader_pid=$!
  pids+=("$leader_pid")
}
# wait_for FILE PATTERN: up to 60 s for a line matching PATTERN.
wait_for() {
  for _ in $(seq 600); do
    grep -q "$2" "$1" && return 0
    sleep 0.1
  done
  fail "no line '$2' within 60 s" "$1"
}
port_of() { sed -n 's/^\[launch\] elastic job: .* --join 127\.0\.0\.1:\([0-9]*\) --nproc K.*/\1/p' "$1" | head -1; }

# 2. A member joins when the leader's rank 0 has printed step 3.
tok=join-$$-$RANDOM
leader "$tmp/j" "$tok"
wait_for "$tmp/j/lead.out" "^\[rank 0\] step 3/40"
port=$(port_of "$tmp/j/lead.out")
[ -n "$port" ] || fail "the leader did not print its --join port" "$tmp/j/lead.out"
TESSERA_RDZV_TOKEN=$tok timeout 120 "$bin" launch --join "127.0.0.1:$port" --nproc 1 >"$tmp/j/member.out" 2>&1
code=$?
wait "$leader_pid"
lcode=$?
[ $lcode -eq 0 ] || fail "join: the leader exited $lcode, expected 0" "$tmp/j/lead.out"
[ $code -eq 0 ] || fail "join: the member exited $code, expected 0" "$tmp/j/member.out"
grep -q "^tessera launch: the job ended: finished in round 1 after 1 restart(s)" "$tmp/j/member.out" ||
  fail "join: the member's verdict" "$tmp/j/member.out"
field "$tmp/j/log.jsonl" 0 ended | grep -q "a launcher joined" || fail "join: round 0's end does not name the join" "$tmp/j/log.jsonl"
[ "$(field "$tmp/j/log.jsonl" 0 world)" = 2 ] && [ "$(field "$tmp/j/log.jsonl" 1 world)" = 3 ] &&
  [ "$(field "$tmp/j/log.jsonl" 1 members)" = 2 ] && [ "$(field "$tmp/j/log.jsonl" 1 last_step)" = 40 ] ||
  fail "join: the round log does not show round 1 on 3 ranks of 2 launchers to step 40" "$tmp/j/log.jsonl"
resumed=$(field "$tmp/j/log.jsonl" 1 resumed_step)
[ "$resumed" -ge 2 ] && [ "$resumed" -lt 40 ] && [ $((resumed % 2)) -eq 0 ] ||
  fail "join: round 1 resumed from step '$resumed'" "$tmp/j/log.jsonl"
grep -q "^\[rank 0\] resume auto: resuming from '$tmp/j/ck.step$resumed' (step $resumed)" "$tmp/j/lead.out" ||
  fail "join: rank 0 of round 1 did not resume from ck.step$resumed" "$tmp/j/lead.out"
echo "a launcher joined after step 3; round 1 resumed from step $resumed"
# By hand: 2 ranks (every checkpoint kept), then 3 from the step the log names.
mkdir -p "$tmp/h"
timeout 120 "$bin" launch --nproc 2 -- train "${model[@]}" --backend ucx --mesh dp=2 --timeout 10 --save "$tmp/h/A" \
  --save-every "$resumed" --keep-checkpoints 40 >"$tmp/h.a.out" 2>&1 || fail "by hand: the 2-rank run" "$tmp/h.a.out"
timeout 120 "$bin" launch --nproc 3 -- train "${model[@]}" --backend ucx --mesh dp=3 --timeout 10 \
  --resume "$tmp/h/A.step$resumed" --save "$tmp/h/B" >"$tmp/h.b.out" 2>&1 || fail "by hand: the 3-rank run" "$tmp/h.b.out"
cmp -s "$tmp/j/ck" "$tmp/h/B" || fail "join: the elastic result differs from the by-hand sequence (change at step $resumed)" "$tmp/j/lead.out"
! cmp -s "$tmp/j/ck" "$tmp/h/A" || fail "join: the elastic result equals the 2-rank run's: no change took effect" "$tmp/j/lead.out"

# 4. A member with another token, mid-run: refused (exit 1, "wrong token"); the job finishes in
# round 0 with the bits of a plain 2-rank run.
leader "$tmp/w" "right-$$-$RANDOM"
wait_for "$tmp/w/lead.out" "^\[rank 0\] step 3/40"
port=$(port_of "$tmp/w/lead.out")
TESSERA_RDZV_TOKEN=wrong timeout 60 "$bin" launch --join "127.0.0.1:$port" --nproc 1 >"$tmp/w/member.out" 2>&1
code=$?
wait "$leader_pid"
lcode=$?
[ $code -eq 1 ] && grep -q "wrong token" "$tmp/w/member.out" || fail "wrong token: member exit $code" "$tmp/w/member.out"
grep -q "^\[launch\] members: .*wrong token" "$tmp/w/lead.out" || fail "wrong token: the leader did not log the refusal" "$tmp/w/lead.out"
[ $lcode -eq 0 ] && grep -q "^tessera launch: finished in round 0 after 0 restart(s)" "$tmp/w/lead.out" ||
  fail "wrong token: the job was affected (leader exit $lcode)" "$tmp/w/lead.out"
[ "$(wc -l <"$tmp/w/log.jsonl")" -eq 1 ] || fail "wrong token: more than one round" "$tmp/w/log.jsonl"
cmp -s "$tmp/w/ck" "$tmp/h/A" || fail "wrong token: the result differs from a plain 2-rank run" "$tmp/w/lead.out"
echo "cli_elastic_join: ok"
