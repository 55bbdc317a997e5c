#!/usr/bin/env bash
# Builds the GPU check bundle here, for a bare GPU machine (tests/gpu/README.md): the tessera CLI,
# the cuda/nccl/ucx plugins, the GPU test and bench binaries, the PyTorch peer and run.sh, built
# for sm_90 (+ PTX) with portable x86-64-v3 host code, stripped, with every library they need that
# the GPU machine lacks carried in lib/. Nothing is compiled on the GPU machine.
#   tests/gpu/make_bundle.sh [BUILD_DIR] [--out DIR]
# BUILD_DIR (default build/gpu-bundle) is configured with the gpu-bundle preset when it has no
# CMakeCache.txt; an existing build is taken as it is if it was configured like that preset
# (no -march=native, no libtorch, CUDA on), else refused. DIR defaults to gpu-bundle/ at the
# repository root (git-ignored). Prints the bundle's size; fails over 48 MiB (BUNDLE_LIMIT_MIB)
# or when its dependency closure (bundle_closure.py) is not clean.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=""
out=$here/gpu-bundle
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "make_bundle: unknown option $1 (usage: make_bundle.sh [BUILD_DIR] [--out DIR])" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
build=${build:-$here/build/gpu-bundle}
case $build in /*) ;; *) build=$PWD/$build ;; esac
case $out in /*) ;; *) out=$PWD/$out ;; esac
limit_mib=${BUNDLE_LIMIT_MIB:-48}
jobs=${JOBS:-$(nproc)}
closure=$here/tests/gpu/bundle_closure.py
die() { echo "make_bundle: $*" >&2; exit 1; }

for tool in cmake python3 strip patchelf; do
  command -v $tool >/dev/null || die "$tool not found (tools/setup.sh installs it: patchelf, binutils)"
done

# ---- 1. the build: configured like the gpu-bundle preset, only the bundle's targets ------------
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "make_bundle: configuring $build (preset gpu-bundle)"
  (cd "$here" && cmake --preset gpu-bundle -B "$build" >/dev/null) || die "configure of $build failed"
fi
cache() { { grep -m1 "^$1:[A-Z]*=" "$build/CMakeCache.txt" || true; } | sed 's/^[^=]*=//'; }
[ "$(cache TESSERA_NATIVE)" = OFF ] ||
  die "$build was configured with TESSERA_NATIVE=ON (-march=native: this CPU's instructions, which the GPU machine's CPU may lack); use a build of the gpu-bundle preset (the default, build/gpu-bundle)"
[ "$(cache TESSERA_BENCH_TORCH)" = OFF ] ||
  die "$build links Debian's libtorch into the benches (TESSERA_BENCH_TORCH=ON), which the GPU machine lacks; use a build of the gpu-bundle preset"
archs=$(cache CMAKE_CUDA_ARCHITECTURES)
case ";$archs;" in *";90-real;"* | *";90;"*) ;; *) die "$build does not build sm_90 (CMAKE_CUDA_ARCHITECTURES=$archs)" ;; esac

wanted="tessera tessera_compute_cuda tessera_comm_nccl tessera_comm_ucx tessera_tests_core
  tessera_tests_cuda tessera_tests_gpu tessera_tests_nccl tessera_tests_ucx_cuda bench_train bench_conv"
required="tessera tessera_compute_cuda tessera_comm_nccl tessera_tests_core tessera_tests_cuda
  tessera_tests_gpu tessera_tests_nccl bench_train bench_conv"
known=$(cmake --build "$build" --target help 2>/dev/null | sed -n 's/^\([A-Za-z0-9_]*\):.*/\1/p')
targets=()
for t in $wanted; do
  if grep -qx "$t" <<<"$known"; then
    targets+=("$t")
  elif grep -qw "$t" <<<"$required"; then
    die "$build has no target $t (is CUDA/cuDNN/NCCL found? see its configure summary)"
  else
    echo "make_bundle: no target $t in $build (UCX not found): the bundle has no ucx stage"
  fi
done
echo "make_bundle: building ${targets[*]} in $build"
cmake --build "$build" -j"$jobs" --target "${targets[@]}" || die "build failed"

# ---- 2. the files -------------------------------------------------------------------------------
artifact() {  # the built file of target $1 (executables by name, plugins by their file name)
  find "$build" -type f -name "$1" ! -path '*/CMakeFiles/*' -print -quit 2>/dev/null
}
stage=$(mktemp -d "${out%/*}/.gpu-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib/plugins" "$stage/share"
for exe in tessera tessera_tests_core tessera_tests_cuda tessera_tests_gpu tessera_tests_nccl \
           tessera_tests_ucx_cuda bench_train bench_conv; do
  f=$(artifact "$exe")
  if [ -n "$f" ]; then cp "$f" "$stage/bin/"; elif grep -qw "$exe" <<<"$required"; then die "$exe not built"; fi
done
for so in libtessera_compute_cuda.so libtessera-comm-nccl.so libtessera-comm-ucx.so; do
  f=$(artifact "$so")
  [ -n "$f" ] && cp "$f" "$stage/lib/plugins/"
done
[ -f "$stage/lib/plugins/libtessera_compute_cuda.so" ] || die "libtessera_compute_cuda.so not built"
cp "$here/tests/gpu/run.sh" "$here/tests/gpu/bundle_closure.py" "$here/tests/gpu/gpu_summary.py" \
   "$here/bench/torch_gpu_peer.py" "$stage/share/"
mv "$stage/share/run.sh" "$stage/run.sh"
chmod +x "$stage/run.sh"

# ---- 3. carry what the GPU machine lacks (UCX's libraries, ...) ---------------------------------
# Every needed library that is neither glibc/libstdc++/libgcc nor NVIDIA's (bundle_closure.py's
# lists) is copied from this machine into lib/, under its soname, until nothing is missing.
locate() {  # the path of library $1 on this machine
  ldconfig -p | awk -v l="$1" '$1 == l && /x86-64/ && !found {print $NF; found = 1}'
}
for _ in 1 2 3 4 5 6 7 8; do
  missing=$({ python3 "$closure" "$stage" || true; } | python3 -c \
    'import json,sys; print("\n".join(sorted({v["needs"] for v in json.load(sys.stdin)["violations"]})))')
  [ -n "$missing" ] || break
  for lib in $missing; do
    src=$(locate "$lib")
    [ -n "$src" ] || die "a bundled file needs $lib, which is neither allowed nor found here to carry"
    echo "make_bundle: carrying $lib ($src)"
    cp -L "$src" "$stage/lib/$lib"
  done
done

# ---- 4. strip, and library paths relative to the bundle ----------------------------------------
while IFS= read -r f; do
  chmod u+w "$f"
  strip --strip-unneeded "$f"
  case $f in
    "$stage"/bin/*) patchelf --set-rpath '$ORIGIN/../lib' "$f" ;;
    "$stage"/lib/plugins/*) patchelf --set-rpath '$ORIGIN/..' "$f" ;;
    *) patchelf --set-rpath '$ORIGIN' "$f" ;;
  esac
done < <(find "$stage/bin" "$stage/lib" -type f)

# ---- 5. the manifest, the closure, the size ----------------------------------------------------
report=$(python3 "$closure" "$stage") || {
  echo "$report" >&2
  die "the dependency closure is not clean (above)"
}
commit=$(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)
git -C "$here" diff --quiet HEAD 2>/dev/null || commit="$commit+uncommitted"
python3 - "$stage" "$commit" "$archs" "$(cache CMAKE_CXX_FLAGS)" "$report" <<'EOF'
import hashlib, json, os, platform, sys, time
stage, commit, archs, cxx_flags, report = sys.argv[1:6]
files = {}
for root, _, names in os.walk(stage):
    for n in sorted(names):
        p = os.path.join(root, n)
        with open(p, "rb") as f:
            files[os.path.relpath(p, stage)] = {"bytes": os.path.getsize(p),
                                                "sha256": hashlib.sha256(f.read()).hexdigest()}
closure = json.loads(report)
manifest = {
    "what": "tessera GPU check bundle (tests/gpu/README.md)",
    "commit": commit,
    "built_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "built_on": platform.platform(),
    "cuda_architectures": archs,
    "cxx_flags": cxx_flags,
    # x86-64-v3's instructions, which the host code may use (checked by run.sh's probe)
    "cpu_flags_needed": ["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "xsave"],
    "highest_versions_needed": closure["highest_versions_needed"],
    "cuda_libraries": sorted(closure["cuda_libraries"]),
    "files": files,
}
with open(os.path.join(stage, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
EOF
bytes=$(du -sb "$stage" | cut -f1)
mib=$(python3 -c "print(f'{$bytes / 1048576:.1f}')")
if [ "$bytes" -gt $((limit_mib * 1048576)) ]; then
  du -ab "$stage" | sort -n | tail -n 8 >&2
  die "the bundle is $mib MiB, over its $limit_mib MiB limit (largest files above)"
fi
rm -rf "$out.old"
[ -e "$out" ] && mv "$out" "$out.old"
chmod 755 "$stage"
mv "$stage" "$out"
rm -rf "$out.old"
trap - EXIT
echo "make_bundle: $out is $mib MiB ($(find "$out" -type f | wc -l) files, limit $limit_mib MiB); closure clean"
echo "make_bundle: on the GPU machine: OUT=<results folder> bash gpu-bundle/run.sh"
