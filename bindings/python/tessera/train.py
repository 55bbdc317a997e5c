"""Training: the loop of ``tessera train`` with a per-step callback, on the ``local`` backend (one
thread per rank) or as one rank of a job started by ``tessera launch`` (``backend="ucx"``)."""

from __future__ import annotations

import json

from typing import Callable, Optional, Sequence, Union

from . import _tessera


def _mesh_text(mesh) -> str:
    return str(mesh) if isinstance(mesh, _tessera.DeviceMesh) else str(mesh)


def _input_text(input) -> str:
    if isinstance(input, str):
        return input
    return "x".join(str(int(v)) for v in input)


def _stage_starts_text(starts: Union[str, Sequence[int]]) -> str:
    if isinstance(starts, str):
        return starts
    return ",".join(str(int(v)) for v in starts)


def _pair_text(v: Union[str, Sequence[float]], sep: str) -> str:
    if isinstance(v, str):
        return v
    return sep.join(repr(float(x)) for x in v)


def train(
    model: Union[str, _tessera.ModelSpec] = "convnext-atto",
    input: Union[str, Sequence[int]] = (3, 64, 256),
    batch: int = 2,
    mesh: Union[str, _tessera.DeviceMesh] = "sp=1",
    shard: str = "W",
    steps: int = 10,
    optimizer: str = "adamw",
    lr: float = 2e-3,
    weight_decay: float = 0.05,
    warmup: int = 0,
    clip: float = 1.0,
    seed: int = 0,
    task: Optional[str] = None,
    classes: Optional[int] = None,
    checkpointing: str = "none",
    halo_recompute: str = "keep",
    threads: int = 0,
    overlap: bool = True,
    trace: str = "",
    timeout_s: float = 300.0,
    callback: Optional[Callable[[dict], None]] = None,
    backend: str = "local",
    dtype: str = "f32",
    momentum: float = 0.9,
    drop_path: float = -1.0,
    data: str = "synthetic",
    prefetch: int = -1,
    loader_workers: int = 1,
    shuffle: bool = True,
    bucket_mib: int = 4,
    metrics: str = "",
    save: str = "",
    resume: str = "",
    save_every: int = 0,
    keep_checkpoints: int = 3,
    device: str = "cpu",
    tf32: bool = False,
    precision: str = "fp32",
    loss_scale: Union[str, float] = "auto",
    grad_reduce_dtype: str = "fp32",
    grad_compression: str = "none",
    topk_ratio: float = 0.01,
    all_reduce: str = "auto",
    node_dim: str = "",
    alarm: str = "",
    on_alarm: Optional[Callable[[dict], None]] = None,
    metrics_port: int = -1,
    metrics_textfile: str = "",
    micro_batches: int = 1,
    schedule: str = "1f1b",
    stage_starts: Union[str, Sequence[int]] = "",
    augment: bool = True,
    zoom: Union[str, Sequence[float]] = "1:1",
    flip: bool = True,
    mean: Union[str, Sequence[float]] = "0.485,0.456,0.406",
    std: Union[str, Sequence[float]] = "0.229,0.224,0.225",
    mask_ignore: int = 255,
    skip_bad_samples: bool = False,
    init_from: str = "",
) -> dict:
    """Trains ``model`` (a preset name, a model JSON file path, or a ModelSpec) on synthetic data
    over ``mesh`` in-process ranks, exactly as ``tessera train --backend local`` does.

    ``backend="ucx"`` (or another multi-process backend, see ``tessera backends``): this process
    is one rank of a job, as ``tessera train --backend ucx`` under ``tessera launch``; it joins
    the job through the env:// variables the launcher sets (``MASTER_ADDR``, ``MASTER_PORT``,
    ``RANK``, ``WORLD_SIZE``, ``TESSERA_RDZV_TOKEN``) and ``mesh`` must have ``WORLD_SIZE``
    ranks. Run the script on every rank, e.g. ``tessera launch --nproc 2 -- python3 train.py``.
    The callback runs on rank 0 only and ``steps`` is filled on rank 0 (empty on the others);
    ``timeout_s`` bounds the rendezvous and every communication wait.

    ``callback(step)`` runs after every step with the step's record (docs/records.md, "Training
    step"; the same as a line of ``metrics`` and an element of the returned ``steps``): ``step``,
    ``loss``, ``grad_norm``, ``lr``, ``step_time_s`` (the slowest rank's), ``images_per_s``, ...,
    ``ranks`` (one dict per rank: its ``step_time_s``, ``data_time_s``, ``load_time_s`` and
    ``peak_bytes``, peak bytes by category and ``total``) and ``alarms`` when the step fired any.
    The other ranks wait for it (at most ``timeout_s``), so keep it short. Exceptions it raises
    stop the run and propagate.

    Returns the run's summary (the JSON ``tessera train --json`` prints, as a dict):
    ``{"model", "mesh", "backend", "rank", "parameters", "wall_s", "steps": [...], "summary"}``.
    ``momentum``, ``drop_path``, ``data``, ``bucket_mib``, ``metrics``, ``save``, ``resume``,
    ``save_every`` and ``keep_checkpoints`` are the options of ``tessera train`` of the same names:
    ``save_every=K`` also writes ``save + ".step<N>"`` every K steps (the newest
    ``keep_checkpoints`` kept) and ``resume="auto"`` starts from the newest complete one (what an
    elastic job's rounds do; docs/launching.md, "Elastic jobs").

    A diverged run (a step's loss or gradient is not finite, e.g. at too high an ``lr`` without
    ``clip``) raises :class:`tessera.NonFiniteError` (a ``FloatingPointError``) on every rank at
    the same step, its update not applied: the message names the step, the first parameter whose
    gradient is not finite from the loss back, and what to try; ``.step`` (0-based) and
    ``.parameter`` carry the same. The callback has seen the steps that completed; ``trace`` is
    written up to the failure.
    ``trace``: a path to write the run's Chrome trace to.
    ``dtype``: ``"f32"``, or ``"f64"``: the exact answer a float32 run is compared against (the
    dtypes the trainer can train in; others raise with the list).
    ``device``: ``"cpu"``, or ``"cuda"`` / ``"cuda:N"``: every rank computes on that GPU (in-process
    ranks share it; one process per rank takes GPU N + its local rank), as ``tessera train
    --device cuda``; without a usable GPU a NotImplementedError says why. ``tf32``: let float32
    convolutions and matrix products use TF32 tensor cores (off by default).
    ``precision``: ``"fp32"``, or ``"bf16"`` / ``"fp16"``: mixed precision (float32 master weights
    and optimizer state; activations, saved tensors and halos in 16 bits; float32 accumulation),
    as ``tessera train --precision``. ``loss_scale``: ``"auto"`` (dynamic for fp16, off
    otherwise), ``"dynamic"``, ``"off"`` or a number (a static scale); each step's dict then has
    ``loss_scale``, ``skipped`` and ``skipped_steps``. ``grad_reduce_dtype``: what gradient buckets
    are all-reduced in (``"fp32"``, ``"bf16"``, ``"fp16"``). ``grad_compression``: ``"none"``, or
    ``"topk"``: each rank sends the ``topk_ratio`` largest entries of each gradient bucket, keeping
    the rest for later (error feedback; docs/training.md); each step's dict then says
    ``grad_comm_bytes`` against ``grad_dense_bytes``.
    ``halo_recompute``: with ``checkpointing``, ``"keep"`` (a block's recompute reuses the halos its
    forward received, kept as halo buffers) or ``"exchange"`` (it exchanges them again).
    ``all_reduce``: ``"auto"``, ``"flat"`` or ``"hier"`` for reductions that span ``node_dim``, the
    mesh dimension whose ranks are on different hosts (docs/sharding.md).
    ``alarm``: training alarms over the defaults, as ``tessera train --alarm`` (e.g.
    ``"loss=2:stop,step_time=off"``; docs/training.md, "Alarms"). ``on_alarm(alarm)`` runs on rank 0
    for every alarm that fires, with the dict of its metrics line (``alarm``, ``step``, ``value``,
    ``baseline``, ``threshold``, ``action``, ``message``, ``checkpoint``); the returned dict lists
    them under ``alarms`` (and each step's record its own). The first alarm of each kind is also
    printed to ``sys.stderr``, as ``tessera train`` prints it. An alarm whose action is stop raises :class:`tessera.Error` on every rank
    after that step.
    ``prefetch``, ``loader_workers``, ``shuffle``: the input pipeline, as ``tessera train``'s options
    of those names: batches loaded ahead by that many loader threads per rank (``prefetch=0``: each
    step loads its own batch; -1, auto: 2 on a GPU, 0 on the cpu), the samples in a new order every epoch drawn from ``seed``
    (docs/training.md, "Input pipeline"). Each step's dict has ``data_time_s`` (waiting for the
    batch) and ``load_time_s`` (what loading it took).
    ``metrics_port``: serve live Prometheus metrics on ``http://127.0.0.1:PORT/metrics`` while
    training (0: any free port; the address is printed to ``sys.stdout``); ``metrics_textfile``: write them to that file after every
    step (docs/training.md, "Live metrics").
    ``micro_batches``: gradient accumulation, as ``tessera train --micro-batches``: the batch is cut
    into that many micro-batches (it must divide ``batch``), each runs forward and backward in turn
    and the optimizer steps once. With a mesh dim named ``pp`` (pipeline stages, e.g.
    ``"dp=2,pp=2,sp=2"``): ``schedule`` is ``"1f1b"`` or ``"gpipe"``, the order each stage runs its
    micro-batches, and ``stage_starts`` the unit where each stage after the first begins (``pp - 1``
    increasing indices such as ``(4, 9)`` or ``"4,9"``; empty: balanced by cost). Each step's
    ``ranks`` then say ``pipeline_wait_s``, what the rank waited for a neighbouring stage.
    """
    fields = dict(model=model.to_json() if isinstance(model, _tessera.ModelSpec) else model,
                  input=_input_text(input), batch=batch, mesh=_mesh_text(mesh), shard=shard, steps=steps,
                  optimizer=optimizer, lr=lr, weight_decay=weight_decay, warmup=warmup, clip=clip, seed=seed,
                  checkpointing=checkpointing, halo_recompute=halo_recompute,
                  threads=threads, overlap=overlap,
                  trace=trace, timeout_s=timeout_s, backend=backend, dtype=dtype, momentum=momentum,
                  drop_path=drop_path, data=data, prefetch=prefetch, loader_workers=loader_workers,
                  shuffle=shuffle, bucket_mib=bucket_mib, metrics=metrics, save=save,
                  resume=resume, save_every=save_every, keep_checkpoints=keep_checkpoints, device="" if device == "cpu" else device, tf32=tf32,
                  precision=precision, loss_scale=str(loss_scale), grad_reduce_dtype=grad_reduce_dtype,
                  grad_compression=grad_compression, topk_ratio=topk_ratio, all_reduce=all_reduce,
                  node_dim=node_dim, alarm=alarm, metrics_port=metrics_port, metrics_textfile=metrics_textfile,
                  micro_batches=micro_batches, schedule=schedule, stage_starts=_stage_starts_text(stage_starts),
                  augment=augment, zoom=_pair_text(zoom, ":"), flip=flip, mean=_pair_text(mean, ","),
                  std=_pair_text(std, ","), mask_ignore=mask_ignore, skip_bad_samples=skip_bad_samples,
                  init_from=init_from)
    # Left out when not given: an image folder then decides them.
    if task is not None:
        fields["task"] = task
    if classes is not None:
        fields["classes"] = classes
    return _tessera._train(json.dumps(fields), callback, on_alarm)


def load_weights(path: str, model: Union[str, _tessera.ModelSpec] = "convnext-atto",
                 classes: Optional[int] = None, task: str = "classify") -> dict:
    """Loads the safetensors file ``path`` (timm's pretrained ConvNeXt or RegNet, or a ``tessera
    export``) into ``model`` built for ``task`` with ``classes`` (None: the file's classifier's
    count when it has one, else the model's own), as ``tessera train --init-from`` does, and
    returns ``{"naming", "loaded", "missing", "unexpected", "replaced", "summary", "tensors"}``:
    what loading did, in the terms of PyTorch's ``load_state_dict(strict=False)``, and every
    tensor of the model under tessera's names as a NumPy array (a re-initialised classifier
    included). A tensor of another shape raises :class:`tessera.InvalidArgument` naming it."""
    spec = model.to_json() if isinstance(model, _tessera.ModelSpec) else model
    return _tessera._load_weights(path, spec, 0 if classes is None else int(classes), task)
