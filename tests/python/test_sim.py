"""The simulator from Python gives what the `tessera` CLI gives for the same configuration
(`tessera sim run --json`, `tessera plan --json`); topologies, traces, tables."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

import tessera

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cli():
    given = os.environ.get("TESSERA_CLI")
    if given and not pathlib.Path(given).is_file():  # ctest sets it: a wrong path is a failure
        pytest.fail(f"TESSERA_CLI={given} is not a file")
    path = given or shutil.which("tessera")
    for cand in (path, ROOT / "build" / "ci" / "tools" / "tessera"):
        if cand and pathlib.Path(cand).is_file():
            return str(cand)
    # Outside ctest (a bare `pytest tests/python` with no built CLI) there is nothing to compare
    # with; under ctest TESSERA_CLI is always set, so this never skips there.
    pytest.skip("no tessera CLI found: set TESSERA_CLI (ctest does)")


def run_cli(*args):
    out = subprocess.run([cli(), *args, "--json"], check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout)


def approx(a, b, rel=2e-8):  # the CLI prints times with 9 significant digits
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


@pytest.mark.parametrize("mesh,shard,ckpt", [("sp=4", "W", "none"), ("dp=2,sp=2", "H", "block")])
def test_simulate_equals_cli(mesh, shard, ckpt):
    args = dict(model="convnext-atto", input="3x256x512", batch=2, mesh=mesh, topology="dgx-a100", shard=shard,
                checkpointing=ckpt)
    r = tessera.sim.simulate(**args).to_dict()
    c = run_cli("sim", "run", "--model", "convnext-atto", "--input", "3x256x512", "--batch", "2", "--mesh", mesh,
                "--topology", "dgx-a100", "--shard", shard, "--checkpointing", ckpt)
    assert r["model"] == c["model"] and r["mesh"] == c["mesh"] and r["topology"] == c["topology"]
    assert approx(r["iteration_time_s"], c["iteration_time_s"])
    assert len(r["devices"]) == len(c["devices"])
    for a, b in zip(r["devices"], c["devices"]):
        for key in ("rank", "coords", "device", "peak_memory_bytes", "memory_bytes"):
            assert a[key] == b[key], key
        assert approx(a["compute_busy_s"], b["compute_busy_s"]) and approx(a["comm_busy_s"], b["comm_busy_s"])
    assert [(l["from"], l["to"], l["kind"]) for l in r["links"]] == [(l["from"], l["to"], l["kind"]) for l in c["links"]]
    for a, b in zip(r["links"], c["links"]):
        assert abs(a["bytes"] - b["bytes"]) <= 0.5 and approx(a["utilisation"], b["utilisation"], 1e-5)


def test_simulate_pipeline_fields_equal_cli():
    # micro_batches, schedule and stage_starts (a list here, text on the command line) reach the
    # same run description as --micro-batches, --schedule and --stage-starts.
    r = tessera.sim.simulate(model="convnext-atto", input="3x256x512", batch=4, mesh="pp=2,sp=2",
                             topology="dgx-a100", micro_batches=2, schedule="gpipe", stage_starts=[5]).to_dict()
    c = run_cli("sim", "run", "--model", "convnext-atto", "--input", "3x256x512", "--batch", "4", "--mesh",
                "pp=2,sp=2", "--topology", "dgx-a100", "--micro-batches", "2", "--schedule", "gpipe",
                "--stage-starts", "5")
    assert r["mesh"] == c["mesh"] == "pp=2,sp=2"
    assert approx(r["iteration_time_s"], c["iteration_time_s"])
    assert [d["peak_memory_bytes"] for d in r["devices"]] == [d["peak_memory_bytes"] for d in c["devices"]]
    with pytest.raises(ValueError, match="batch 4 is not a multiple of micro_batches 3"):
        tessera.sim.simulate(batch=4, micro_batches=3)


def test_plan_equals_cli():
    p = tessera.sim.plan(model="convnext-atto", input="3x128x512", batch=2, topology="dgx-a100", devices=4,
                         shards=["W", "H"], checkpointing=["none", "block"], precisions=("fp32", "bf16"))
    c = run_cli("plan", "--model", "convnext-atto", "--input", "3x128x512", "--batch", "2", "--topology", "dgx-a100",
                "--devices", "4", "--shards", "W,H", "--checkpointing", "none,block", "--precisions", "fp32,bf16")
    # One record (run::PlanRun::to_json) behind both: the same keys, in the same order, the same bits.
    assert len(p["configurations"]) == len(c["configurations"]) > 0 and p["skipped"]
    assert list(p) == list(c) and p == c
    assert {r["precision"] for r in p["configurations"]} == {"fp32", "bf16"}
    # One precision by default, as the CLI without --precisions; a bad name is refused, naming it.
    assert {r["precision"] for r in tessera.sim.plan(model="convnext-atto", input="3x128x512", batch=2,
                                                     topology="dgx-a100", devices=2, shards="W",
                                                     checkpointing="none")["configurations"]} == {"fp32"}
    with pytest.raises(ValueError, match="precision 'fp8'"):
        tessera.sim.plan(model="convnext-atto", input="3x128x512", batch=2, topology="dgx-a100", devices=2,
                         precisions="fp32,fp8")


def test_plan_compressions_equal_cli():
    args = dict(model="convnext-atto", input="3x128x512", batch=2, topology="cpu-host:4", shards="W",
                checkpointing="none")
    # Exhaustive: the verdict's counts compare configurations simulated both ways.
    p = tessera.sim.plan(**args, compressions=("none", "topk"), topk_ratio=0.05, exhaustive=True, threads=2)
    c = run_cli("plan", "--model", "convnext-atto", "--input", "3x128x512", "--batch", "2", "--topology",
                "cpu-host:4", "--shards", "W", "--checkpointing", "none", "--compressions", "none,topk",
                "--topk-ratio", "0.05", "--exhaustive")
    assert p == c
    assert {r["compression"] for r in p["configurations"]} == {"none", "topk"}
    assert p["compression_verdict"]["compared"] > 0 and p["compression_verdict"]["topk_ratio"] == 0.05
    assert "compression_verdict" not in tessera.sim.plan(**args)
    with pytest.raises(ValueError, match="compression 'zip'"):
        tessera.sim.plan(**args, compressions="none,zip")


def test_topologies():
    assert "dgx-a100" in tessera.sim.Topology.preset_names()
    t = tessera.sim.Topology.preset("dgx-a100:2")
    assert t.num_devices == 16
    t2 = tessera.sim.Topology.from_json(t.to_json())
    assert t2.num_devices == 16 and t2.to_json() == t.to_json()
    r1 = tessera.sim.simulate(input="3x128x256", mesh="sp=2", topology=t2)
    r2 = tessera.sim.simulate(input="3x128x256", mesh="sp=2", topology="dgx-a100:2")
    assert r1.iteration_ps == r2.iteration_ps


def test_trace_and_tables(tmp_path):
    r = tessera.sim.simulate(input="3x128x256", mesh="sp=2", topology="dgx-a100", trace=True)
    ev = r.trace_events()
    assert ev and {e["pid"] for e in ev} == {0, 1}
    assert {"compute", "halo"} <= {e["cat"] for e in ev}
    path = tmp_path / "t.json"
    r.write_trace(str(path))
    doc = json.loads(path.read_text())
    assert any(e.get("ph") == "X" for e in doc["traceEvents"])
    d = r.to_dict()
    assert d["devices"][0]["memory_bytes"]["parameter"] > 0
    json.dumps(d)  # plain data only
    pd = pytest.importorskip("pandas")
    df = tessera.sim.to_frame(r.devices)
    assert isinstance(df, pd.DataFrame) and len(df) == 2 and "memory_bytes.activation" in df.columns


def test_compare_equals_cli(tmp_path):
    """tessera.sim.compare gives what `tessera sim compare --json` gives (the run layer's JSON)."""
    measured = tmp_path / "measured.json"
    tessera.train(model="convnext-atto", input="3x32x64", batch=1, mesh="sp=2", task="classify", classes=12,
                  steps=2, threads=1, warmup=0, trace=str(measured))
    spec = dict(model="convnext-atto", input="3x32x64", batch=1, mesh="sp=2", task="classify", classes=12,
                topology="cpu-host:2")
    py = tessera.sim.compare(str(measured), **spec)
    c = run_cli("sim", "compare", "--measured", str(measured), "--model", "convnext-atto", "--input", "3x32x64",
                "--batch", "1", "--mesh", "sp=2", "--task", "classify", "--classes", "12", "--topology", "cpu-host:2")
    assert py == c
    assert [r["label"] for r in py["rows"]][:3] == ["iteration", "forward", "backward"] and py["mismatch"] == ""
    with pytest.raises(tessera.InvalidArgument, match="classes"):
        tessera.sim.compare(str(measured), classes=1)
