#!/usr/bin/env bash
# The GPU check, run from the bundle that tests/gpu/make_bundle.sh built (tests/gpu/README.md).
#   OUT=<results folder> bash gpu-bundle/run.sh
# Nothing is compiled here. The stages run in priority order, each under its own cap (the caps
# sum to 420 s); a stage that fails or times out does not stop the next. OUT receives exactly two
# files: summary.json (rewritten after every stage) and logs.tar.gz (every log, report and JSON;
# written at the end, and by the EXIT trap if the run is cut short).
# Exit status: 0 every stage passed; 1 a stage failed; 3 no CUDA device visible (the rehearsal on
# a machine without a GPU: every stage up to the first that needs one ran); 2 bad invocation.
set -uo pipefail
B=$(cd "$(dirname "$0")" && pwd)
if [ -z "${OUT:-}" ]; then
  echo "run.sh: set OUT to the folder for the results (OUT=/tmp/out bash $0)" >&2
  exit 2
fi
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-gpu-check.XXXXXX") || exit 2
mkdir -p "$work/logs"
caps_total=420
t_start=$(date +%s)
exit_status=""
failed=0
py() { python3 "$B/share/gpu_summary.py" "$@"; }

meta() {  # run.json: what summary.json says about the run as a whole
  printf '{"started_utc": "%s", "started_epoch": %s, "caps_total_s": %s, "exit_status": %s, "verdict": "%s"}\n' \
    "$(date -u -d "@$t_start" +%Y-%m-%dT%H:%M:%SZ)" "$t_start" "$caps_total" "${exit_status:-null}" "$1" \
    >"$work/run.json"
  py write "$work" "$OUT"
}

pack() {  # logs.tar.gz, under 16 MiB: the largest files are left out (and named) if it is not
  local dropped="" f
  tar -czf "$OUT/.logs.tar.gz.tmp" -C "$work" . 2>/dev/null
  while [ "$(stat -c %s "$OUT/.logs.tar.gz.tmp")" -gt 16000000 ]; do
    f=$(find "$work" -type f -printf '%s %p\n' | sort -n | tail -n1 | cut -d' ' -f2-)
    [ -n "$f" ] || break
    dropped="$dropped ${f#$work/}"
    : >"$f"
    tar -czf "$OUT/.logs.tar.gz.tmp" -C "$work" . 2>/dev/null
  done
  [ -z "$dropped" ] || echo "run.sh: left out of logs.tar.gz (over 16 MiB):$dropped" >&2
  mv "$OUT/.logs.tar.gz.tmp" "$OUT/logs.tar.gz"
}

on_exit() {
  if [ -z "$exit_status" ]; then  # cut short: say so, keep what there is
    exit_status=1
    meta "interrupted after $(($(date +%s) - t_start)) s"
  fi
  pack
  rm -rf "$work"
}
trap on_exit EXIT
trap 'exit 1' INT TERM

# record NAME STATUS RC SECONDS CAP NOTE [JUNIT] [TESTS_IN_LOG]: one line of stages.jsonl, then
# summary.json (TESTS_IN_LOG=1: the log is a Catch2 console run, whose counts summary.json reads)
record() {
  python3 - "$work/stages.jsonl" "$@" <<'EOF'
import json, sys
path, name, status, rc, secs, cap, note = sys.argv[1:8]
junit = sys.argv[8] if len(sys.argv) > 8 else ""
tests_in_log = len(sys.argv) > 9 and sys.argv[9] == "1"
rec = {"name": name, "status": status, "rc": int(rc), "seconds": int(secs), "cap_s": int(cap),
       "note": note, "log": f"logs/{name}.log"}
if junit:
    rec["junit"] = junit
elif tests_in_log:
    rec["tests_in_log"] = True
with open(path, "a") as f:
    f.write(json.dumps(rec) + "\n")
EOF
  printf '== %-18s %-8s rc=%-4s %4ss (cap %ss) %s\n' "$1" "$2" "$3" "$4" "$5" "$6"
  meta "running"
}

# stage NAME CAP [--junit FILE] [--stdout FILE] [--no-skips] -- CMD...: runs CMD under its cap;
# its output goes to logs/NAME.log (stdout to FILE with --stdout). With --no-skips a test that
# reports itself skipped (TESSERA_TEST_SKIPPED) fails the stage: on a machine with a GPU nothing
# the stage runs may skip.
stage() {
  local name=$1 cap=$2 junit="" stdout="" noskip=0
  shift 2
  while [ "$1" != "--" ]; do
    case $1 in
      --junit) junit=$2; shift 2 ;;
      --stdout) stdout=$2; shift 2 ;;
      --no-skips) noskip=1; shift ;;
    esac
  done
  shift
  local log="$work/logs/$name.log" t0 rc status note=""
  echo "== $name (cap ${cap} s): $(head -c 160 <<<"$*" | head -n1 | sed "s|$B/||g")"
  t0=$(date +%s)
  if [ -n "$stdout" ]; then
    timeout -k 5 "$cap" "$@" >"$work/$stdout" 2>"$log"
  else
    timeout -k 5 "$cap" "$@" >"$log" 2>&1
  fi
  rc=$?
  if [ "$rc" -eq 0 ]; then
    status=ok
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status=timeout note="killed at its cap of ${cap} s"
  else
    status=failed
  fi
  if [ "$noskip" = 1 ]; then
    local skips
    skips=$(cat "$log" ${junit:+"$work/$junit"} 2>/dev/null | grep -c 'TESSERA_TEST_SKIPPED')
    if [ "$skips" -gt 0 ]; then
      status=failed
      note="$skips test(s) reported skipped on a machine with a GPU: $(grep -h -m1 -o 'TESSERA_TEST_SKIPPED.*' "$log" ${junit:+"$work/$junit"} 2>/dev/null | head -n1 | cut -c1-200)"
    fi
  fi
  [ "$status" = ok ] || failed=1
  tail -n 3 "$log" | sed 's/^/   | /'
  record "$name" "$status" "$rc" $(($(date +%s) - t0)) "$cap" "$note" "$junit" "$noskip"
}

not_run() {  # NAME CAP REASON
  record "$1" not-run -1 0 "$2" "$3"
}

finish() {  # STATUS VERDICT
  exit_status=$1
  meta "$2"
  echo "run.sh: $2 ($(($(date +%s) - t_start)) s; results in $OUT: summary.json, logs.tar.gz)"
  exit "$1"
}

# ---- 1. probe (5 s): the machine, and where NVIDIA's libraries are ------------------------------
t0=$(date +%s)
libpath=$(timeout 5 python3 "$B/share/gpu_summary.py" probe "$B" "$work" 2>"$work/logs/probe.log")
rc=$?
export LD_LIBRARY_PATH="$B/lib${libpath:+:$libpath}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TESSERA_PLUGIN_PATH="$B/lib/plugins"
export TESSERA_TORCH_GPU_PEER="$B/share/torch_gpu_peer.py"
missing_flags=$(python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1])).get("cpu_flags_missing", [])))' \
  "$work/probe.json" 2>/dev/null)
gpu_visible=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1])).get("gpu_visible", False)))' \
  "$work/probe.json" 2>/dev/null || echo 0)
# The rehearsal's own check of the GPU path (tests/gpu/rehearse.sh): TESSERA_GPU_CHECK_PRETEND_GPU=1
# runs the GPU stages on a machine without one, where each must fail (its tests skip, its benches
# find no device), never pass.
if [ "${TESSERA_GPU_CHECK_PRETEND_GPU:-0}" = 1 ]; then
  gpu_visible=1
  echo "run.sh: TESSERA_GPU_CHECK_PRETEND_GPU=1: running the GPU stages as if a GPU were visible"
fi
if [ ! -s "$work/probe.json" ] &&
  { ls /proc/driver/nvidia/gpus/* || ls /dev/nvidia[0-9]*; } >/dev/null 2>&1; then
  gpu_visible=1  # the probe wrote nothing, but the driver lists a GPU
fi
if [ "$rc" -ne 0 ]; then
  failed=1
  record probe failed "$rc" $(($(date +%s) - t0)) 5 "the probe failed (logs/probe.log)"
elif [ -n "$missing_flags" ]; then
  record probe failed 1 $(($(date +%s) - t0)) 5 "this CPU lacks $missing_flags, which the bundle's x86-64-v3 code needs"
  finish 1 "this CPU cannot run the bundle (it lacks $missing_flags)"
else
  record probe ok 0 $(($(date +%s) - t0)) 5 "library path: ${libpath:-none found}"
fi

# ---- 2. closure (10 s): every ELF file's libraries resolve --------------------------------------
t0=$(date +%s)
timeout 10 python3 "$B/share/bundle_closure.py" "$B" --search "$LD_LIBRARY_PATH" \
  >"$work/closure.json" 2>"$work/logs/closure.log"
rc=$?
note=""
if [ "$rc" -eq 0 ] && command -v ldd >/dev/null; then
  # ldd resolves as the loader will: the wheels' own dependencies too (cuDNN's libz, ...)
  for f in "$B"/bin/* "$B"/lib/*.so* "$B"/lib/plugins/*.so; do
    [ -f "$f" ] || continue
    if ldd "$f" 2>&1 | grep -q 'not found'; then
      echo "${f#$B/}: $(ldd "$f" 2>&1 | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ';')" >>"$work/logs/closure.log"
      rc=1
    fi
  done
  [ "$rc" -eq 0 ] || note="ldd: libraries not found (logs/closure.log)"
fi
if [ "$rc" -eq 0 ]; then
  record closure ok 0 $(($(date +%s) - t0)) 10 "$note"
else
  failed=1
  record closure failed "$rc" $(($(date +%s) - t0)) 10 "${note:-see closure.json}"
fi

# ---- 3. backends (10 s): the cuda plugin loads (and nccl), and what they say of the device -----
# (exit 3, "loads but cannot run here", passes only where nvidia-smi lists no GPU)
backends_check() {
  "$B/bin/tessera" backends --require cuda,nccl
  local rc=$?
  if [ "$rc" -eq 3 ] && [ "$gpu_visible" != 1 ]; then
    echo "run.sh: cuda and nccl load; no CUDA device visible, as nvidia-smi says"
    return 0
  fi
  return "$rc"
}
stage backends 10 -- bash -c "$(declare -f backends_check); B='$B'; gpu_visible='$gpu_visible'; backends_check"
# ---- 3b. the bundled binaries run at all, without a GPU (10 s) ----------------------------------
selftest() {
  "$B/bin/tessera_tests_cuda" '~[gpu]' &&
    "$B/bin/tessera_tests_nccl" '[plugin]' &&
    "$B/bin/bench_train" --help >/dev/null &&
    "$B/bin/bench_conv" --help >/dev/null &&
    "$B/bin/tessera" sim run --model convnext-t --input 3x512x2048 --batch 2 --mesh sp=1 \
      --topology hgx-h200 --device h200 --classes 4 --json >/dev/null
}
stage selftest 10 -- bash -c "$(declare -f selftest); B='$B'; selftest"

# The stages that need a GPU, in order, with their caps (seconds).
gpu_stages="gpu-train:55 conformance:45 cuda-backend:25 bench-train-fp32:55 bench-train-bf16:50
  bench-conv:30 calibrate-sim:45 nccl:25 ucx:25 memcheck:30"
cap() { tr ' ' '\n' <<<"$gpu_stages" | sed -n "s/^$1://p"; }
if [ "$gpu_visible" != 1 ]; then
  for s in $gpu_stages; do not_run "${s%%:*}" "${s##*:}" "no CUDA device visible"; done
  echo "run.sh: no CUDA device visible (nvidia-smi lists none): the stages that need one did not run"
  if [ "$failed" = 0 ]; then
    finish 3 "no CUDA device visible; every stage up to the first that needs one passed"
  else
    finish 1 "no CUDA device visible, and a stage that needs none failed"
  fi
fi

# ---- 4. on the GPU ------------------------------------------------------------------------------
# Test stages print each case's duration as it ends (-d yes), so a stage cut at its cap still
# shows how far it got; the conformance suite writes a JUnit report (one process, 118 cases).
stage gpu-train "$(cap gpu-train)" --no-skips -- "$B/bin/tessera_tests_gpu" '[gpu]' -d yes
stage conformance "$(cap conformance)" --junit conformance-cuda.xml --no-skips -- \
  "$B/bin/tessera_tests_core" '[conformance][gpu]' -r junit -o "$work/conformance-cuda.xml"
stage cuda-backend "$(cap cuda-backend)" --no-skips -- "$B/bin/tessera_tests_cuda" '[gpu]' -d yes
stage bench-train-fp32 "$(cap bench-train-fp32)" --stdout bench_train_fp32.json -- "$B/bin/bench_train" --device cuda \
  --json --model convnext-t --input 3x512x2048 --batch 2 --steps 5 --warmup 2
stage bench-train-bf16 "$(cap bench-train-bf16)" --stdout bench_train_bf16.json -- "$B/bin/bench_train" --device cuda \
  --json --precision bf16 --model convnext-t --input 3x512x2048 --batch 2 --steps 3 --warmup 1
stage bench-conv "$(cap bench-conv)" --stdout bench_conv.json -- "$B/bin/bench_conv" --device cuda --json
calibrate_sim() {
  "$B/bin/tessera" calibrate --device cuda --quick --out "$work/calibration-gpu.json" &&
    "$B/bin/tessera" sim run --topology hgx-h200 --device h200 \
      --calibration "$work/calibration-gpu.json" --model convnext-t --input 3x512x2048 \
      --batch 2 --classes 4 --mesh sp=1 --json >"$work/sim_run.json"
}
stage calibrate-sim "$(cap calibrate-sim)" -- bash -c "$(declare -f calibrate_sim); B='$B'; work='$work'; calibrate_sim"
stage nccl "$(cap nccl)" --no-skips -- "$B/bin/tessera_tests_nccl" '[gpu]' -d yes
if [ -x "$B/bin/tessera_tests_ucx_cuda" ]; then
  stage ucx "$(cap ucx)" --no-skips -- "$B/bin/tessera_tests_ucx_cuda" '[gpu]' -d yes
else
  not_run ucx "$(cap ucx)" "the bundle has no ucx tests (built without UCX)"
fi
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$sanitizer" ]; then
  # A slice of the cuda conformance cases: the convolutions and linear in f32 (cuDNN and cuBLAS
  # with their workspaces), layernorm and the strided copy (our kernels).
  stage memcheck "$(cap memcheck)" -- "$sanitizer" --tool memcheck --error-exitcode 9 \
    --log-file "$work/memcheck.txt" "$B/bin/tessera_tests_core" \
    'conformance.cuda.conv2d_forward.f32,conformance.cuda.conv2d_backward_data.f32,conformance.cuda.linear_forward.f32,conformance.cuda.layernorm_forward.f32,conformance.cuda.copy.f32'
else
  failed=1
  record memcheck failed 127 0 "$(cap memcheck)" "compute-sanitizer not found (PATH, /usr/local/cuda/bin)"
fi

if [ "$failed" = 0 ]; then finish 0 "every stage passed"; else finish 1 "a stage failed (summary.json: stages)"; fi
