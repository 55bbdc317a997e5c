#!/usr/bin/env bash
# Real images and pretrained weights through the command line: `tessera train --data images:DIR`
# on a segmentation folder gives the same losses at sp=1, sp=2 and dp=2 (f64), each rank
# decoding about its share of the pixels; a classification folder takes its class count; bad
# input fails naming the file, or is skipped and counted; --init-from a timm file reports what
# loaded; `tessera export` gives back the very tensors timm wrote (strict load, torch.equal);
# `tessera images` adds restart markers without changing what trains.
#   tests/cli_images.sh <tessera binary> <source dir>
set -euo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
python3 "$src/tests/make_image_folder.py" "$tmp"
seg=(--model "$src/examples/convnext-mini.json" --input 3x64x128 --batch 2
     --classes 4 --dtype f64 --threads 1 --steps 3)

"$bin" train "${seg[@]}" --mesh sp=1 --zoom 1:1.5 --data "images:$tmp/seg" --metrics "$tmp/sp1.jsonl" >"$tmp/sp1.out"
"$bin" train "${seg[@]}" --mesh sp=2 --zoom 1:1.5 --data "images:$tmp/seg" --metrics "$tmp/sp2.jsonl" >"$tmp/sp2.out"
"$bin" train "${seg[@]}" --mesh dp=2 --zoom 1:1.5 --data "images:$tmp/seg" --metrics "$tmp/dp2.jsonl" >"$tmp/dp2.out"
losses() { grep -o "loss [0-9.]*" "$1"; }
for m in sp2 dp2; do
  if [ "$(losses "$tmp/sp1.out")" != "$(losses "$tmp/$m.out")" ]; then
    echo "losses differ between sp=1 and $m:"; paste <(losses "$tmp/sp1.out") <(losses "$tmp/$m.out"); exit 1
  fi
done
grep -q "decoded Mpx r0" "$tmp/sp2.out" || { echo "no decoded pixels on the step line:"; cat "$tmp/sp2.out"; exit 1; }
grep -q "images decoded per rank" "$tmp/sp2.out" || { echo "no decode summary:"; cat "$tmp/sp2.out"; exit 1; }
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
def steps(name):
    return [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")]
sp1, sp2, dp2 = steps("sp1"), steps("sp2"), steps("dp2")
for a, b in zip(sp1, sp2):
    assert abs(a["loss"] - b["loss"]) <= 1e-9 * abs(a["loss"]), (a["loss"], b["loss"])
one = sum(s["ranks"][0]["data"]["pixels_decoded"] for s in sp1)
assert one > 0 and all(s["ranks"][0]["data"]["bad_skipped"] == 0 for s in sp1), sp1[0]
# Split over W, each rank decodes at most what one rank decodes alone (PNG rows are whole).
assert all(0 < sum(s["ranks"][r]["data"]["pixels_decoded"] for s in sp2) <= one for r in (0, 1))
# dp=2: each rank decodes its own samples, whole: together what one rank decodes alone.
both = sum(s["ranks"][r]["data"]["pixels_decoded"] for s in dp2 for r in (0, 1))
assert both == one, (both, one)
PY

# Classification: the folder's three classes, with no --classes; a task given against the layout
# fails naming both.
cls=(--model "$src/examples/convnext-mini.json" --data "images:$tmp/cls" --input 3x64x64 --batch 2
     --threads 1 --steps 2 --no-augment)
"$bin" train "${cls[@]}" --mesh sp=2 --json --metrics-textfile "$tmp/cls2.prom" >"$tmp/cls2.json"
grep -qE '^tessera_data_pixels_decoded_total\{rank="1"\} [1-9]' "$tmp/cls2.prom" &&
  grep -qE '^tessera_data_bad_samples_total\{rank="0"\} 0$' "$tmp/cls2.prom" ||
  { echo "no data series in the Prometheus text:"; cat "$tmp/cls2.prom"; exit 1; }
"$bin" train "${cls[@]}" --mesh sp=1 --json >"$tmp/cls1.json"
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
two, one = (json.load(open(f"{tmp}/cls{n}.json")) for n in (2, 1))
assert len(two["steps"]) == 2 and len(two["data"]) == 2, two.keys()
# JPEG split over W: each rank decodes about half of what one rank alone decodes (whole iMCU
# columns, and the halo, make it a little more).
alone = one["data"][0]["pixels_decoded"]
for d in two["data"]:
    assert 0.4 * alone < d["pixels_decoded"] < 0.75 * alone, (d, alone)
    assert 0.4 < d["pixels_decoded"] / d["pixels_total"] < 0.75, d
PY
expect_fail "classification layout" train "${cls[@]}" --task segment
expect_fail "3 class" train "${cls[@]}" --classes 2
expect_fail "zoom" train "${seg[@]}" --mesh sp=1 --data "images:$tmp/seg" --zoom 0.5:1
expect_fail "std" train "${seg[@]}" --mesh sp=1 --data "images:$tmp/seg" --std 0.2,0,0.2
expect_fail "no folder" train "${seg[@]}" --mesh sp=1 --data "images:$tmp/none"
# A segmentation folder needs the class count its masks hold.
expect_fail "segmentation folder" train --model "$src/examples/convnext-mini.json" --data "images:$tmp/seg" \
  --input 3x64x128 --steps 1

# A truncated image: an error naming it, exit 1; with --skip-bad-samples the run goes on and
# counts it.
expect_fail "scene_99.jpg" train "${seg[@]}" --mesh sp=1 --data "images:$tmp/seg_bad"
"$bin" train "${seg[@]}" --mesh sp=1 --data "images:$tmp/seg_bad" --skip-bad-samples --json >"$tmp/bad.json"
python3 - "$tmp" <<'PY'
import json, sys
run = json.load(open(f"{sys.argv[1]}/bad.json"))
assert run["data"][0]["bad_skipped"] == 1, run["data"]
PY

# Restart markers. `tessera images info` counts the JPEGs a rank must decode from the top; a run
# splitting them along H says so. `tessera images add-restarts` copies the folder with markers in
# every JPEG (PNGs and masks byte for byte); then none is decoded from the top, the run says
# nothing, trains on the same pixels (the same losses), and its lower rank reads fewer bytes.
"$bin" images info "$tmp/seg" --json >"$tmp/info.json"
"$bin" images info "$tmp/seg" | grep -q "images add-restarts" || { echo "info gives no command"; exit 1; }
"$bin" images add-restarts "$tmp/seg" "$tmp/seg_rs" >"$tmp/add.out"
grep -qE "JPEGs with a restart marker every 1 MCU rows" "$tmp/add.out" || { cat "$tmp/add.out"; exit 1; }
"$bin" images info "$tmp/seg_rs" --json >"$tmp/info_rs.json"
cmp <(cd "$tmp/seg/masks" && cat ./*) <(cd "$tmp/seg_rs/masks" && cat ./*)
h=(--shard H)
"$bin" train "${seg[@]}" --mesh sp=2 "${h[@]}" --data "images:$tmp/seg" --metrics "$tmp/h.jsonl" >"$tmp/h.out" 2>&1
"$bin" train "${seg[@]}" --mesh sp=2 "${h[@]}" --data "images:$tmp/seg_rs" --metrics "$tmp/hrs.jsonl" >"$tmp/hrs.out" 2>&1
grep -q "JPEGs have no restart markers.*images add-restarts $tmp/seg NEW_FOLDER" "$tmp/h.out" ||
  { echo "no restart-marker notice on an H split:"; cat "$tmp/h.out"; exit 1; }
if grep -q "restart markers" "$tmp/hrs.out"; then echo "notice despite markers:"; cat "$tmp/hrs.out"; exit 1; fi
if [ "$(losses "$tmp/h.out")" != "$(losses "$tmp/hrs.out")" ]; then
  echo "losses differ with restart markers:"; paste <(losses "$tmp/h.out") <(losses "$tmp/hrs.out"); exit 1
fi
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
a, b = (json.load(open(f"{tmp}/{n}.json")) for n in ("info", "info_rs"))
assert a["jpegs"] > 0 and a["jpegs_from_top"] == a["jpegs"] and a["pngs"] > 0, a
assert b["jpegs"] == a["jpegs"] and b["jpegs_from_top"] == 0 and b["pngs"] == a["pngs"], b
assert b["restart_rows_max"] == 1, b
def read(name, rank):
    return sum(json.loads(l)["ranks"][rank]["data"]["bytes_read"] for l in open(f"{tmp}/{name}.jsonl"))
assert read("hrs", 1) < read("h", 1), (read("hrs", 1), read("h", 1))
PY
expect_fail "inside the source" images add-restarts "$tmp/seg" "$tmp/seg/copy"
expect_fail "scene_99.jpg" images add-restarts "$tmp/seg_bad" "$tmp/seg_bad_rs"
expect_fail "not a folder" images info "$tmp/none"

# Pretrained weights: timm's convnext_atto, written by timm itself (CI's /usr/bin/python3 has it).
if ! /usr/bin/python3 -c "import timm, safetensors.torch" 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 lacks timm or safetensors; --init-from and export are not tested"
  exit 0
fi
/usr/bin/python3 - "$tmp" <<'PY'
import sys, timm, torch, safetensors.torch
torch.manual_seed(0)
m = timm.create_model("convnext_atto", pretrained=False)
safetensors.torch.save_file({k: v.contiguous() for k, v in m.state_dict().items()}, f"{sys.argv[1]}/atto.safetensors")
PY
atto=(--model convnext-atto --data "images:$tmp/cls" --input 3x64x64 --batch 2 --threads 1 --mesh sp=1 --steps 1)
"$bin" train "${atto[@]}" --init-from "$tmp/atto.safetensors" >"$tmp/init.out"
grep -q "init_from .*loaded .*timm" "$tmp/init.out" || { echo "no weights report:"; cat "$tmp/init.out"; exit 1; }
grep -q "replaced (1000 → 3 classes)" "$tmp/init.out" || { echo "head not reported replaced:"; cat "$tmp/init.out"; exit 1; }
expect_fail "not both" train "${atto[@]}" --init-from "$tmp/atto.safetensors" --resume "$tmp/none.ckpt"
expect_fail "no such file" train "${atto[@]}" --init-from "$tmp/none.safetensors"
# With --resume auto, init_from starts a run that has no checkpoint yet; a run that has one
# resumes from it and leaves the pretrained weights alone.
"$bin" train "${atto[@]}" --init-from "$tmp/atto.safetensors" --save "$tmp/auto.ckpt" --resume auto >"$tmp/auto1.out" 2>&1
grep -q "init_from .*loaded" "$tmp/auto1.out" && grep -q "starting at step 0" "$tmp/auto1.out" ||
  { echo "resume auto without a checkpoint did not start from init_from:"; cat "$tmp/auto1.out"; exit 1; }
"$bin" train "${atto[@]:0:${#atto[@]}-2}" --steps 2 --init-from "$tmp/atto.safetensors" --save "$tmp/auto.ckpt" --resume auto >"$tmp/auto2.out" 2>&1
grep -q "resuming from '$tmp/auto.ckpt' (step 1)" "$tmp/auto2.out" && ! grep -q "init_from .*loaded" "$tmp/auto2.out" ||
  { echo "resume auto with a checkpoint loaded init_from or did not resume:"; cat "$tmp/auto2.out"; exit 1; }
# Round trip: timm's file in, one step at lr 0 (AdamW moves nothing; ConvNeXt has no running
# statistics), the checkpoint exported: timm loads it strictly and every tensor equals timm's own.
"$bin" train "${atto[@]}" --classes 1000 --lr 0 --init-from "$tmp/atto.safetensors" --save "$tmp/atto.ckpt" >"$tmp/rt.out"
"$bin" export "$tmp/atto.ckpt" --to safetensors -o "$tmp/back.safetensors" >"$tmp/export.out"
grep -q "timm model: convnext_atto" "$tmp/export.out" || { echo "no timm model name:"; cat "$tmp/export.out"; exit 1; }
grep -q "load_state_dict" "$tmp/export.out" || { echo "no PyTorch line:"; cat "$tmp/export.out"; exit 1; }
/usr/bin/python3 - "$tmp" <<'PY'
import sys, timm, torch, safetensors.torch
tmp = sys.argv[1]
orig = safetensors.torch.load_file(f"{tmp}/atto.safetensors")
back = safetensors.torch.load_file(f"{tmp}/back.safetensors")
m = timm.create_model("convnext_atto", pretrained=False)
m.load_state_dict(back, strict=True)
assert set(orig) == set(back), sorted(set(orig) ^ set(back))
bad = [k for k in orig if not torch.equal(orig[k], back[k])]
assert not bad, bad[:5]
PY
expect_fail "naming" export "$tmp/atto.ckpt" --to safetensors -o "$tmp/x.safetensors" --naming pytorch
expect_fail "none.ckpt" export "$tmp/none.ckpt" --to safetensors -o "$tmp/x.safetensors"
expect_fail "safetensors" export "$tmp/atto.ckpt" --to onnx -o "$tmp/x.onnx"
echo "cli_images: ok"
