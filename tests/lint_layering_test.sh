#!/usr/bin/env bash
# The layering lint can fail: on a small tree laid out as the project is, it passes clean and
# refuses each planted violation (exit 1, naming the file): sim → a backend header, sim → the run
# layer, gui → a tools/ header, bindings → a tools/ header, gui → a tools/ library, core → Qt,
# a front end → a backend header or a backend's sources, and a library that prints.
#   tests/lint_layering_test.sh <tests dir>
set -u
lint="$1/lint_layering.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
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
expect() {  # expect <status> <text in the output> <what>
  out=$("$lint" "$tmp/t" 2>&1)
  rc=$?
  if [ $rc -ne "$1" ]; then echo "FAIL $3: exit $rc (expected $1): $out"; fail=1; return; fi
  case "$out" in *"$2"*) echo "ok   $3" ;; *) echo "FAIL $3: output lacks '$2': $out"; fail=1 ;; esac
}
make_tree; expect 0 "layering: ok" "a clean tree passes"
make_tree; printf '#include "tessera/comm/local.hpp"\n' >>"$tmp/t/sim/src/ok.cpp"; expect 1 "sim/src/ok.cpp" "sim → comm/local"
make_tree; printf '#include <tessera/compute/cpu.hpp>\n' >>"$tmp/t/sim/src/ok.cpp"; expect 1 "tessera/compute/cpu.hpp" "sim → compute/cpu"
make_tree; printf '#include "tessera/builtin_backends.hpp"\n' >>"$tmp/t/sim/src/ok.cpp"; expect 1 "builtin_backends" "sim → builtin backends"
make_tree; printf '#include "tessera/run/spec.hpp"\n' >>"$tmp/t/sim/src/ok.cpp"; expect 1 "tessera/run/" "sim → run layer"
make_tree; printf '#include "spec_options.hpp"\n' >>"$tmp/t/gui/model/ok.cpp"; expect 1 "gui/ includes spec_options.hpp" "gui → tools header"
make_tree; printf '#include "spec_options.hpp"\n' >>"$tmp/t/bindings/python/src/ok.cpp"; expect 1 "bindings/ includes spec_options.hpp" "bindings → tools header"
make_tree; printf '#include "../../tools/src/cmd.hpp"\n' >>"$tmp/t/bindings/python/src/ok.cpp"; expect 1 "a file from tools/" "bindings → tools path"
make_tree; printf 'target_link_libraries(y PRIVATE tessera_tools_lib)\n' >>"$tmp/t/gui/CMakeLists.txt"; expect 1 "gui/ builds on tools/" "gui → tools library"
make_tree; printf '#include <QString>\n' >"$tmp/t/core/src/bad.cpp"; expect 1 "core/ includes" "core → Qt"
make_tree; printf '#include "tessera/comm/local.hpp"\n' >>"$tmp/t/gui/model/ok.cpp"; expect 1 "gui/ includes the backend header tessera/comm/local.hpp" "gui → comm/local"
make_tree; printf '#include <tessera/builtin_backends.hpp>\n' >>"$tmp/t/bindings/python/src/ok.cpp"; expect 1 "bindings/ includes the backend header tessera/builtin_backends.hpp" "bindings → builtin backends"
make_tree; printf '#include "tessera/compute/cpu.hpp"\n' >>"$tmp/t/tools/src/ok.cpp"; expect 1 "tools/src/ok.cpp" "tools → compute/cpu"
make_tree; printf '#include "../../backends/comm/local/src/world.hpp"\n' >>"$tmp/t/tools/src/ok.cpp"; expect 1 "tools/ includes a backend's sources" "tools → backends/*/src"
make_tree; printf 'target_include_directories(y PRIVATE ../backends/comm/local/src)\n' >>"$tmp/t/gui/CMakeLists.txt"; expect 1 "gui/ builds on a backend's sources" "gui → backends/*/src path"
make_tree; printf 'void f() { printf("x"); }\n' >>"$tmp/t/run/src/ok.cpp"; expect 1 "run/src/ok.cpp:3" "run prints (printf)"
make_tree; printf 'void f() { std::fprintf(stderr, "x"); }\n' >>"$tmp/t/backends/comm/local/src/ok.cpp"; expect 1 "backends/ prints" "backends print (std::fprintf)"
make_tree; printf 'void f() { std::cout << 1; }\n' >"$tmp/t/core/src/bad.cpp"; expect 1 "core/ prints" "core prints (std::cout)"
make_tree; printf 'void f() { std::cerr << 1; }\n' >>"$tmp/t/sim/src/ok.cpp"; expect 1 "sim/ prints" "sim prints (std::cerr)"
make_tree; printf 'void f() { puts("x"); perror("y"); }\n' >>"$tmp/t/sim/src/ok.cpp"; expect 1 "sim/src/ok.cpp:2" "sim prints (puts, perror)"
exit $fail
