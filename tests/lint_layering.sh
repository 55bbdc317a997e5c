#!/usr/bin/env bash
# The dependency rule of docs/architecture.md, checked by grep: prints each violation, exits 1.
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
[ $status -eq 0 ] && echo "layering: ok"
exit $status
