# Shared by the tests that prove a tree checker can fail (lint_layering_test.sh,
# docs_links_test.sh): source it after setting $checker to the script under test. It makes $tmp
# (removed at exit), where the test's make_tree builds a small tree in $tmp/t, and sets $fail,
# the test's exit status, which expect raises.

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# expect <status> <text in the output> <what>: "$checker" on $tmp/t must exit with <status> and
# print <text>; prints "ok" or "FAIL" with <what>, and a failure sets fail=1.
expect() {
  out=$("$checker" "$tmp/t" 2>&1 </dev/null)  # not the caller's stdin: a table of cases may feed it
  rc=$?
  if [ $rc -ne "$1" ]; then echo "FAIL $3: exit $rc (expected $1): $out"; fail=1; return; fi
  case "$out" in *"$2"*) echo "ok   $3" ;; *) echo "FAIL $3: output lacks '$2': $out"; fail=1 ;; esac
}
