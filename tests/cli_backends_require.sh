#!/usr/bin/env bash
# `tessera backends --require`: its exit status says whether the named backends can run here.
#   tests/cli_backends_require.sh <tessera> <cuda: 0|1>
# local and cpu always run (0); a name the build lacks is 1, naming what it has; cuda (where it is
# built) is 0 with a visible GPU and 3 without one ("loads but cannot run here"), never 0 there.
set -uo pipefail
tessera=$1 cuda=$2
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect STATUS ARGS...: `tessera backends ARGS` exits with STATUS
  local want=$1
  shift
  "$tessera" backends "$@" >/tmp/require.$$.out 2>/tmp/require.$$.err
  local rc=$?
  [ "$rc" -eq "$want" ] || { cat /tmp/require.$$.err; fail "tessera backends $* exited $rc, expected $want"; }
}
trap 'rm -f /tmp/require.$$.out /tmp/require.$$.err' EXIT
expect 0 --require local,cpu
expect 1 --require local,nosuch
grep -q "required backend 'nosuch' is not in this build (it has .*local" /tmp/require.$$.err ||
  fail "the message does not name the missing backend and those built: $(cat /tmp/require.$$.err)"
if [ "$cuda" = 1 ]; then
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    expect 0 --require cuda
  else
    expect 3 --require cpu,cuda
    grep -q "required backend 'cuda' loads but cannot run here: .*no CUDA device visible" /tmp/require.$$.err ||
      fail "no-device message: $(cat /tmp/require.$$.err)"
  fi
fi
echo "backends --require: ok"
