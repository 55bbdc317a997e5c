#!/usr/bin/env bash
# `tessera launch` running a program that is not a tessera command (as torchrun runs python):
# every rank gets the env:// variables, its output comes back prefixed with its rank, a failing
# rank makes the launcher exit non-zero naming it, a tessera command still runs this tessera, and
# a program that does not exist is refused before anything starts.
#   tests/cli_launch_program.sh <tessera binary> <source dir>
set -euo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# 1. A program found on PATH (sh): env:// variables per rank, output prefixed, exit code 0.
"$bin" launch --nproc 3 -- sh -c 'echo "hello rank=$RANK size=$WORLD_SIZE local=$LOCAL_RANK addr=$MASTER_ADDR port=$MASTER_PORT token=$TESSERA_RDZV_TOKEN"' \
  >"$tmp/ok.out" 2>&1 || { echo "launch of sh failed:"; cat "$tmp/ok.out"; exit 1; }
for r in 0 1 2; do
  grep -q "^\[rank $r\] hello rank=$r size=3 local=$r addr=127.0.0.1 port=[1-9][0-9]* token=[0-9a-f]\{32\}$" "$tmp/ok.out" ||
    { echo "rank $r's line is missing or wrong:"; cat "$tmp/ok.out"; exit 1; }
done
# One store and one token for the whole job.
[ "$(sed -n 's/.*port=\([0-9]*\) token=\(.*\)$/\1 \2/p' "$tmp/ok.out" | sort -u | wc -l)" -eq 1 ] ||
  { echo "ranks saw different ports or tokens:"; cat "$tmp/ok.out"; exit 1; }

# 2. A program given by path, with its arguments.
printf '#!/bin/sh\necho "args: $*"\n' >"$tmp/prog.sh"
chmod +x "$tmp/prog.sh"
out=$("$bin" launch --nproc 2 -- "$tmp/prog.sh" --lr 0.1 "two words" 2>&1)
for r in 0 1; do
  echo "$out" | grep -q "^\[rank $r\] args: --lr 0.1 two words$" || { echo "prog.sh rank $r:"; echo "$out"; exit 1; }
done

# 3. One rank fails: the launcher stops the others and exits 1 naming it and its exit code.
set +e
"$bin" launch --nproc 3 --grace 1 -- sh -c 'if [ "$RANK" = 1 ]; then echo "rank one gives up" >&2; exit 3; fi; sleep 30' \
  >"$tmp/fail.out" 2>&1
code=$?
set -e
[ $code -eq 1 ] || { echo "launcher exited $code after rank 1 failed, expected 1"; cat "$tmp/fail.out"; exit 1; }
grep -q "^\[rank 1\] rank one gives up$" "$tmp/fail.out" || { echo "rank 1's stderr is missing:"; cat "$tmp/fail.out"; exit 1; }
grep -q "tessera launch: rank 1 failed (exit code 3)" "$tmp/fail.out" ||
  { echo "launcher did not name rank 1:"; cat "$tmp/fail.out"; exit 1; }

# 4. A tessera command keeps running this tessera, even with a program of that name on PATH.
mkdir "$tmp/bin"
printf '#!/bin/sh\necho "the wrong backends"\n' >"$tmp/bin/backends"
chmod +x "$tmp/bin/backends"
out=$(PATH="$tmp/bin:$PATH" "$bin" launch --nproc 1 -- backends 2>&1)
echo "$out" | grep -q "^\[rank 0\] .*local" || { echo "tessera backends did not run:"; echo "$out"; exit 1; }
if echo "$out" | grep -q "the wrong backends"; then echo "ran the PATH program instead of tessera backends"; exit 1; fi

# 5. Neither a tessera command nor a program: refused before any rank starts.
expect_fail "'no-such-program-x' is neither a tessera command" launch --nproc 2 -- no-such-program-x --flag
expect_fail "nor an executable program" launch --nproc 2 -- "$tmp/missing.sh"
echo "cli_launch_program: ok"
