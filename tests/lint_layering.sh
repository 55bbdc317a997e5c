#!/usr/bin/env bash
# The dependency rule of docs/architecture.md, checked by grep: prints each violation, exits 1.
# (tests/lint_layering_test.sh proves each rule can fail.)
set -u
top=${1:-.}
cd "$top" || exit 2
status=0
hits=$(grep -rnE '#include *[<"](Q[A-Za-z]+|pybind11/|ucp/|uct/|ucs/|nccl\.h|cuda_runtime|cuda\.h|cudnn|boost/|tessera/sim/|tessera/gui/|tessera/builtin_backends)' core 2>/dev/null)
if [ -n "$hits" ]; then echo "core/ includes something outside Eigen and the standard library:"; echo "$hits"; status=1; fi
for d in backends/comm/*/ backends/compute/*/; do
  [ -d "$d" ] || continue
  me=$(basename "$d")
  for other in backends/comm/*/ backends/compute/*/; do
    o=$(basename "$other"); [ "$o" = "$me" ] && continue
    hit=$(grep -rnE "#include *[<\"][^>\"]*(backends/(comm|compute)/$o/|tessera/(comm|compute)/$o[/.])" "$d" 2>/dev/null)
    if [ -n "$hit" ]; then echo "backend $me includes backend $o:"; echo "$hit"; status=1; fi
  done
done
if [ -d sim ]; then
  hit=$(grep -rnE '#include *[<"](Q[A-Za-z]+|pybind11/|ucp/|nccl\.h|tessera/gui/)' sim 2>/dev/null)
  if [ -n "$hit" ]; then echo "sim/ includes the GUI, bindings or a vendor library:"; echo "$hit"; status=1; fi
fi
# sim/ depends on core only: no backend's header (tessera/comm/local.hpp, tessera/compute/cpu.hpp,
# env_rendezvous, tessera/builtin_backends.hpp) and nothing of the run layer (tessera/run/).
# Every backend's public header (backends/*/include), as an include path: what sim/ and the front
# ends may not include.
backend_headers=$(cd backends 2>/dev/null && find . -path '*/include/*' -type f \( -name '*.hpp' -o -name '*.h' \) 2>/dev/null |
                  sed 's|.*/include/||' | sort -u)
if [ -d sim ]; then
  for h in $backend_headers tessera/run/; do
    hit=$(grep -rnF "$h" sim 2>/dev/null | grep -E "#include *[<\"]$h")
    if [ -n "$hit" ]; then echo "sim/ includes $h from backends/ (sim depends on core only):"; echo "$hit"; status=1; fi
  done
fi
# gui/ and bindings/ use the run layer, never the command line's code in tools/: no include of a
# tools/ header, no link to a tools/ library.
if [ -d tools/src ]; then
  for d in gui bindings; do
    [ -d "$d" ] || continue
    for h in $(cd tools/src && ls *.hpp *.h 2>/dev/null); do
      hit=$(grep -rnE "#include *[<\"]([^\">]*/)?$h[\">]" "$d" 2>/dev/null)
      if [ -n "$hit" ]; then echo "$d/ includes $h from tools/ (use tessera/run/ instead):"; echo "$hit"; status=1; fi
    done
    hit=$(grep -rnE '#include *[<"][^">]*tools/' "$d" 2>/dev/null)
    if [ -n "$hit" ]; then echo "$d/ includes a file from tools/:"; echo "$hit"; status=1; fi
    hit=$(grep -rnE --include=CMakeLists.txt --include='*.cmake' 'tessera_tools|tools/src' "$d" 2>/dev/null)
    if [ -n "$hit" ]; then echo "$d/ builds on tools/ (link tessera::run instead):"; echo "$hit"; status=1; fi
  done
fi
# Front ends (gui/, bindings/, tools/) reach the backends through the run layer only: no concrete
# backend header (every header under backends/*/include, as for sim/ above), nothing of
# backends/*/src, in their sources or their CMake include paths.
if [ -d backends ]; then
  for d in gui bindings tools; do
    [ -d "$d" ] || continue
    for h in $backend_headers; do
      hit=$(grep -rnF "$h" "$d" 2>/dev/null | grep -E "#include *[<\"]$h")
      if [ -n "$hit" ]; then echo "$d/ includes the backend header $h (use tessera/run/ instead):"; echo "$hit"; status=1; fi
    done
    hit=$(grep -rnE '#include *[<"][^">]*backends/[^">]*src/' "$d" 2>/dev/null)
    if [ -n "$hit" ]; then echo "$d/ includes a backend's sources (use tessera/run/ instead):"; echo "$hit"; status=1; fi
    hit=$(grep -rnE --include=CMakeLists.txt --include='*.cmake' 'backends/[^ )]*/src' "$d" 2>/dev/null)
    if [ -n "$hit" ]; then echo "$d/ builds on a backend's sources (link tessera::run instead):"; echo "$hit"; status=1; fi
  done
fi
# Libraries never print (docs/architecture.md): core/, sim/, backends/ and run/ report through
# return values, exceptions, callbacks or tessera::core::report; snprintf into a buffer is fine.
# Comment lines are skipped.
for d in core sim backends run; do
  [ -d "$d" ] || continue
  hit=$(grep -rnE --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.c' --include='*.cu' --include='*.cuh' \
        '(^|[^A-Za-z0-9_])(printf|fprintf|vprintf|vfprintf|puts|fputs|perror)[[:space:]]*\(|std::(cout|cerr|clog)([^A-Za-z0-9_]|$)' \
        "$d" 2>/dev/null | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(//|\*|/\*)')
  if [ -n "$hit" ]; then echo "$d/ prints (a library reports through tessera::core::report or its results instead):"; echo "$hit"; status=1; fi
done
[ $status -eq 0 ] && echo "layering: ok"
exit $status
