#!/usr/bin/env bash
# bench_loader at tiny sizes (4 JPEGs of 128x256, batch 2, one repeat of 2 batches), so the bench
# cannot rot: its JSON parses and holds every row (full: sync + 1 and 2 workers; half: the same with
# the DCT downscale on and off), images/s with min <= median <= max, the tessera / torchvision ratio
# of each row equal to its two medians' quotient (where the peer ran: Debian's /usr/bin/python3 with
# torch and torchvision; else exit 4 with the peer's reason and no ratio), the peer's batch of the
# row's size, and the sp rows (on the images as written, then on the copy with restart markers):
# ranks 0..sp-1 whose rows tile the image, ideal 1/sp, a pixel share between the rank's rows and
# two JPEG iMCU rows more. Then the failures: a bad option (exit 2),
# a missing folder (exit 1, {"error"} naming it), a missing interpreter (exit 4, the row says why).
#   tests/bench_loader.sh <bench_loader binary>
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--count 4 --height 128 --width 256 --batches 2 --warmup 1 --repeats 1 --sp 1,2,4)
rc=0
"$bin" "${args[@]}" --json >"$tmp/out.json" 2>"$tmp/err.txt" || rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 4 ]; then cat "$tmp/err.txt" "$tmp/out.json"; exit 1; fi
python3 - "$tmp/out.json" "$rc" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
rc = int(sys.argv[2])
peer = "error" not in j["peer"]
assert peer == (rc == 0), (rc, j["peer"])
rows = j["rows"]
want = [("full", [3, 128, 256], w, False) for w in (0, 1, 2)] + \
       [("half", [3, 64, 128], w, d) for d in (True, False) for w in (0, 1, 2)]
assert [(r["case"], r["output"], r["workers"], r["jpeg_downscale"]) for r in rows] == want, rows
for r in rows:
    t = r["tessera_images_per_s"]
    assert 0 < t["min"] <= t["median"] <= t["max"] and t["reps"] == 1, r
    assert r["prefetch"] == 2 * r["workers"], r
    if not peer:
        assert r["tessera_over_torchvision"] is None and r["torchvision_images_per_s"] is None, r
        continue
    p = r["torchvision_images_per_s"]
    assert 0 < p["min"] <= p["median"] <= p["max"], r
    assert abs(r["tessera_over_torchvision"] - t["median"] / p["median"]) < 1e-9 * t["median"] / p["median"], r
    assert r["torchvision_batch_shape"] == [2] + r["output"], r
target = j["target"]
if peer:
    full = [r["tessera_over_torchvision"] for r in rows if r["case"] == "full"]
    assert abs(target["full_ratio_smallest"] - min(full)) < 1e-12 and target["met"] == (min(full) >= 1.5), target
else:
    assert target["met"] is None, target
sp = j["sp"]
ranks = [(1, 0), (2, 0), (2, 1)] + [(4, k) for k in range(4)]
assert [(s["sp"], s["rank"], s["markers"]) for s in sp] == \
    [(p, k, m) for m in (False, True) for p, k in ranks], sp
for s in sp:
    P, (lo, hi) = s["sp"], s["rows"]
    base = [t for t in sp if t["sp"] == 1 and t["markers"] == s["markers"]][0]["ms_per_batch"]["median"]
    assert lo == 128 * s["rank"] // P and hi == 128 * (s["rank"] + 1) // P, s
    assert abs(s["ideal"] - 1 / P) < 1e-12, s
    assert abs(s["ratio_to_sp1"] - s["ms_per_batch"]["median"] / base) < 1e-6 * s["ratio_to_sp1"], s
    share = s["pixels_decoded_share"]
    assert (hi - lo) / 128 - 1e-9 <= share <= (hi - lo + 32) / 128 + 1e-9, s
    assert s["decode_ms_per_batch"] > 0, s
slow = j["sp_slowest"]
assert [(x["sp"], x["markers"]) for x in slow] == [(p, m) for m in (False, True) for p in (1, 2, 4)], slow
for x in slow:
    group = [s for s in sp if s["sp"] == x["sp"] and s["markers"] == x["markers"]]
    worst = max(group, key=lambda s: s["ms_per_batch"]["median"])
    assert x["rank"] == worst["rank"] and x["ratio_to_sp1"] == worst["ratio_to_sp1"], (x, worst)
copy = j["marked_copy"]
assert copy["bytes_in"] == j["images"]["bytes"] and copy["bytes_out"] > 0, (copy, j["images"])
print("bench_loader json: ok (peer %s)" % ("ran" if peer else "not available: " + j["peer"]["error"]))
PY
# The table: a line per row, the sp section, and the target line where the peer ran.
"$bin" "${args[@]}" --repeats 1 --cases full --sp 2 >"$tmp/out.txt" 2>&1 || rc=$?
test "$(grep -cE '^full +3x128x256 ' "$tmp/out.txt")" = 3
test "$(grep -cE '^2 +[01] +(0-64|64-128) .* off$' "$tmp/out.txt")" = 2
test "$(grep -cE '^2 +[01] +(0-64|64-128) .* on$' "$tmp/out.txt")" = 2
grep -qE '^sp 2, markers off: slowest rank [01] at [0-9.]+ of sp=1 \(ideal 0\.500\)' "$tmp/out.txt"
grep -qE '^the copy with markers: [0-9.]+ -> [0-9.]+ MiB of JPEGs' "$tmp/out.txt"
# Failures say what is wrong.
if "$bin" --workers 0 2>"$tmp/err.txt"; then exit 1; fi
grep -q "\-\-workers wants a positive integer, not '0'" "$tmp/err.txt"
if "$bin" --markers bogus 2>"$tmp/err.txt"; then exit 1; fi
grep -q "\-\-markers: unknown setting 'bogus'" "$tmp/err.txt"
rc=0; "$bin" --images "$tmp/none" --json --no-peer >"$tmp/bad.json" 2>/dev/null || rc=$?
test "$rc" = 1
python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['error']; assert sys.argv[2] in e, e" "$tmp/bad.json" "$tmp/none"
rc=0; "$bin" "${args[@]}" --cases full --sp 1 --python "$tmp/no-python" >"$tmp/out.txt" 2>&1 || rc=$?
test "$rc" = 4
grep -q "^peer: not available (.*interpreter or script not found" "$tmp/out.txt"
echo "bench_loader: ok"
