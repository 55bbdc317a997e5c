#!/usr/bin/env bash
# The layering lint can fail: on a small tree laid out as the project is, it passes clean and
# refuses each planted violation (exit 1, naming the file): sim → a backend header, sim → the run
# layer, gui → a tools/ header, bindings → a tools/ header, gui → a tools/ library, core → Qt,
# a front end → a backend header or a backend's sources, and a library that prints.
#   tests/lint_layering_test.sh <tests dir>
set -u
checker="$1/lint_layering.sh"
# shellcheck source=tests/checker_test_common.sh
source "$(dirname "$0")/checker_test_common.sh"
make_tree() {
  rm -rf "$tmp/t" && mkdir -p "$tmp/t"/{core/src,sim/src,gui/model,bindings/python/src,tools/src}
  mkdir -p "$tmp/t"/run/include/tessera/run "$tmp/t"/backends/{include/tessera,comm/local/include/tessera/comm,compute/cpu/include/tessera/compute}
  touch "$tmp/t"/backends/include/tessera/builtin_backends.hpp "$tmp/t"/run/include/tessera/run/spec.hpp \
        "$tmp/t"/backends/comm/local/include/tessera/comm/local.hpp "$tmp/t"/backends/compute/cpu/include/tessera/compute/cpu.hpp \
        "$tmp/t"/tools/src/spec_options.hpp
  printf '#include "tessera/core/tensor.hpp"\n' >"$tmp/t/sim/src/ok.cpp"
  printf '#include "tessera/run/spec.hpp"\n#include "tessera/sim/engine.hpp"\n' >"$tmp/t/gui/model/ok.cpp"
  printf '#include "tessera/run/simulate.hpp"\n' >"$tmp/t/bindings/python/src/ok.cpp"
  printf 'target_link_libraries(x PUBLIC tessera::run)\n' >"$tmp/t/gui/CMakeLists.txt"
  printf '#include "tessera/run/devices.hpp"\n' >"$tmp/t/tools/src/ok.cpp"
  mkdir -p "$tmp/t"/run/src "$tmp/t"/backends/comm/local/src
  # What a library may write: snprintf into a buffer, and comments that mention printf(...).
  printf '// never printf("x") here\nint f(char* b) { return std::snprintf(b, 4, "%%d", 1); }\n' >"$tmp/t/run/src/ok.cpp"
  printf '#include "tessera/core/tensor.hpp"\n' >"$tmp/t/backends/comm/local/src/ok.cpp"
}
make_tree; expect 0 "layering: ok" "a clean tree passes"
# Each planted violation: the file (in the fresh tree) it is appended to, the line appended, what
# the refusal must say, and the case's name.
while IFS='|' read -r file line want what; do
  make_tree
  printf '%s\n' "$line" >>"$tmp/t/$file"
  expect 1 "$want" "$what"
done <<'CASES'
sim/src/ok.cpp|#include "tessera/comm/local.hpp"|sim/src/ok.cpp|sim → comm/local
sim/src/ok.cpp|#include <tessera/compute/cpu.hpp>|tessera/compute/cpu.hpp|sim → compute/cpu
sim/src/ok.cpp|#include "tessera/builtin_backends.hpp"|builtin_backends|sim → builtin backends
sim/src/ok.cpp|#include "tessera/run/spec.hpp"|tessera/run/|sim → run layer
gui/model/ok.cpp|#include "spec_options.hpp"|gui/ includes spec_options.hpp|gui → tools header
bindings/python/src/ok.cpp|#include "spec_options.hpp"|bindings/ includes spec_options.hpp|bindings → tools header
bindings/python/src/ok.cpp|#include "../../tools/src/cmd.hpp"|a file from tools/|bindings → tools path
gui/CMakeLists.txt|target_link_libraries(y PRIVATE tessera_tools_lib)|gui/ builds on tools/|gui → tools library
core/src/bad.cpp|#include <QString>|core/ includes|core → Qt
gui/model/ok.cpp|#include "tessera/comm/local.hpp"|gui/ includes the backend header tessera/comm/local.hpp|gui → comm/local
bindings/python/src/ok.cpp|#include <tessera/builtin_backends.hpp>|bindings/ includes the backend header tessera/builtin_backends.hpp|bindings → builtin backends
tools/src/ok.cpp|#include "tessera/compute/cpu.hpp"|tools/src/ok.cpp|tools → compute/cpu
tools/src/ok.cpp|#include "../../backends/comm/local/src/world.hpp"|tools/ includes a backend's sources|tools → backends/*/src
gui/CMakeLists.txt|target_include_directories(y PRIVATE ../backends/comm/local/src)|gui/ builds on a backend's sources|gui → backends/*/src path
run/src/ok.cpp|void f() { printf("x"); }|run/src/ok.cpp:3|run prints (printf)
backends/comm/local/src/ok.cpp|void f() { std::fprintf(stderr, "x"); }|backends/ prints|backends print (std::fprintf)
core/src/bad.cpp|void f() { std::cout << 1; }|core/ prints|core prints (std::cout)
sim/src/ok.cpp|void f() { std::cerr << 1; }|sim/ prints|sim prints (std::cerr)
sim/src/ok.cpp|void f() { puts("x"); perror("y"); }|sim/src/ok.cpp:2|sim prints (puts, perror)
CASES
exit $fail
