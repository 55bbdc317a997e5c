#!/usr/bin/env bash
# `tessera backends` says which kernels the cpu backend runs: oneDNN's version, the ISA it
# dispatches to and its implementation per dtype (or why not), and Auto's convolution path per
# class and dtype, in the text and in --json; with TESSERA_CPU_ONEDNN=0 it says the path is off,
# and with oneDNN capped at AVX2 (ONEDNN_MAX_CPU_ISA) why bf16 does not run on it.
# The CPU's own flags (/proc/cpuinfo) are the independent check of the bf16 verdict.
#   tests/cli_backends_kernels.sh <tessera binary>
set -euo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
fail() { echo "FAIL: $*"; exit 1; }

# check.py JSON TEXT MODE: the JSON's cpu_kernels against the CPU's flags and the text's lines.
cat >"$tmp/check.py" <<'PY'
import json, re, sys
listing, text, mode = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), sys.argv[3]
def need(cond, what):
    if not cond:
        sys.exit(f"FAIL ({mode}): {what}\n--- text:\n{text}")
k = listing["cpu_kernels"]
o = k["onednn"]
for f in ("built", "version", "isa", "f32", "bf16", "impl_f32", "impl_bf16", "why_not_f32", "why_not_bf16"):
    need(f in o, f"cpu_kernels.onednn has no '{f}'")
need([c["name"] for c in listing["compute"]][0] == "cpu", "compute[] does not start with cpu")
paths = k["conv_paths"]
need(sorted(paths) == ["dense/strided", "depthwise", "patchify", "pointwise"], f"conv_paths classes: {sorted(paths)}")
for cls, by in paths.items():
    need(sorted(by) == ["bf16", "f16", "f32", "f64"], f"{cls}: dtypes {sorted(by)}")
    line = re.search(r"\n +" + re.escape(cls) + r": +(.*)\n", text)
    need(line, f"no text line for {cls}")
    for dt, path in by.items():  # "f32, bf16: oneDNN gemm:jit; f16: ..." names each dtype with its path
        need(re.search(r"(^|; )([a-z0-9]+, )*" + dt + r"(, [a-z0-9]+)*: " + re.escape(path) + r"(;|$)",
                       line.group(1)), f"{cls} line lacks '{dt}: {path}': {line.group(1)}")
need(paths["depthwise"]["f32"] == "tessera row kernels", "depthwise f32 is not on the row kernels")
need(paths["dense/strided"]["f64"] == "im2col + Eigen GEMM", "dense f64 is not im2col + Eigen GEMM")
need(paths["pointwise"]["f64"] == "Eigen GEMM", "pointwise f64 is not on Eigen GEMM")
need("widened to f32" in paths["pointwise"]["f16"], "pointwise f16 does not say it is widened to f32")
need(re.search(r"\n +other ops: " + re.escape(k["other_ops"]) + "\n", text), "no 'other ops' line")
if not o["built"]:
    need("kernels: no oneDNN: built without oneDNN" in text, "not built, and the text does not say so")
    need(not o["f32"] and not o["bf16"], "not built, yet a dtype runs on oneDNN")
    sys.exit(0)
need(re.fullmatch(r"\d+\.\d+\.\d+", o["version"]), f"version '{o['version']}'")
need(o["isa"] and o["isa"] != "unknown", f"isa '{o['isa']}'")
head = f"kernels: oneDNN {o['version']}, ISA {o['isa']}"
need(head in text, f"the text lacks '{head}'")
if mode == "off":
    need(not o["f32"] and not o["bf16"], "switched off, yet a dtype runs on oneDNN")
    need("switched off by TESSERA_CPU_ONEDNN=0" in o["why_not_f32"], f"why_not_f32: {o['why_not_f32']}")
    need(head + ", not used: switched off by TESSERA_CPU_ONEDNN=0" in text, "the text does not say it is switched off")
    need(paths["pointwise"]["f32"] == "Eigen GEMM", "switched off, yet pointwise f32 is not on Eigen GEMM")
    need(paths["patchify"]["f32"] == "im2col + Eigen GEMM", "switched off, yet patchify f32 is not on im2col")
    sys.exit(0)
need(o["f32"] and o["impl_f32"] and not o["impl_f32"].startswith("ref"), f"f32 on oneDNN: {o}")
need(paths["pointwise"]["f32"] == "oneDNN " + o["impl_f32"], "pointwise f32 is not on oneDNN's implementation")
need(paths["patchify"]["f32"] == "oneDNN " + o["impl_f32"], "patchify f32 is not on oneDNN's implementation")
need(f"pointwise f32 {o['impl_f32']}" in text, "the text does not name the f32 implementation")
if mode == "avx2":  # oneDNN capped below the bf16 instructions by its own variable
    need(o["isa"] == "avx2" and not o["bf16"] and "no bf16 matrix product" in o["why_not_bf16"], f"capped: {o}")
    need(f", bf16 not on oneDNN: {o['why_not_bf16']}" in text, "capped, and the text does not say why not bf16")
    need(paths["pointwise"]["bf16"] == "Eigen GEMM (widened to f32)", "capped, yet pointwise bf16 is not widened")
    sys.exit(0)
flags = re.search(r"^flags\s*:(.*)$", open("/proc/cpuinfo").read(), re.M)
flags = flags.group(1).split() if flags else []
cpu_bf16 = "avx512_bf16" in flags or "amx_bf16" in flags
need(o["bf16"] == cpu_bf16, f"bf16 on oneDNN is {o['bf16']}, the CPU's flags say {cpu_bf16}")
if cpu_bf16:
    need(o["impl_bf16"] and f", bf16 {o['impl_bf16']}" in text, "the text does not name the bf16 implementation")
    need("bf16 convolutions on the CPU's bf16 instructions" in text, "the text does not say bf16 runs on bf16 instructions")
else:
    need(o["why_not_bf16"] and f"bf16 not on oneDNN: {o['why_not_bf16']}" in text, "no why_not_bf16 in the text")
PY

run_case() {  # run_case MODE [ENV...]: text and JSON of `tessera backends` under ENV, checked
  local mode=$1; shift
  env "$@" "$bin" backends >"$tmp/$mode.txt" || fail "tessera backends ($mode) exited $?"
  env "$@" "$bin" backends --json >"$tmp/$mode.json" || fail "tessera backends --json ($mode) exited $?"
  python3 "$tmp/check.py" "$tmp/$mode.json" "$tmp/$mode.txt" "$mode"
}
# The probe's limit on oneDNN's ISA would make the CPU's flags the wrong reference.
run_case on -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA -u TESSERA_CPU_ONEDNN
run_case off -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA TESSERA_CPU_ONEDNN=0
# oneDNN limited to AVX2 (where the CPU has it): no bf16 instructions, so bf16 says why not.
if grep -qw avx2 /proc/cpuinfo; then
  run_case avx2 -u DNNL_MAX_CPU_ISA -u TESSERA_CPU_ONEDNN ONEDNN_MAX_CPU_ISA=AVX2
fi
echo "backends kernels: ok"
