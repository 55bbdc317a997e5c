#!/usr/bin/env bash
# The one prepared GPU check (issue 17; tests/gpu/README.md): on a machine with a CUDA GPU, the
# CUDA toolkit with cuDNN and NCCL (/usr/local/cuda) and PyTorch with CUDA, it builds tessera with
# CUDA, runs the gpu-labelled tests (cuda compute backend, conformance.cuda.*, gpu training, nccl,
# ucx CUDA staging), the GPU benchmarks beside PyTorch, the GPU calibration and the simulator
# against the measured step, sharded training on the GPU, the mixed-precision (bf16) cases, bench
# and training run beside fp32 and PyTorch AMP, and compute-sanitizer memcheck over the cuda
# conformance suite. Every stage runs under `timeout` within one time budget (default 470 s,
# build included); a stage that fails or times out does not stop the next. Everything is written
# into OUT: logs/, the figures (JSON), and summary.json with each stage's exit status and time.
#   tests/gpu/run_gpu_checks.sh [OUT]          (OUT also from $OUT; default ./gpu-check-out)
# Environment: BUILD_DIR (default build-gpu), JOBS (default nproc), BUDGET_S (default 470),
# CUDA_ARCH (default 90: this machine's H200 only), SKIP_BUILD=1 (use BUILD_DIR as it is),
# NCCL_DEBUG (passed through). Exit status: 0 when every stage that ran passed, else 1.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-$here/gpu-check-out}}
build=${BUILD_DIR:-$here/build-gpu}
jobs=${JOBS:-$(nproc)}
budget=${BUDGET_S:-470}
cuda_arch=${CUDA_ARCH:-90}
case $build in /*) ;; *) build=$here/$build ;; esac
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
cd "$here" || exit 2
t_start=$(date +%s)

# ---- stage bookkeeping -------------------------------------------------------------------------
stage_json=()  # one JSON object per stage, for summary.json
failed=0

remaining() { echo $((budget - ($(date +%s) - t_start))); }

json_str() {  # a JSON string literal of $1
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/ }
  s=${s//$'\t'/ }
  printf '"%s"' "$s"
}

record() {  # name status rc seconds note
  stage_json+=("{\"name\": $(json_str "$1"), \"status\": $(json_str "$2"), \"rc\": $3, \"seconds\": $4, \"log\": $(json_str "logs/$1.log"), \"note\": $(json_str "$5")}")
  printf '== %-22s %-8s rc=%-4s %4ss %s\n' "$1" "$2" "$3" "$4" "$5"
  write_summary
}

# stage NAME CAP_S MIN_S STDOUT_FILE CMD...: runs CMD under timeout min(CAP_S, time left - 5);
# skipped when less than MIN_S is left. STDOUT_FILE "-" sends stdout to the stage log too.
stage() {
  local name=$1 cap=$2 min=$3 file=$4
  shift 4
  local left limit rc t0 t1 status note=""
  left=$(remaining)
  if [ "$left" -lt "$min" ]; then
    record "$name" skipped -1 0 "no time left (${left} s of the ${budget} s budget; needs ${min} s)"
    return 0
  fi
  limit=$((left - 5 < cap ? left - 5 : cap))
  echo "== $name (limit ${limit} s): $*"
  t0=$(date +%s)
  if [ "$file" = - ]; then
    timeout -k 10 "$limit" "$@" >"$out/logs/$name.log" 2>&1
  else
    timeout -k 10 "$limit" "$@" >"$file" 2>"$out/logs/$name.log"
  fi
  rc=$?
  t1=$(date +%s)
  if [ "$rc" -eq 0 ]; then
    status=ok
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status=timeout note="killed after ${limit} s"
    failed=1
  else
    status=failed
    failed=1
  fi
  tail -n 5 "$out/logs/$name.log" | sed 's/^/   | /'
  record "$name" "$status" "$rc" $((t1 - t0)) "$note"
  return 0
}

skip() {  # name reason
  record "$1" skipped -1 0 "$2"
}

write_summary() {
  local IFS=,
  {
    printf '{"script": "tests/gpu/run_gpu_checks.sh", "started_utc": %s, "budget_s": %s, "elapsed_s": %s,\n' \
      "$(json_str "$(date -u -d "@$t_start" +%Y-%m-%dT%H:%M:%SZ)")" "$budget" $(($(date +%s) - t_start))
    printf ' "build_dir": %s, "figures": %s,\n "stages": [\n  %s\n ]}\n' "$(json_str "$build")" \
      "${figures_json:-null}" "${stage_json[*]}"
  } >"$out/summary.json.tmp" && mv "$out/summary.json.tmp" "$out/summary.json"
}

bin() {  # the built executable named $1 (empty when it was not built)
  find "$build" -type f -name "$1" -perm -u+x 2>/dev/null | head -n1
}

# ---- 1. the machine ----------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null; then
  stage nvidia-smi 20 5 "$out/nvidia-smi.txt" nvidia-smi
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader >"$out/gpus.csv" 2>/dev/null
else
  skip nvidia-smi "nvidia-smi not found; the tests will say whether CUDA sees a device"
fi
python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())' \
  >"$out/torch.txt" 2>&1 || true

# ---- 2. build (lean: no Qt, no Python module, sm_90 only, only the targets below) --------------
targets_wanted="tessera tessera_compute_cuda tessera_comm_nccl tessera_tests_core tessera_tests_cuda
  tessera_tests_gpu tessera_tests_nccl tessera_comm_ucx tessera_tests_ucx_cuda bench_train bench_conv"
if [ "${SKIP_BUILD:-0}" = 1 ]; then
  skip configure "SKIP_BUILD=1"
  skip build "SKIP_BUILD=1"
else
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
      -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  stage configure 120 30 - cmake --preset release -B "$build" -DTESSERA_WITH_CUDA=ON \
    -DTESSERA_WITH_NCCL=ON -DTESSERA_WITH_QT=OFF -DTESSERA_WITH_PYTHON=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="$cuda_arch" "${launcher[@]}"
  # Only the targets this build defines (the ucx ones need UCX, the cuda ones cuDNN).
  targets=()
  known=$(cmake --build "$build" --target help 2>/dev/null)
  for t in $targets_wanted; do
    if grep -q "^$t:" <<<"$known"; then targets+=("$t"); else echo "note: no target $t in $build"; fi
  done
  # -k 0 (Ninja): a target that fails to build does not stop the others.
  if [ "${#targets[@]}" -gt 0 ]; then
    stage build 300 60 - cmake --build "$build" -j"$jobs" --target "${targets[@]}" -- -k 0
  else
    skip build "no target to build (did configure fail? logs/configure.log)"
  fi
fi
tessera=$(bin tessera)
if [ -z "$tessera" ]; then
  skip backends "tessera was not built"
else
  stage backends 30 5 "$out/backends.txt" "$tessera" backends
fi

# ---- 3. the gpu tests --------------------------------------------------------------------------
# Every gpu-labelled test (conformance.cuda.*, cuda.*, gpu.*, nccl.gpu.*, ucx CUDA staging) and the
# nccl plugin's others; a test that cannot run ends skipped with its reason (TESSERA_TEST_SKIPPED).
# The bf16/f16 conformance cases of the cuda backend have their own stage (3b), so they are left
# out here.
half_cases='^conformance\.cuda\..*\.(bf16|f16)$'
stage ctest-gpu 150 20 - ctest --test-dir "$build" -L 'gpu|nccl|cuda' -E "$half_cases" \
  --output-on-failure --timeout 120 --output-junit "$out/ctest-gpu.xml"
cp "$build/Testing/Temporary/LastTest.log" "$out/ctest-gpu-LastTest.log" 2>/dev/null

# ---- 3b. mixed precision (issue 18): the cuda backend's bf16/f16 conformance cases -------------
# cuDNN/cuBLAS in 16 bits with f32 accumulation and the kernels' widen-compute-round path, against
# the float64 references (tests/compute/conformance/).
stage ctest-gpu-half 60 15 - ctest --test-dir "$build" -L gpu -R "$half_cases" \
  --output-on-failure --timeout 60 --output-junit "$out/ctest-gpu-half.xml"

# ---- 4. the benchmarks beside PyTorch (bench/README.md) ----------------------------------------
bench_train=$(bin bench_train)
bench_conv=$(bin bench_conv)
if [ -n "$bench_train" ]; then
  stage bench_train_convnext-t 150 40 "$out/bench_train_cuda_convnext-t_3x512x2048_b2.json" \
    "$bench_train" --device cuda --json --model convnext-t --input 3x512x2048 --batch 2 --steps 5 --warmup 2
  # bf16 beside it (issue 18): tessera --precision bf16 against PyTorch AMP bf16 (torch.autocast,
  # bench/torch_gpu_peer.py --precision bf16) on the same model, input and batch; fewer steps to
  # keep the budget.
  stage bench_train_convnext-t_bf16 120 40 "$out/bench_train_cuda_convnext-t_3x512x2048_b2_bf16.json" \
    "$bench_train" --device cuda --json --precision bf16 --model convnext-t --input 3x512x2048 \
    --batch 2 --steps 3 --warmup 1
  stage bench_train_convnext-b 120 40 "$out/bench_train_cuda_convnext-b_3x512x1024_b2.json" \
    "$bench_train" --device cuda --json --model convnext-b --input 3x512x1024 --batch 2 --steps 5 --warmup 2
else
  skip bench_train_convnext-t "bench_train was not built"
  skip bench_train_convnext-t_bf16 "bench_train was not built"
  skip bench_train_convnext-b "bench_train was not built"
fi
if [ -n "$bench_conv" ]; then
  stage bench_conv 90 30 "$out/bench_conv_cuda.json" "$bench_conv" --device cuda --json
else
  skip bench_conv "bench_conv was not built"
fi

# ---- 5. calibration and the simulator against the measured step -------------------------------
calibration="$out/calibration-gpu.json"
if [ -n "$tessera" ]; then
  stage calibrate 150 45 - "$tessera" calibrate --device cuda --out "$calibration"
  if [ ! -f "$calibration" ] && [ "$(remaining)" -ge 40 ]; then  # the full one ran out of time
    stage calibrate-quick 60 30 - "$tessera" calibrate --device cuda --quick --out "$calibration"
  fi
  if [ -f "$calibration" ]; then
    stage sim_run_convnext-t 40 10 "$out/sim_run_convnext-t_3x512x2048_b2.json" "$tessera" sim run \
      --topology hgx-h200 --device h200 --calibration "$calibration" --model convnext-t \
      --input 3x512x2048 --batch 2 --classes 4 --mesh sp=1 --json
    stage sim_run_convnext-b 40 10 "$out/sim_run_convnext-b_3x512x1024_b2.json" "$tessera" sim run \
      --topology hgx-h200 --device h200 --calibration "$calibration" --model convnext-b \
      --input 3x512x1024 --batch 2 --classes 4 --mesh sp=1 --json
  else
    skip sim_run_convnext-t "no calibration file"
    skip sim_run_convnext-b "no calibration file"
  fi
else
  skip calibrate "tessera was not built"
fi
# The simulation's error against the measured step, sign included: (simulated - measured) /
# measured, > 0 when the simulator predicts a slower step than the GPU ran.
figures_json=$(python3 - "$out" <<'EOF' 2>>"$out/logs/figures.log"
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except Exception as e:
        return {"error": f"{name}: {e}"}
fig = {}
for model, shape in (("convnext-t", "3x512x2048"), ("convnext-b", "3x512x1024")):
    b = load(f"bench_train_cuda_{model}_{shape}_b2.json")
    s = load(f"sim_run_{model}_{shape}_b2.json")
    row = {"input": shape, "batch": 2}
    t = b.get("tessera") or {}
    if "step_ms_median" in t:
        row["tessera_step_ms"] = t["step_ms_median"]
        row["tessera_peak_mib"] = t.get("peak_total_mib")
        row["tessera_reserved_mib"] = t.get("peak_reserved_mib")
    row["tessera_over_torch"] = b.get("tessera_over_torch")
    if b.get("peer"):
        row["peer"] = b["peer"]
    if "error" in b:
        row["bench_error"] = b["error"]
    if "iteration_time_s" in s and "step_ms_median" in t:
        sim_ms = 1e3 * s["iteration_time_s"]
        row["sim_step_ms"] = sim_ms
        row["sim_error"] = (sim_ms - t["step_ms_median"]) / t["step_ms_median"]
    elif "error" in s:
        row["sim_error_reason"] = s["error"]
    fig[model] = row
# bf16 (issue 18): tessera bf16 vs PyTorch AMP bf16, and vs tessera's own fp32 step.
b16 = load("bench_train_cuda_convnext-t_3x512x2048_b2_bf16.json")
t16 = b16.get("tessera") or {}
row = {"input": "3x512x2048", "batch": 2, "precision": "bf16",
       "tessera_step_ms": t16.get("step_ms_median"), "tessera_peak_mib": t16.get("peak_total_mib"),
       "tessera_reserved_mib": t16.get("peak_reserved_mib"),
       "tessera_over_torch_amp": b16.get("tessera_over_torch"), "peer": b16.get("peer")}
fp32_ms = (fig.get("convnext-t") or {}).get("tessera_step_ms")
if t16.get("step_ms_median") and fp32_ms:
    row["bf16_over_fp32_step"] = t16["step_ms_median"] / fp32_ms
fp32_peak = (fig.get("convnext-t") or {}).get("tessera_peak_mib")
if t16.get("peak_total_mib") and fp32_peak:
    row["bf16_over_fp32_peak"] = t16["peak_total_mib"] / fp32_peak
if "error" in b16:
    row["bench_error"] = b16["error"]
fig["convnext-t_bf16"] = row
c = load("bench_conv_cuda.json")
for r in c.get("results", []):
    if r.get("layer") == "dw7x7_p3" and r.get("pass") == "fwd+bwd":
        fig["dw7x7_fwd_bwd"] = {k: r.get(k) for k in
                                ("ms_median", "gb_per_s", "share_of_copy_bw", "tessera_over_torch")}
        fig["dw7x7_fwd_bwd"]["copy_gb_per_s"] = (c.get("copy_bandwidth") or {}).get("gb_per_s")
        fig["dw7x7_fwd_bwd"]["target_share"] = 0.7
print(json.dumps(fig))
EOF
) || figures_json=null
[ -n "$figures_json" ] || figures_json=null
write_summary

# ---- 6. sharded training on the one GPU and its simulation -------------------------------------
if [ -n "$tessera" ]; then
  stage train_cuda_sp2 90 30 - "$tessera" train --device cuda --mesh sp=2 --steps 5 \
    --metrics "$out/train_metrics.jsonl" --trace "$out/train_trace.json"
  if [ -f "$out/train_trace.json" ] && [ -f "$calibration" ]; then
    # Two ranks shared one GPU in the measured run; the simulation gives each its own h200.
    stage sim_compare_sp2 40 10 "$out/sim_compare_train_sp2.json" "$tessera" sim compare \
      --measured "$out/train_trace.json" --mesh sp=2 --topology hgx-h200 --device h200 \
      --calibration "$calibration" --json
  else
    skip sim_compare_sp2 "no measured trace or no calibration"
  fi
fi

# ---- 6b. a bf16 training run through the CLI (issue 18), one GPU ------------------------------
if [ -n "$tessera" ]; then
  stage train_cuda_bf16 60 20 - "$tessera" train --device cuda --precision bf16 --steps 5 \
    --metrics "$out/train_bf16_metrics.jsonl"
else
  skip train_cuda_bf16 "tessera was not built"
fi

# ---- 7. compute-sanitizer memcheck over the cuda conformance suite -----------------------------
sanitizer=/usr/local/cuda/bin/compute-sanitizer
command -v compute-sanitizer >/dev/null && sanitizer=$(command -v compute-sanitizer)
tests_core=$(bin tessera_tests_core)
tests_cuda=$(bin tessera_tests_cuda)
if [ ! -x "$sanitizer" ]; then
  skip memcheck "compute-sanitizer not found"
elif [ -n "$tests_core" ] && "$tests_core" --list-test-names-only 2>/dev/null | grep -q '^conformance\.cuda\.'; then
  stage memcheck 90 30 - "$sanitizer" --tool memcheck --error-exitcode 9 --log-file "$out/memcheck.txt" \
    "$tests_core" 'conformance.cuda.*'  # f32/f64 and the bf16/f16 cases
elif [ -n "$tests_cuda" ]; then
  # No conformance.cuda.* cases in this build: the cuda backend's own GPU tests instead.
  stage memcheck 90 30 - "$sanitizer" --tool memcheck --error-exitcode 9 --log-file "$out/memcheck.txt" \
    "$tests_cuda" '[gpu]'
else
  skip memcheck "neither conformance.cuda.* nor tessera_tests_cuda was built"
fi

write_summary
echo "figures and logs in $out (summary.json); $(($(date +%s) - t_start)) s of the ${budget} s budget"
exit "$failed"
