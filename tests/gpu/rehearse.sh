#!/usr/bin/env bash
# The GPU check's rehearsal on this machine (ctest gpu_bundle.rehearsal, label gpu-bundle; CI runs
# it as its own phase): builds the bundle (tests/gpu/make_bundle.sh) into BUILD_DIR/bundle, runs
# its run.sh as the GPU machine would, and checks what comes back.
#   tests/gpu/rehearse.sh [BUILD_DIR]        (default build/gpu-bundle)
# Without a GPU, run.sh must exit 3 ("no CUDA device visible") after passing every stage that
# needs none (probe, closure, backends, selftest); with one, 0. Either way OUT holds at most 8
# files: summary.json (closure passed) and logs.tar.gz with every stage's log. The closure check is
# also shown to fail on a bundle given a library the GPU machine lacks.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build/gpu-bundle}
bundle=$build/bundle
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$here/tests/gpu/make_bundle.sh" "$build" --out "$bundle" || fail "make_bundle.sh failed"
bytes=$(du -sb "$bundle" | cut -f1)
[ "$bytes" -le $((48 * 1048576)) ] || fail "the bundle is $bytes bytes, over 48 MiB"

# The run, in a copy outside the build tree (the GPU machine has neither the build nor its paths).
cp -a "$bundle" "$tmp/gpu-bundle"
t0=$(date +%s)
OUT=$tmp/out bash "$tmp/gpu-bundle/run.sh" >"$tmp/run.log" 2>&1
rc=$?
sed 's/^/  run.sh | /' "$tmp/run.log"
gpu=0
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && gpu=1
if [ "$gpu" = 0 ]; then
  [ "$rc" -eq 3 ] || fail "run.sh exited $rc without a GPU, expected 3"
  grep -q "no CUDA device visible" "$tmp/run.log" || fail "run.sh did not say 'no CUDA device visible'"
else
  [ "$rc" -eq 0 ] || fail "run.sh exited $rc on a machine with a GPU"
fi
n=$(find "$tmp/out" -type f | wc -l)
[ "$n" -le 8 ] || fail "OUT holds $n files, more than the 8 that come back"
python3 - "$tmp/out" "$gpu" <<'EOF' || fail "summary.json (above)"
import json, sys, tarfile
out, gpu = sys.argv[1], sys.argv[2] == "1"
s = json.load(open(f"{out}/summary.json"))
assert s["closure"]["ok"], f"closure: {s['closure']}"
assert s["closure"]["elf_files"] >= 10, s["closure"]["elf_files"]
stages = {x["name"]: x for x in s["stages"]}
for name in ("probe", "closure", "backends", "selftest"):
    assert stages[name]["status"] == "ok", f"stage {name}: {stages[name]}"
gpu_stages = ("gpu-train", "conformance", "cuda-backend", "bench-train-fp32", "bench-train-bf16",
              "bench-conv", "calibrate-sim", "nccl", "ucx", "memcheck")
for name in gpu_stages:
    want = {"ok"} if gpu else {"not-run"}
    assert stages[name]["status"] in want, f"stage {name}: {stages[name]}"
caps = sum(x["cap_s"] for x in s["stages"])
assert caps <= 420, f"the stages' caps sum to {caps} s, over 7 minutes"
assert s["exit_status"] == (0 if gpu else 3), s["exit_status"]
names = tarfile.open(f"{out}/logs.tar.gz").getnames()
for name in ("probe", "closure", "backends", "selftest"):
    assert f"./logs/{name}.log" in names, f"logs.tar.gz lacks logs/{name}.log: {names}"
assert "./probe.json" in names and "./closure.json" in names, names
print(f"rehearsal: exit {s['exit_status']}, {len(s['stages'])} stages, caps {caps} s, "
      f"{s['closure']['elf_files']} ELF files closed, cuda libraries {sorted(s['closure']['cuda_libraries'])}")
EOF
echo "rehearsal: run.sh took $(($(date +%s) - t0)) s; OUT held $n files"

# A bundle whose cuda plugin does not load (it needs a library the machine lacks, as when cuDNN
# is missing) fails: exit 1, backends failed naming the library, never 3 or 0. (Not removed: a
# missing file would be looked for further along the plugin path, which here still has the build
# tree's folder; the GPU machine has no build tree.)
cp -a "$bundle" "$tmp/noplugin"
patchelf --add-needed libtessera_absent.so.1 "$tmp/noplugin/lib/plugins/libtessera_compute_cuda.so"
OUT=$tmp/out-noplugin bash "$tmp/noplugin/run.sh" >"$tmp/noplugin.log" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { cat "$tmp/noplugin.log"; fail "run.sh with a cuda plugin that does not load exited $rc, expected 1"; }
python3 - "$tmp/out-noplugin" <<'EOF' || fail "summary.json with a cuda plugin that does not load (above)"
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
b = next(x for x in s["stages"] if x["name"] == "backends")
assert b["status"] == "failed", b
assert "libtessera_absent.so.1" in (b.get("first_error") or ""), b
print(f"rehearsal: a cuda plugin that does not load: exit 1, backends failed: {b['first_error'][:120]}")
EOF

# The GPU stages, run here as if a GPU were visible, must each fail: their tests report skipped
# (which fails a stage on a GPU machine), their benches find no device.
if [ "$gpu" = 0 ]; then
  OUT=$tmp/out-pretend TESSERA_GPU_CHECK_PRETEND_GPU=1 bash "$tmp/gpu-bundle/run.sh" \
    >"$tmp/pretend.log" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] || { cat "$tmp/pretend.log"; fail "run.sh pretending a GPU exited $rc, expected 1"; }
  python3 - "$tmp/out-pretend" <<'EOF' || fail "summary.json pretending a GPU (above)"
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
st = {x["name"]: x for x in s["stages"]}
for name in ("gpu-train", "conformance", "cuda-backend", "nccl", "ucx"):
    assert st[name]["status"] == "failed", st[name]
    assert "reported skipped on a machine with a GPU" in st[name]["note"], st[name]
for name in ("bench-train-fp32", "bench-train-bf16", "bench-conv", "calibrate-sim"):
    assert st[name]["status"] == "failed", st[name]
assert s["exit_status"] == 1
print("rehearsal: pretending a GPU: every GPU stage failed; gpu-train: " + st["gpu-train"]["note"][:90])
EOF
fi

# The closure check fails on a library the GPU machine lacks: a planted file that needs a
# library neither the bundle carries nor the bare machine has (libxml2 needs libicuuc; the first
# candidate found with such a need is planted: libpng16 and libucs are carried now, with libz).
cp -a "$bundle" "$tmp/bad"
system_lib='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so'
lib=
for name in libxml2 libtiff libfreetype libpng16 libucs; do
  cand=$(ldconfig -p | awk -v n="^$name\\.so" '$1 ~ n && /x86-64/ && !f {print $NF; f = 1}')
  [ -n "$cand" ] || continue
  for need in $(readelf -d "$cand" 2>/dev/null | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    if ! [[ $need =~ $system_lib ]] && [ -z "$(find "$bundle" -name "$need" -print -quit)" ]; then
      lib=$cand
      break 2
    fi
  done
done
[ -n "$lib" ] || fail "no library here to plant in the bundle for the negative check"
cp -L "$lib" "$tmp/bad/bin/planted.so"
if python3 "$tmp/bad/share/bundle_closure.py" "$tmp/bad" >"$tmp/bad.json"; then
  fail "the closure check passed a bundle holding $(basename "$lib"), whose libraries are not carried"
fi
grep -q '"file": "bin/planted.so"' "$tmp/bad.json" || fail "the closure report does not name bin/planted.so"
echo "rehearsal: the closure check refuses a planted $(basename "$lib") ($(python3 -c 'import json,sys; print([v["needs"] for v in json.load(open(sys.argv[1]))["violations"]])' "$tmp/bad.json"))"
echo "rehearsal: passed"
