#!/usr/bin/env bash
# Live metrics end to end: `tessera train --metrics-port 0` serves the Prometheus text format on
# loopback while it trains; scrapes during the run parse with prometheus_client's parser and
# hold every series for every rank, the step advances between scrapes and agrees with the
# metrics file, the halo and collective bytes are those of a sharded run; --metrics-textfile
# writes the same text; a port in use fails naming it.
#   tests/cli_live_metrics.sh <tessera binary> <source dir>
set -euo pipefail
# shellcheck source=tests/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
args=(--model "$src/examples/convnext-mini.json" --input 3x128x512 --batch 2 --mesh sp=2 --classes 6 --threads 1)

"$bin" train "${args[@]}" --steps 40 --metrics-port 0 --metrics-textfile "$tmp/live.prom" \
  --metrics "$tmp/m.jsonl" >"$tmp/out" 2>&1 &
pid=$!
python3 - "$tmp" <<'PY'
import json, re, sys, time, urllib.request
from prometheus_client.parser import text_string_to_metric_families
tmp = sys.argv[1]
deadline = time.time() + 120
port = None
while port is None and time.time() < deadline:
    m = re.search(r"live metrics on http://127\.0\.0\.1:(\d+)/metrics", open(f"{tmp}/out").read())
    port = int(m.group(1)) if m else time.sleep(0.05)
assert port, open(f"{tmp}/out").read()

def scrape(path="/metrics"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        return r.read().decode()

seen = []
while time.time() < deadline:
    fam = {f.name: f for f in text_string_to_metric_families(scrape())}
    if "tessera_loss" in fam:
        step = fam["tessera_steps_completed"].samples[0].value
        if not seen or step > seen[-1][0]:
            seen.append((step, fam))
        if len(seen) >= 3:
            break
    time.sleep(0.02)
assert len(seen) >= 3, f"scrapes saw steps {[s for s, _ in seen]}"
step, fam = seen[-1]
def value(name, **labels):
    for s in fam[name].samples:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"{name} {labels} missing")
# The parser names a counter's family without _total (its samples keep it).
for name in ["tessera_run_info", "tessera_steps_completed", "tessera_loss", "tessera_grad_norm", "tessera_lr",
             "tessera_images_per_second", "tessera_step_time_seconds", "tessera_data_time_seconds", "tessera_load_time_seconds",
             "tessera_peak_memory_bytes", "tessera_step_halo_bytes", "tessera_step_collective_bytes",
             "tessera_halo_bytes", "tessera_collective_bytes", "tessera_alarms"]:
    assert name in fam, (name, sorted(fam))
assert value("tessera_run_info", mesh="sp=2", backend="local") == 1
for r in ("0", "1"):
    assert value("tessera_step_time_seconds", rank=r) > 0
    assert value("tessera_peak_memory_bytes", rank=r, category="total") >= value("tessera_peak_memory_bytes", rank=r, category="activation") > 0
    assert value("tessera_step_halo_bytes", rank=r) > 0, "a W-sharded ConvNeXt sends halos every step"
    assert value("tessera_step_collective_bytes", rank=r) > 0, "gradients are all-reduced every step"
    # Every step sends the same halos: the counter is the steps times the last step's.
    assert value("tessera_halo_bytes", rank=r) == step * value("tessera_step_halo_bytes", rank=r)
for kind in ("grad_norm", "grad_variance", "loss", "step_time", "nonfinite"):
    value("tessera_alarms", alarm=kind)
# The served step is one the metrics file has, with the same loss.
lines = [json.loads(l) for l in open(f"{tmp}/m.jsonl")]
line = [m for m in lines if m["step"] == step - 1]
assert line and abs(line[0]["loss"] - value("tessera_loss")) <= 1e-8 * abs(line[0]["loss"]), (line, value("tessera_loss"))
try:
    scrape("/other")
    raise AssertionError("/other answered")
except urllib.error.HTTPError as e:
    assert e.code == 404
print(f"cli_live_metrics: {len(seen)} scrapes during the run (steps {[int(s) for s, _ in seen]}) parsed, "
      f"{sum(len(f.samples) for f in fam.values())} samples")
PY
wait $pid
pid=
# The textfile after the run: the last step's text, parsed.
python3 - "$tmp" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
fam = {f.name: f for f in text_string_to_metric_families(open(f"{sys.argv[1]}/live.prom").read())}
assert fam["tessera_steps_completed"].samples[0].value == 40, fam["tessera_steps_completed"]
print("cli_live_metrics: the textfile holds step 40")
PY
# A port in use is refused with its number.
python3 -c "
import socket, subprocess, sys
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1); port = s.getsockname()[1]
r = subprocess.run([sys.argv[1], 'train', '--steps', '1', '--input', '3x32x128', '--metrics-port', str(port)], capture_output=True, text=True)
assert r.returncode == 1 and f'metrics port {port} on 127.0.0.1' in r.stderr, (r.returncode, r.stderr)
print('cli_live_metrics: a port in use is refused naming it')
" "$bin"
expect_fail "metrics_port '70000'" train --steps 1 --metrics-port 70000
