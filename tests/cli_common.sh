# Shared by the command-line tests, called as `tests/cli_X.sh <tessera binary> [<source dir>]`:
# source it right after `set`. It sets $bin and $src from the arguments and $tmp to a fresh folder
# removed at exit (a test that must also clean up something else sets its own EXIT trap after).
bin=$1
src=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect_fail WANT ARGS...: `tessera ARGS...` must fail with exit status 1 or 2 (an error, not a
# crash or a signal) and print a message containing WANT.
expect_fail() {
  local want=$1; shift
  set +e
  out=$("$bin" "$@" 2>&1)
  rc=$?
  set -e
  if [ $rc -eq 0 ] || [ $rc -gt 2 ]; then echo "expected failure (1 or 2), got $rc for: $*"; echo "$out"; exit 1; fi
  echo "$out" | grep -q -- "$want" || { echo "message lacks '$want' for: $*"; echo "$out"; exit 1; }
}
