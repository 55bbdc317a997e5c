#!/usr/bin/env bash
# End to end through the command line: `tessera sim run` (text, --json, --trace; the folded
# simulation equals the every-rank one that a trace forces; --engine fast equals --engine exact),
# `sim collective` against its closed
# form, `sim memory`, `tessera plan` (sorted, a memory cap that leaves only checkpointed rows,
# precision and gradient compression as dimensions),
# and bad options refused with a message and a non-zero exit, never a crash.
#   tests/cli_sim.sh <tessera binary> <source dir>
set -euo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

run=(sim run --model "$src/examples/convnext-mini.json" --input 3x64x512 --batch 2 --classes 6 --topology dgx-a100)
"$bin" "${run[@]}" --mesh dp=2,sp=4 >"$tmp/run.txt"
"$bin" "${run[@]}" --mesh dp=2,sp=4 --json >"$tmp/run.json"
"$bin" "${run[@]}" --mesh dp=2,sp=4 --json --trace "$tmp/trace.json" >"$tmp/run_traced.json"
"$bin" "${run[@]}" --mesh sp=1 --json >"$tmp/one.json"
"$bin" sim collective --op all_reduce --bytes 64MiB --topology dgx-a100 --algorithm ring --json >"$tmp/coll.json"
"$bin" sim memory --model convnext-t --batch 2 --inputs 3x256x512 --sp 4 >"$tmp/memory.txt"
"$bin" plan --model "$src/examples/convnext-mini.json" --input 3x64x512 --batch 4 --classes 6 \
  --topology dgx-a100 --devices 4 --exhaustive --json >"$tmp/plan.json"
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
assert run["links"] == traced["links"], "folded links != every rank's"
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
# These plans are --exhaustive: the checks read every row's simulated figures and exact memory.
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
                      "--memory-cap", str(cap), "--exhaustive", "--json"], check=True, capture_output=True, text=True).stdout
capped = json.loads(out)["configurations"]
fitting = [r for r in capped if r["fits"]]
assert fitting and all(r["checkpointing"] != "none" for r in fitting), fitting
assert all(r["peak_memory_bytes"] <= cap for r in fitting)
print(f"cli_sim: a {cap/1e9:.3f} GB cap leaves {len(fitting)} checkpointed rows fitting")
# Precision is a dimension: --precisions fp32,bf16 doubles the rows, each bf16 row has less
# activation memory than its fp32 twin, and the fp32 rows are those of the fp32-only plan.
out = subprocess.run([bin, "plan", "--model", f"{src}/examples/convnext-mini.json", "--input", "3x64x512",
                      "--batch", "4", "--classes", "6", "--topology", "dgx-a100", "--devices", "4",
                      "--precisions", "fp32,bf16", "--exhaustive", "--json"], check=True, capture_output=True, text=True).stdout
both = json.loads(out)["configurations"]
assert {r["precision"] for r in rows} == {"fp32"}, rows
assert len(both) == 2 * len(rows), (len(both), len(rows))
key = lambda r: (r["mesh"], r["shard"], r["checkpointing"])
fp32 = {key(r): r for r in both if r["precision"] == "fp32"}
assert fp32 == {key(r): r for r in rows}, "fp32 rows differ from the fp32-only plan"
for r in both:
    if r["precision"] == "bf16":
        assert r["activation_peak_bytes"] < fp32[key(r)]["activation_peak_bytes"], r
print(f"cli_sim: --precisions fp32,bf16 plans {len(both)} rows, bf16 activations below fp32's")
# Gradient compression is a dimension: on 4 cpu ranks through shared memory every row comes dense
# and with top-k, the verdict counts the top-k rows that are faster (none here: its kernels cost
# more than the bytes it saves), and the table says so; on a GPU top-k is skipped once.
out = subprocess.run([bin, "plan", "--model", f"{src}/examples/convnext-mini.json", "--input", "3x64x512",
                      "--batch", "4", "--classes", "6", "--topology", "cpu-host:4", "--checkpointing", "none",
                      "--compressions", "none,topk", "--exhaustive", "--json"], check=True, capture_output=True, text=True).stdout
plan = json.loads(out)
rows, v = plan["configurations"], plan["compression_verdict"]
dense = {key(r): r for r in rows if r["compression"] == "none"}
topk = {key(r): r for r in rows if r["compression"] == "topk"}
assert dense and dense.keys() == topk.keys(), rows
faster = sum(topk[k]["iteration_time_s"] < dense[k]["iteration_time_s"] for k in dense)
assert v["compared"] == len(dense) and v["topk_faster"] == faster == 0 and v["worst_saving"] <= v["best_saving"] < 0, v
assert all(topk[k]["compute_busy_s"] > dense[k]["compute_busy_s"] for k in dense), "top-k's kernels are not timed"
assert rows[v["best_dense"]]["compression"] == "none" and rows[v["best_topk"]]["compression"] == "topk", v
text = subprocess.run([bin, "plan", "--model", f"{src}/examples/convnext-mini.json", "--input", "3x64x512",
                       "--batch", "4", "--classes", "6", "--topology", "cpu-host:4", "--checkpointing", "none",
                       "--compressions", "none,topk", "--exhaustive"], check=True, capture_output=True, text=True).stdout
assert f"faster in 0 of {len(dense)} configurations" in text and "verdict: top-k does not pay here" in text, text
gpu = subprocess.run([bin, "plan", "--model", f"{src}/examples/convnext-mini.json", "--input", "3x64x512",
                      "--batch", "4", "--classes", "6", "--topology", "dgx-a100", "--devices", "4",
                      "--checkpointing", "none", "--compressions", "none,topk", "--json"],
                     check=True, capture_output=True, text=True).stdout
gpu = json.loads(gpu)
assert {r["compression"] for r in gpu["configurations"]} == {"none"} and "compression_verdict" not in gpu, gpu
assert [s["compression"] for s in gpu["skipped"]].count("topk") == 1, gpu["skipped"]
print(f"cli_sim: --compressions none,topk: {len(dense)} rows each way on cpu-host:4, top-k faster in none; "
      "skipped once on a GPU")
PY

# sim compare: a measured trace beside its simulation, simulated on the spot or from a sim run trace
# file; both give the same simulated figures, the phases are all there, and another mesh is flagged.
tiny=(--model convnext-atto --input 3x32x64 --batch 1 --task classify --classes 12)
"$bin" train "${tiny[@]}" --mesh sp=2 --steps 2 --threads 1 --trace "$tmp/measured.json" >/dev/null
"$bin" sim compare --measured "$tmp/measured.json" "${tiny[@]}" --mesh sp=2 --topology cpu-host:2 --json >"$tmp/cmp.json"
"$bin" sim run "${tiny[@]}" --mesh sp=2 --topology cpu-host:2 --trace "$tmp/sim_trace.json" >/dev/null
"$bin" sim compare --measured "$tmp/measured.json" --simulated "$tmp/sim_trace.json" --json >"$tmp/cmp_file.json"
"$bin" sim compare --measured "$tmp/measured.json" --simulated "$tmp/sim_trace.json" >"$tmp/cmp.txt"
"$bin" sim compare --measured "$tmp/measured.json" "${tiny[@]}" --mesh sp=1 --topology cpu-host:2 --json >"$tmp/cmp_other.json"
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
a, b = json.load(open(f"{tmp}/cmp.json")), json.load(open(f"{tmp}/cmp_file.json"))
labels = [r["label"] for r in a["rows"]]
assert labels[:6] == ["iteration", "forward", "backward", "optimizer", "halo exchange", "collectives"], labels
assert a["mismatch"] == "" and b["mismatch"] == "", (a["mismatch"], b["mismatch"])
# The trace file holds times in whole nanoseconds: equal up to that rounding.
assert [(r["label"], r["measured_us"]) for r in a["rows"]] == [(r["label"], r["measured_us"]) for r in b["rows"]]
assert all(abs(x["simulated_us"] - y["simulated_us"]) <= 1e-4 * x["simulated_us"] + 0.05 for x, y in zip(a["rows"], b["rows"])), (a["rows"], b["rows"])
assert a["measured"]["steps"] == 2 and a["measured"]["ranks"] == 2 and a["simulated"]["steps"] == 1
assert all(r["measured_us"] > 0 and r["simulated_us"] > 0 for r in a["rows"][:6]), a["rows"]
assert "mesh sp=2 vs sp=1" in json.load(open(f"{tmp}/cmp_other.json"))["mismatch"]
assert "halo exchange" in open(f"{tmp}/cmp.txt").read()
print("cli_sim: sim compare gives the same rows from a simulation and from its trace file")
PY

# --engine: the fast engine (the default: one slab per kind, symmetric routes and collective
# groups) and the exact reference (every rank, route and group) give the same iteration time on a
# folded two-host run; the fast one simulates fewer ranks.
two=(sim run --model "$src/examples/convnext-mini.json" --input 3x64x512 --batch 4 --classes 6 \
  --topology dgx-a100:2 --mesh dp=4,sp=4 --json)
"$bin" "${two[@]}" --engine fast >"$tmp/engine_fast.json"
"$bin" "${two[@]}" --engine exact >"$tmp/engine_exact.json"
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
fast, exact = json.load(open(f"{tmp}/engine_fast.json")), json.load(open(f"{tmp}/engine_exact.json"))
assert fast["iteration_ps"] == exact["iteration_ps"], (fast["iteration_ps"], exact["iteration_ps"])
assert exact["simulated_ranks"] == 16 and fast["simulated_ranks"] < 16, (fast["simulated_ranks"], exact["simulated_ranks"])
print(f"cli_sim: --engine fast == exact ({fast['iteration_time_s']*1e3:.3f} ms), "
      f"{fast['simulated_ranks']} of 16 ranks simulated by fast")
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
expect_fail "precision 'fp8'" plan --precisions fp32,fp8 --devices 4
expect_fail "compression 'zip'" plan --compressions none,zip --topology cpu-host:2
expect_fail "a GPU" plan --compressions topk --devices 4
expect_fail "no-such.json" sim compare --measured "$tmp/no-such.json"
printf '{"mesh": 4}' >"$tmp/bad_spec.json"
expect_fail 'field "mesh" must be a string' sim run --config "$tmp/bad_spec.json"
expect_fail "input '3x5': expected three positive sizes CxHxW" sim run --input 3x5
expect_fail "engine 'bogus': expected one of: fast, exact" sim run --engine bogus --mesh sp=2
echo "cli_sim: bad options refused with clear messages"
