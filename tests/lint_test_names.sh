#!/usr/bin/env bash
# Catch2 test names must not contain ';': catch_discover_tests splits a name at ';' into two
# ctest entries whose test specs match nothing, and those "pass" without running a single
# assertion. Prints each offending TEST_CASE, exits 1.
set -u
top=${1:-.}
cd "$top/tests" || exit 2
hits=$(grep -rnE 'TEST_CASE\( *"[^"]*;' --include='*.cpp' . ;
       grep -rnE -A1 'TEST_CASE\( *$' --include='*.cpp' . | grep -E '^[^:]+-[0-9]+- *"[^"]*;')
if [ -n "$hits" ]; then
  echo "test names with ';' (ctest would split them and run nothing; use ',' instead):"
  echo "$hits"
  exit 1
fi
exit 0
