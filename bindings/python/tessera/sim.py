"""The simulator: topologies, one simulated training iteration, the planner, Chrome traces.

The same library calls as ``tessera sim run`` and ``tessera plan`` (the run layer, tessera::run):
the keyword arguments form the same run description (RunSpec JSON) the CLI's options do, and
results carry the keys of their ``--json`` output.
"""

from __future__ import annotations

import json
from typing import Optional, Sequence, Union

from . import _tessera

_s = _tessera._sim
Topology = _s.Topology
SimResult = _s.SimResult
device_names = _s.device_names

__all__ = ["Topology", "SimResult", "simulate", "plan", "compare", "to_frame", "device_names"]


def _text(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, _tessera.DeviceMesh):
        return str(v)
    return "x".join(str(int(x)) for x in v)


def _spec_json(**fields) -> str:
    """The run description (RunSpec) as JSON; a Topology goes in as its own JSON."""
    if isinstance(fields.get("topology"), Topology):
        fields["topology"] = json.loads(fields["topology"].to_json())
    return json.dumps(fields)


def simulate(
    model: str = "convnext-atto",
    input: Union[str, Sequence[int]] = "3x256x1024",
    batch: int = 2,
    mesh: Union[str, _tessera.DeviceMesh] = "sp=4",
    topology: Union[str, "Topology"] = "dgx-a100",
    shard: str = "W",
    checkpointing: str = "none",
    optimizer: str = "adamw",
    task: str = "classify",
    classes: int = 1000,
    device: str = "",
    tf32: bool = False,
    bucket_mib: int = 4,
    overlap: bool = True,
    trace: bool = False,
    dtype: str = "f32",
    calibration: str = "",
    precision: str = "fp32",
    engine: str = "fast",
    micro_batches: int = 1,
    schedule: str = "1f1b",
    stage_starts: Union[str, Sequence[int]] = "",
) -> "SimResult":
    """Simulates one training iteration (memory from a meta replay of the real trainer, time
    from the event engine), as ``tessera sim run`` with the same options. ``topology`` is a
    preset name, a topology JSON file or a Topology. With ``trace`` every rank is simulated and
    the result holds the timeline (``trace_events()``, ``write_trace(path)``). ``calibration``: a
    ``tessera calibrate`` file, as ``--calibration``. ``precision``: ``"fp32"``, ``"bf16"`` or
    ``"fp16"`` (mixed precision: 16-bit activations and halos, convolutions at the device's 16-bit
    peak), as ``--precision``. ``engine``: ``"fast"`` (symmetric ranks, routes and collective
    groups simulated once per class) or ``"exact"`` (every one on its own: the reference), as
    ``--engine``. ``micro_batches``, ``schedule``, ``stage_starts``: gradient accumulation and, with
    a mesh dim named ``pp``, the pipeline's schedule (``"1f1b"``, ``"gpipe"``) and stage cut, as
    ``--micro-batches``, ``--schedule``, ``--stage-starts``. ``to_dict()`` is ``json.loads`` of
    ``to_json()``, the text ``tessera sim run --json`` prints for the same description."""
    spec = _spec_json(model=model, input=_text(input), batch=batch, mesh=_text(mesh), topology=topology,
                      shard=shard, checkpointing=checkpointing, optimizer=optimizer, task=task,
                      classes=classes, device=device, tf32=tf32, bucket_mib=bucket_mib, overlap=overlap,
                      dtype=dtype, calibration=calibration, precision=precision, engine=engine,
                      micro_batches=micro_batches, schedule=schedule,
                      stage_starts=stage_starts if isinstance(stage_starts, str)
                      else ",".join(str(int(v)) for v in stage_starts))
    return _s.simulate(spec, trace)


def plan(
    model: str = "convnext-xl",
    input: Union[str, Sequence[int]] = "3x512x4096",
    batch: int = 7,
    topology: Union[str, "Topology"] = "dgx-a100:2",
    devices: int = 0,
    shards: Union[str, Sequence[str]] = ("W", "H", "HW"),
    checkpointing: Union[str, Sequence[str]] = ("none", "block", "stage"),
    memory_cap: str = "",
    optimizer: str = "adamw",
    task: str = "classify",
    classes: int = 1000,
    device: str = "",
    tf32: bool = False,
    bucket_mib: int = 4,
    overlap: bool = True,
    dtype: str = "f32",
    calibration: str = "",
    precisions: Union[str, Sequence[str]] = ("fp32",),
    compressions: Union[str, Sequence[str]] = ("none",),
    topk_ratio: float = 0.01,
    exhaustive: bool = False,
    threads: int = 0,
) -> dict:
    """Ranks meshes, shard dimensions, checkpointing and precisions by simulated iteration time
    with memory fit, as ``tessera plan --json``: a dict with ``configurations`` (fastest first,
    each with its ``precision``), ``skipped`` and ``best_fit`` (index of the fastest configuration
    that fits, -1 when none does). ``precisions``: ``"fp32"``, ``"bf16"``, ``"fp16"`` (mixed
    precision), every candidate simulated in each, as ``--precisions fp32,bf16``. ``compressions``:
    ``"none"`` (the dense all-reduce) and/or ``"topk"`` (at ``topk_ratio``), as ``--compressions
    none,topk``; with both, each configuration has its ``compression`` and the dict a
    ``compression_verdict`` (``compared``, ``topk_faster``, ``best_saving``, ``worst_saving``,
    ``best_dense``, ``best_topk``). Unless ``exhaustive``, candidates that cannot beat the best
    time found (a lower bound above it) or cannot fit are pruned, not simulated (``simulated``
    false, ``iteration_time_s`` their ``lower_bound_s``); the best plan is the same.
    ``threads``: candidates evaluated at once (0: every core), as ``--threads``."""
    spec = _spec_json(model=model, input=_text(input), batch=batch, topology=topology, optimizer=optimizer,
                      task=task, classes=classes, device=device, tf32=tf32, bucket_mib=bucket_mib,
                      overlap=overlap, dtype=dtype, calibration=calibration, topk_ratio=topk_ratio)
    def names(v):
        return v if isinstance(v, str) else list(v)

    return _s.plan(spec, devices, names(shards), names(checkpointing), memory_cap, names(precisions),
                   names(compressions), exhaustive, threads)


def compare(measured: str, simulated: str = "", **spec) -> dict:
    """A measured trace (``tessera train --trace``) beside a simulated one, phase by phase and
    layer group by layer group, as ``tessera sim compare --json`` and the studio's Compare view:
    ``simulated`` is a ``tessera sim run --trace`` file, or, when empty, the simulation of the
    description ``spec`` (the keyword arguments of :func:`simulate`, e.g. ``model=..., input=...,
    mesh=..., topology="cpu-host:2"``). Returns ``{"rows": [{"label", "group", "measured_us",
    "simulated_us", "error_pct"}], "measured", "simulated", "measured_source", "mismatch"}``."""
    if "input" in spec:
        spec["input"] = _text(spec["input"])
    if "mesh" in spec:
        spec["mesh"] = _text(spec["mesh"])
    return _s.compare(str(measured), str(simulated), _spec_json(**spec))


def to_frame(rows):
    """A pandas DataFrame of a list of dicts (``result.devices``, ``result.links``,
    ``plan(...)["configurations"]``); nested dicts become ``outer.inner`` columns. Needs pandas."""
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("tessera.sim.to_frame needs pandas (pip install pandas); the plain dicts "
                          "work without it") from e
    return pd.json_normalize(rows)
