"""Training from Python over ucx through the launcher, as torchrun runs a script:
`tessera launch --nproc 2 -- python3 train.py` with `tessera.train(backend="ucx")` in the script
gives the losses of the same training on the local backend with 2 in-process ranks."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

import tessera
from test_sim import ROOT, cli

# The same training in both runs (the CLI's launch test uses this model), in float64: ucx and
# local reduce in other orders, which float64 leaves at ~1e-15, so the losses agree to 1e-9.
CONFIG = dict(model=str(ROOT / "examples" / "convnext-mini.json"), input=(3, 32, 128), batch=2, mesh="sp=2",
              shard="W", steps=3, classes=6, threads=1, seed=4, dtype="f64")

SCRIPT = """
import json, sys
import tessera
config = json.loads(sys.argv[1])
config["input"] = tuple(config["input"])
r = tessera.train(backend="ucx", timeout_s=60, **config)
if r["rank"] == 0:
    with open(sys.argv[2], "w") as f:
        json.dump([s["loss"] for s in r["steps"]], f)
print(f"rank {r['rank']} trained {len(r['steps'])} steps on {r['backend']}")
"""


def ucx_available(tessera_cli):
    out = subprocess.run([tessera_cli, "backends"], capture_output=True, text=True, timeout=60).stdout
    return any(line.split()[:1] == ["ucx"] and "not" not in line.split()[1:3] for line in out.splitlines()), out


def test_launch_python_script_on_ucx_equals_local(tmp_path):
    tessera_cli = cli()
    ok, listing = ucx_available(tessera_cli)
    if not ok:
        pytest.skip(f"this tessera build has no ucx backend (`tessera backends`:\n{listing})")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    losses = tmp_path / "losses.json"
    env = dict(os.environ, UCX_WARN_UNUSED_ENV_VARS="n")
    package_root = str(pathlib.Path(tessera.__file__).resolve().parents[1])  # the ranks import this tessera
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
    run = subprocess.run([tessera_cli, "launch", "--nproc", "2", "--", sys.executable, str(script),
                          json.dumps(CONFIG), str(losses)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    for r in (0, 1):
        assert f"[rank {r}] rank {r} trained" in run.stdout, run.stdout
    ucx = json.loads(losses.read_text())

    local = [s["loss"] for s in tessera.train(backend="local", **CONFIG)["steps"]]
    assert len(ucx) == len(local) == CONFIG["steps"], (ucx, local)
    for a, b in zip(local, ucx):
        assert abs(a - b) <= 1e-9 * abs(a), (local, ucx)


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend 'no-such-backend': not available"):
        tessera.train(backend="no-such-backend", **CONFIG)


def test_ucx_backend_outside_a_launched_job_fails_clearly():
    # A one-rank environment cannot hold a 2-rank mesh: the error names the fix.
    if any(k in os.environ for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK")):
        pytest.skip("this test runs inside a job")
    ok, listing = ucx_available(cli())
    if not ok:
        pytest.skip(f"this tessera build has no ucx backend (`tessera backends`:\n{listing})")
    with pytest.raises(ValueError, match="tessera launch --nproc 2"):
        tessera.train(backend="ucx", timeout_s=5, **CONFIG)
