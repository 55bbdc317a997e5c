"""Ops run sharded over N in-process ranks, returning global (unsharded) NumPy arrays.

Each call starts ``mesh.size`` ranks on the ``local`` communication backend (threads of this
process), gives every rank its piece of the input under the layout ``placement`` describes, runs
core's sharded op (halo exchange, local kernels, forward and backward) and gathers the results.
The GIL is released while the ranks run.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np

from . import _tessera

_f = _tessera._functional

IntPair = Union[int, Sequence[int]]


def conv2d(
    input: np.ndarray,
    weight: np.ndarray,
    bias: Optional[np.ndarray] = None,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    mesh: Optional[_tessera.DeviceMesh] = None,
    placement=None,
    grad_output: Optional[np.ndarray] = None,
    overlap: bool = True,
    threads: int = 1,
    device: str = "cpu",
) -> dict:
    """2-D convolution (NCHW, PyTorch's Conv2d semantics) sharded over ``mesh``.

    ``placement`` is a Placement (``tessera.Shard(3)`` splits W, ``Shard(2)`` H, ``Shard(0)`` the
    batch) or one per mesh dimension; None means an unsharded single-rank run. Arrays that are
    C-contiguous float32 are used without a copy; others are converted once.

    ``device`` is "cpu" or "cuda" ("cuda:N"): every rank computes on that GPU (the arrays are
    copied there and the results back; without a usable GPU a NotImplementedError says why).

    Returns a dict of NumPy float32 arrays in the global shape: ``output`` and, when
    ``grad_output`` is given, ``grad_input``, ``grad_weight`` and ``grad_bias`` (None otherwise;
    ``grad_bias`` is None without a bias); ``halo_elements`` counts the input elements all ranks
    received as halos.

    Raises tessera.InvalidArgument (a ValueError) for bad shapes, meshes or placements and
    tessera.Unsupported (a NotImplementedError) for layouts core does not shard (channels).
    """
    return _f.conv2d(input, weight, bias, stride, padding, dilation, groups, mesh, placement,
                     grad_output, overlap, threads, device)


def layer_norm(input: np.ndarray, weight: Optional[np.ndarray] = None, bias: Optional[np.ndarray] = None,
               eps: float = 1e-6, mesh: Optional[_tessera.DeviceMesh] = None, placement=None,
               grad_output: Optional[np.ndarray] = None) -> dict:
    """LayerNorm over the channels (dim 1) of an (N,C,H,W) input, per pixel (ConvNeXt's; core's
    default eps 1e-6). ``weight``/``bias`` (C,) default to ones/zeros. Returns ``output``,
    ``grad_input``, ``grad_weight``, ``grad_bias`` (the gradients None without ``grad_output``)."""
    return _f.layer_norm(input, weight, bias, eps, mesh, placement, grad_output)


def batch_norm(input: np.ndarray, weight: Optional[np.ndarray] = None, bias: Optional[np.ndarray] = None,
               eps: float = 1e-5, mesh: Optional[_tessera.DeviceMesh] = None, placement=None,
               grad_output: Optional[np.ndarray] = None) -> dict:
    """BatchNorm in training mode (batch statistics over N, H, W per channel). Sharded, it is
    SyncBN: core all-reduces the per-channel sums over every sharded mesh dimension, so the result
    is plain BatchNorm over the whole batch. Returns the same keys as :func:`layer_norm`."""
    return _f.batch_norm(input, weight, bias, eps, mesh, placement, grad_output)


def activation(input: np.ndarray, kind: str = "gelu", mesh: Optional[_tessera.DeviceMesh] = None,
               placement=None, grad_output: Optional[np.ndarray] = None) -> dict:
    """``relu``, ``gelu`` (exact, erf) or ``sigmoid``, elementwise: ``output`` and ``grad_input``."""
    return _f.activation(input, kind, mesh, placement, grad_output)


def global_avg_pool(input: np.ndarray, mesh: Optional[_tessera.DeviceMesh] = None, placement=None,
                    grad_output: Optional[np.ndarray] = None) -> dict:
    """(N,C,H,W) -> (N,C): the mean over H and W (a local sum all-reduced over the spatial mesh
    dimensions). ``output`` and ``grad_input``."""
    return _f.global_avg_pool(input, mesh, placement, grad_output)


def linear(input: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray] = None,
           mesh: Optional[_tessera.DeviceMesh] = None, placement=None,
           grad_output: Optional[np.ndarray] = None) -> dict:
    """y (N,out) = input (N,in) · weightᵀ + bias (core's Linear; ``weight`` is (out, in)). Shard
    the batch (``tessera.Shard(0)``) or replicate it; the weight gradients are all-reduced over
    the sharded mesh dimensions. Returns ``output``, ``grad_input``, ``grad_weight``,
    ``grad_bias`` (None without a bias)."""
    return _f.linear(input, weight, bias, mesh, placement, grad_output)


def layer_scale(input: np.ndarray, gamma: np.ndarray, mesh: Optional[_tessera.DeviceMesh] = None,
                placement=None, grad_output: Optional[np.ndarray] = None) -> dict:
    """ConvNeXt's LayerScale: y = input · gamma per channel (``gamma`` (C,)). Returns ``output``,
    ``grad_input`` and ``grad_gamma`` (summed over every shard)."""
    return _f.layer_scale(input, gamma, mesh, placement, grad_output)


def drop_path(input: np.ndarray, prob: float, seed: int = 0, step: int = 0, layer: str = "drop_path",
              mesh: Optional[_tessera.DeviceMesh] = None, placement=None,
              grad_output: Optional[np.ndarray] = None) -> dict:
    """Stochastic depth in training mode: sample n is kept and scaled by 1/(1-prob), or zeroed.
    The decision is core's hash of (``seed``, ``step``, ``layer`` name, global sample index) and
    never of the rank, so a sharded run drops the same samples as an unsharded one
    (:func:`drop_path_keep` gives one decision). Returns ``output`` and ``grad_input``."""
    return _f.drop_path(input, prob, seed, step, layer, mesh, placement, grad_output)


def drop_path_keep(seed: int, step: int, layer: str, sample: int, prob: float) -> bool:
    """Whether DropPath keeps global sample ``sample`` (core's decision, as :func:`drop_path` and
    training use it)."""
    return _f.drop_path_keep(seed, step, layer, sample, prob)


def squeeze_excite(input: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray,
                   mesh: Optional[_tessera.DeviceMesh] = None, placement=None,
                   grad_output: Optional[np.ndarray] = None) -> dict:
    """Squeeze-and-excitation (RegNetY's): s = sigmoid(fc2(relu(fc1(mean_HW(input))))), y =
    input · s per sample and channel; ``w1`` (S,C), ``b1`` (S,), ``w2`` (C,S), ``b2`` (C,). Sharded
    over H or W, the pooled mean and the gradient of s are all-reduced over the shards. Returns
    ``output``, ``grad_input``, ``grad_w1``, ``grad_b1``, ``grad_w2``, ``grad_b2``."""
    return _f.squeeze_excite(input, w1, b1, w2, b2, mesh, placement, grad_output)


def upsample_nearest(input: np.ndarray, factor: int = 2, mesh: Optional[_tessera.DeviceMesh] = None,
                     placement=None, grad_output: Optional[np.ndarray] = None) -> dict:
    """Nearest-neighbour upsampling of H and W by the integer ``factor`` (local on every shard:
    each shard of the output is its input shard upsampled). ``grad_input`` sums each
    factor × factor block of ``grad_output``."""
    return _f.upsample_nearest(input, factor, mesh, placement, grad_output)


def distribute(array: np.ndarray, layout: _tessera.Layout) -> list:
    """Every rank's piece of ``array`` under ``layout`` (by rank), cut by core's redistribute
    (Replicate -> layout) running over in-process ranks."""
    return _f.distribute(np.ascontiguousarray(array, dtype=np.float32), layout)


def gather(pieces: Sequence[np.ndarray], layout: _tessera.Layout) -> np.ndarray:
    """The global array from every rank's piece under ``layout`` (core's redistribute to
    Replicate over in-process ranks); the inverse of :func:`distribute`."""
    return _f.gather([np.ascontiguousarray(p, dtype=np.float32) for p in pieces], layout)
