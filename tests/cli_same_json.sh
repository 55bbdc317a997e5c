#!/usr/bin/env bash
# One run description, three front ends, the same JSON: `tessera sim run --config`, tessera-studio
# --config --json and tessera.sim.simulate(**description) print byte-identical results for a
# description with every simulation field away from its default (a calibration file included).
# They simulate every rank (the studio always does; the CLI and Python when a trace is wanted); the
# CLI's folded run (no trace) gives the same figures, links included; only simulated_as and
# simulated_ranks differ.
#   tests/cli_same_json.sh <tessera> <tessera-studio or none> <python module dir or none>
set -euo pipefail
bin=$1 studio=$2 pydir=$3
tmp=$(mktemp -d)
trap "rm -rf \"$tmp\"" EXIT

"$bin" calibrate --quick --ranks 2 --out "$tmp/cal.json" >/dev/null
cat >"$tmp/spec.json" <<JSON
{"model": "regnety-400mf", "input": "3x64x128", "batch": 4, "mesh": "dp=2,sp=2", "shard": "H",
 "checkpointing": "block", "optimizer": "sgd", "task": "segment", "classes": 7, "dtype": "f64",
 "overlap": false, "bucket_mib": 2, "topology": "cpu-host:4", "device": "cpu-host",
 "calibration": "$tmp/cal.json", "tf32": true}
JSON

"$bin" sim run --config "$tmp/spec.json" --json --trace "$tmp/cli_trace.json" >"$tmp/cli.json"
"$bin" sim run --config "$tmp/spec.json" --json >"$tmp/cli_folded.json"
# An explicit option overrides the file's field.
"$bin" sim run --config "$tmp/spec.json" --mesh dp=2,sp=1 --json >"$tmp/cli_override.json"
# Without the calibration the figures differ (it was applied).
grep -v '"calibration"' "$tmp/spec.json" | sed 's/"tf32": true}/}/; s/"device": "cpu-host",$/"device": "cpu-host"}/' >"$tmp/uncal.json"
"$bin" sim run --config "$tmp/uncal.json" --tf32 --json >"$tmp/cli_uncal.json"

same() {  # same <file> <what>
  if cmp -s "$tmp/cli.json" "$1"; then echo "cli_same_json: $2 == tessera sim run (byte for byte)"; return; fi
  echo "FAIL: $2 differs from tessera sim run --config --json:"; diff "$tmp/cli.json" "$1" | head -40; exit 1
}
if [ "$studio" != none ]; then
  QT_QPA_PLATFORM=offscreen "$studio" --config "$tmp/spec.json" --json 2>/dev/null >"$tmp/studio.json"
  same "$tmp/studio.json" "tessera-studio --config --json"
else
  echo "cli_same_json: no studio in this build (Qt 6 not found): studio part not run"
fi
if [ "$pydir" != none ]; then
  PYTHONPATH="$pydir" python3 -c '
import json, sys, tessera
print(tessera.sim.simulate(trace=True, **json.load(open(sys.argv[1]))).to_json())' "$tmp/spec.json" >"$tmp/python.json"
  same "$tmp/python.json" "tessera.sim.simulate(**description)"
else
  echo "cli_same_json: no Python module in this build: Python part not run"
fi

python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
every, folded = json.load(open(f"{tmp}/cli.json")), json.load(open(f"{tmp}/cli_folded.json"))
spec = json.load(open(f"{tmp}/spec.json"))
assert every["mesh"] == "dp=2,sp=2" and every["topology"] == "cpu-host:4" and len(every["devices"]) == 4, every
assert all(d["device"] == "cpu-host" for d in every["devices"])
assert every["model"].startswith("regnety"), every["model"]
# Folding changes no time, memory or link figure (the unsimulated ranks' halo transfers and
# collectives are counted on their own links), only which rank each device was simulated as.
def strip(r):
    r = {k: v for k, v in r.items() if k != "simulated_ranks"}
    r["devices"] = [{x: y for x, y in d.items() if x != "simulated_as"} for d in r["devices"]]
    return r
assert strip(every) == strip(folded), "folded != every rank"
assert every["links"] == folded["links"], "folded links != every rank's"
assert len({l["from"] for l in every["links"]}) == 5, every["links"]  # the 4 cpus and the memory
assert folded["simulated_ranks"] < every["simulated_ranks"] == 4, (folded["simulated_ranks"], every["simulated_ranks"])
assert json.load(open(f"{tmp}/cli_override.json"))["mesh"] == "dp=2,sp=1"
uncal = json.load(open(f"{tmp}/cli_uncal.json"))
assert uncal["iteration_time_s"] != every["iteration_time_s"], "the calibration changed nothing"
print(f"cli_same_json: {every['model']} {every['mesh']} on {every['topology']}: "
      f"{every['iteration_time_s']*1e3:.3f} ms; folded == every rank; --mesh overrides --config")
PY
