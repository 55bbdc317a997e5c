#!/usr/bin/env bash
# tessera-studio --screenshot with bad input: exits 1 with the reason on stderr, never crashes.
# Usage: screenshot_errors.sh <tessera-studio> <source dir> <scratch dir>
set -u
studio=$1 src=$2 out=$3
fail=0
check() {  # check <config> <expected text in the message>
  err=$(QT_QPA_PLATFORM=offscreen "$studio" --screenshot "$out/bad" --config "$1" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne 1 ]; then echo "FAIL $1: exit status $rc (expected 1): $err"; fail=1; return; fi
  case "$err" in *"$2"*) echo "ok   $1: $err" ;; *) echo "FAIL $1: message lacks '$2': $err"; fail=1 ;; esac
}
check "$src/tests/gui/data/bad_mesh.json" "sp"
check "$src/tests/gui/data/bad_json.json" "not valid JSON"
check "$src/tests/gui/data/bad_dtype.json" 'field "dtype" is "bf16": the trainer keeps its weights in f32 or f64'
check "$src/tests/gui/data/no_such_file.json" "cannot read"
if [ -e "$out/bad" ]; then echo "FAIL: a refused configuration created $out/bad"; fail=1; fi
exit $fail
