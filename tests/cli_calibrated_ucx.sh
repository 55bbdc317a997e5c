#!/usr/bin/env bash
# The calibrated simulator against measured ucx runs: `tessera calibrate --backend ucx` under
# `tessera launch --nproc 2` measures this machine over the UCX transport (kernels, the link, the
# reference runs and their waits); then three configurations train on 2 ucx processes and are
# simulated on cpu-host:2 with that calibration. Measured: the median over steps 4-14 of the
# slowest rank's step time less its data loading (the simulator does not model the loader).
#
# The simulator predicts an unloaded machine, and on a shared one interference only ever slows
# things down: a spoiled run measures slower steps, a spoiled calibration lower peaks and dearer
# waits, hence a slower prediction. So each side is taken at its least disturbed: per
# configuration, the fastest run's median against the fastest prediction over the attempts (one
# calibration and three runs each), and they must agree within 15%. A simulator that is wrong
# cannot pass by luck: more attempts only bring both sides down to the unloaded figures, never
# below them. Attempts (up to 6) continue only while a configuration is off. A CI run on record
# that compared medians over attempts failed with 4 of 6 shard-H runs spoiled (3.3-3.5 ms in
# the clean ones, 4.5-5.1 ms in the others, predictions 3.4-3.8 ms); each attempt prints the
# hypervisor's steal time over it (/proc/stat) to show such spoiling.
#   tests/cli_calibrated_ucx.sh <tessera binary>
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export UCX_WARN_UNUSED_ENV_VARS=n

cat >"$tmp/convnext.json" <<'J'
{"name": "ucx-convnext", "family": "convnext", "depths": [1, 1, 2, 1], "dims": [16, 32, 48, 64], "num_classes": 4, "drop_path": 0}
J
cat >"$tmp/regnet.json" <<'J'
{"name": "ucx-regnet", "family": "regnet", "depths": [1, 1, 2, 1], "widths": [16, 32, 48, 64], "stem_width": 16,
 "group_width": 8, "se_ratio": 0.25, "num_classes": 4}
J
configs=("convnext W" "regnet W" "convnext H")
steal_ms() { awk '/^cpu /{print $9 * 1000 / '"$(getconf CLK_TCK)"'}' /proc/stat; }
common=(--input 3x64x256 --batch 2 --mesh sp=2 --classes 4 --task classify --optimizer adamw)

for attempt in 1 2 3 4 5 6; do
  steal0=$(steal_ms)
  timeout 300 "$bin" launch --nproc 2 -- calibrate --backend ucx --out "$tmp/cal.json" >"$tmp/cal.out" 2>&1 ||
    { cat "$tmp/cal.out"; exit 1; }
  for c in "${configs[@]}"; do
    read -r family shard <<<"$c"
    timeout 300 "$bin" launch --nproc 2 -- train --model "$tmp/$family.json" "${common[@]}" --shard "$shard" \
      --threads 1 --steps 14 --backend ucx --metrics "$tmp/$family-$shard.jsonl" >"$tmp/train.out" 2>&1 ||
      { cat "$tmp/train.out"; exit 1; }
    "$bin" sim run --model "$tmp/$family.json" "${common[@]}" --shard "$shard" --topology cpu-host:2 \
      --calibration "$tmp/cal.json" --json >"$tmp/$family-$shard.sim.json"
    python3 - "$tmp" "$family" "$shard" "$attempt" <<'PY'
import json, statistics, sys
tmp, family, shard, attempt = sys.argv[1:]
steps = [json.loads(l) for l in open(f"{tmp}/{family}-{shard}.jsonl")]
measured = statistics.median(s["step_time_s"] - s["data_time_s"] for s in steps[3:])
simulated = json.load(open(f"{tmp}/{family}-{shard}.sim.json"))["iteration_time_s"]
err = simulated / measured - 1
with open(f"{tmp}/errors.txt", "a") as f:
    f.write(f"{family} {shard} {attempt} {measured:.6f} {simulated:.6f} {err:+.4f}\n")
print(f"attempt {attempt}: {family} sp=2 shard {shard}: measured {measured*1e3:.3f} ms, simulated {simulated*1e3:.3f} ms ({err:+.1%})")
PY
  done
  grep -E "link:|wait costs" "$tmp/cal.out" | sed 's/^/  calibration: /' || true
  echo "  the hypervisor took $(( $(steal_ms) - steal0 )) ms of this machine's cpus during attempt $attempt"
  python3 - "$tmp" <<'PY' && break
import collections, sys
rows = collections.defaultdict(list)
for line in open(f"{sys.argv[1]}/errors.txt"):
    family, shard, attempt, m, s, e = line.split()
    rows[(family, shard)].append((float(m), float(s)))
sys.exit(0 if all(abs(min(s for _, s in v) / min(m for m, _ in v) - 1) <= 0.15 for v in rows.values()) else 1)
PY
done

python3 - "$tmp" <<'PY'
import collections, sys
rows = collections.defaultdict(list)
for line in open(f"{sys.argv[1]}/errors.txt"):
    family, shard, attempt, m, s, e = line.split()
    rows[(family, shard)].append((float(m), float(s)))
bad = []
for (family, shard), v in rows.items():
    m, s = min(m for m, _ in v), min(s for _, s in v)
    err = s / m - 1
    print(f"{family} sp=2 shard {shard}: fastest run {m*1e3:.3f} ms, fastest prediction {s*1e3:.3f} ms "
          f"({err:+.1%}) over {len(v)} attempt(s)")
    if abs(err) > 0.15:
        bad.append(f"{family} shard {shard} ({err:+.1%})")
if bad:
    sys.exit("calibrated ucx simulation off by more than 15%: " + ", ".join(bad))
print("cli_calibrated_ucx: every configuration within 15%")
PY
