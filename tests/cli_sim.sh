#!/usr/bin/env bash
# End to end through the command line: `tessera sim run` (text, --json, --trace; the folded
# simulation equals the every-rank one that a trace forces), `sim collective` against its closed
# form, `sim memory`, `tessera plan` (sorted, a memory cap that leaves only checkpointed rows),
# and bad options refused with a message and a non-zero exit, never a crash.
#   tests/cli_sim.sh <tessera binary> <source dir>
set -euo pipefail
bin=$1
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run=(sim run --model "$src/examples/convnext-mini.json" --input 3x64x512 --batch 2 --classes 6 --topology dgx-a100)
"$bin" "${run[@]}" --mesh dp=2,sp=4 >"$tmp/run.txt"
"$bin" "${run[@]}" --mesh dp=2,sp=4 --json >"$tmp/run.json"
"$bin" "${run[@]}" --mesh dp=2,sp=4 --json --trace "$tmp/trace.json" >"$tmp/run_traced.json"
"$bin" "${run[@]}" --mesh sp=1 --json >"$tmp/one.json"
"$bin" sim collective --op all_reduce --bytes 64MiB --topology dgx-a100 --algorithm ring --json >"$tmp/coll.json"
"$bin" sim memory --model convnext-t --batch 2 --inputs 3x256x512 --sp 4 >"$tmp/memory.txt"
"$bin" plan --model "$src/examples/convnext-mini.json" --input 3x64x512 --batch 4 --classes 6 \
  --topology dgx-a100 --devices 4 --json >"$tmp/plan.json"
"$bin" plan --model "$src/examples/convnext-mini.json" --input 3x64x512 --batch 4 --classes 6 \
  --topology dgx-a100 --devices 4 --top 3 >"$tmp/plan.txt"

python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
text = open(f"{tmp}/run.txt").read()
assert "iteration time" in text and "peak memory per device" in text, text
run = json.load(open(f"{tmp}/run.json"))
traced = json.load(open(f"{tmp}/run_traced.json"))
one = json.load(open(f"{tmp}/one.json"))
devs = run["devices"]
assert len(devs) == 8 and [d["rank"] for d in devs] == list(range(8)), devs
assert [d["coords"] for d in devs[:5]] == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0]], [d["coords"] for d in devs]
cats = {"parameter", "gradient", "optimizer_state", "activation", "halo_buffer", "workspace"}
assert cats <= set(devs[0]["memory_bytes"]), devs[0]["memory_bytes"]
for d in devs:
    assert d["peak_memory_bytes"] >= max(d["memory_bytes"].values()) > 0, d
# Folding (one replay per class, one simulated slab) equals simulating every rank (--trace).
assert run["iteration_time_s"] == traced["iteration_time_s"], (run["iteration_time_s"], traced["iteration_time_s"])
for a, b in zip(devs, traced["devices"]):
    assert a["peak_memory_bytes"] == b["peak_memory_bytes"] and a["memory_bytes"] == b["memory_bytes"], (a, b)
# Four-way sharding holds less activation memory per rank than one rank with the same per-replica batch.
assert devs[0]["memory_bytes"]["activation"] < one["devices"][0]["memory_bytes"]["activation"] / 2
assert devs[0]["memory_bytes"]["halo_buffer"] > 0 and one["devices"][0]["memory_bytes"]["halo_buffer"] == 0
trace = json.load(open(f"{tmp}/trace.json"))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
assert {e["pid"] for e in events if e.get("ph") == "X"} == set(range(8)), "a lane per device"
# Ring all-reduce on 8 GPUs: busbw = algbw · 2(p−1)/p, GB = 1e9 bytes.
coll = json.load(open(f"{tmp}/coll.json"))
n, p = 64 * 2**20, 8
assert abs(coll["algbw_GBps"] - n / coll["time_s"] / 1e9) < 1e-3 * coll["algbw_GBps"], coll
assert abs(coll["busbw_GBps"] - coll["algbw_GBps"] * 2 * (p - 1) / p) < 1e-3 * coll["busbw_GBps"], coll
mem = open(f"{tmp}/memory.txt").read()
assert "3x256x512" in mem and "sp=4" in mem, mem
plan = json.load(open(f"{tmp}/plan.json"))
rows = plan["configurations"]
times = [r["iteration_time_s"] for r in rows]
assert times == sorted(times) and len(rows) >= 6, times
assert {r["mesh"] for r in rows} >= {"dp=4", "sp=4", "dp=2,sp=2"}, {r["mesh"] for r in rows}
assert plan["best_fit"] == next(i for i, r in enumerate(rows) if r["fits"]), plan["best_fit"]
assert "fastest that fits" in open(f"{tmp}/plan.txt").read()
print(f"cli_sim: sim run folded == every rank ({run['iteration_time_s']*1e3:.3f} ms), "
      f"collective busbw {coll['busbw_GBps']:.1f} GB/s, plan {len(rows)} rows sorted")
PY

# A memory cap between the checkpointed and the plain peak leaves only checkpointed rows fitting.
python3 - "$tmp" "$bin" "$src" <<'PY'
import json, subprocess, sys
tmp, bin, src = sys.argv[1:]
rows = json.load(open(f"{tmp}/plan.json"))["configurations"]
plain = min(r["peak_memory_bytes"] for r in rows if r["checkpointing"] == "none")
ckpt = min(r["peak_memory_bytes"] for r in rows if r["checkpointing"] != "none")
assert ckpt < plain, (ckpt, plain)
cap = (ckpt + plain) // 2
out = subprocess.run([bin, "plan", "--model", f"{src}/examples/convnext-mini.json", "--input", "3x64x512",
                      "--batch", "4", "--classes", "6", "--topology", "dgx-a100", "--devices", "4",
                      "--memory-cap", str(cap), "--json"], check=True, capture_output=True, text=True).stdout
capped = json.loads(out)["configurations"]
fitting = [r for r in capped if r["fits"]]
assert fitting and all(r["checkpointing"] != "none" for r in fitting), fitting
assert all(r["peak_memory_bytes"] <= cap for r in fitting)
print(f"cli_sim: a {cap/1e9:.3f} GB cap leaves {len(fitting)} checkpointed rows fitting")
PY

# Bad input: a clear message, exit status 1 or 2, no core dump (expect_fail: cli_common.sh).
expect_fail "dgx-a100" sim run --topology dgx-a10 --mesh sp=2
expect_fail "ranks" sim run --topology dgx-a100 --mesh sp=16
expect_fail "no-such" sim run --topology dgx-a100 --device no-such --mesh sp=2
printf '{"nodes": [' >"$tmp/bad_topo.json"
expect_fail "$tmp/bad_topo.json" sim run --topology "$tmp/bad_topo.json" --mesh sp=2
expect_fail "ring" sim collective --op all_reduce --bytes 1MiB --topology dgx-a100 --algorithm rings
expect_fail "byte size \"lots\"" sim collective --op all_reduce --bytes lots --topology dgx-a100
expect_fail "W, H" plan --shards Q --devices 4
echo "cli_sim: bad options refused with clear messages"
