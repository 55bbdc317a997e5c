"""tessera.functional's other layers (core's LayerNorm, SyncBatchNorm, activations, global
average pooling) sharded over in-process ranks, against the float64 references."""

import numpy as np
import pytest

import tessera
import reference_layers as R

# fp32 against float64: normalisation over ≤ 2·13·17 values and means keep the rounding error
# below 1e-4 of the largest magnitude; a missing all-reduce (per-shard statistics) is off by O(1).
RTOL = 1e-4

MESHES = [("sp=1", [tessera.Shard(3)]), ("sp=2", [tessera.Shard(3)]), ("sp=3", [tessera.Shard(3)]),
          ("sp=3", [tessera.Shard(2)]), ("dp=2,sp=2", [tessera.Shard(0), tessera.Shard(3)])]


def close(a, ref):
    scale = max(1.0, float(np.max(np.abs(ref))))
    return float(np.max(np.abs(np.asarray(a, np.float64) - ref))) <= RTOL * scale


def data(seed=0, shape=(2, 5, 13, 17)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32) * 2 + 0.5
    w = rng.uniform(0.5, 1.5, shape[1]).astype(np.float32)
    b = rng.uniform(-1, 1, shape[1]).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    return x, w, b, dy


@pytest.mark.parametrize("mesh,placements", MESHES)
@pytest.mark.parametrize("op", ["layer_norm", "batch_norm"])
def test_norms(op, mesh, placements):
    x, w, b, dy = data()
    eps = 1e-5
    r = getattr(tessera.functional, op)(x, w, b, eps=eps, mesh=tessera.DeviceMesh(mesh), placement=placements,
                                        grad_output=dy)
    y, dx, dw, db = getattr(R, op)(x, w, b, dy, eps)
    for name, ref in (("output", y), ("grad_input", dx), ("grad_weight", dw), ("grad_bias", db)):
        assert close(r[name], ref), f"{op} {mesh} {name}: max err {np.max(np.abs(r[name] - ref)):.3e}"


def test_batch_norm_is_sync_bn():
    # Per-shard statistics would differ from the whole batch's: the comparison above would fail.
    x, w, b, dy = data(shape=(1, 2, 4, 12))
    x[..., 6:] += 5  # the right half of the image is brighter than the left
    r = tessera.functional.batch_norm(x, w, b, mesh=tessera.DeviceMesh(sp=2), placement=tessera.Shard(3))
    assert close(r["output"], R.batch_norm(x, w, b, None, 1e-5)[0])
    left = R.batch_norm(x[..., :6], w, b, None, 1e-5)[0]
    assert not close(r["output"][..., :6], left)


@pytest.mark.parametrize("mesh,placements", MESHES[:3])
@pytest.mark.parametrize("kind", ["relu", "gelu", "sigmoid"])
def test_activations(kind, mesh, placements):
    x, _, _, dy = data(1)
    r = tessera.functional.activation(x, kind, mesh=tessera.DeviceMesh(mesh), placement=placements, grad_output=dy)
    y, dx = R.activation(x, dy, kind)
    assert close(r["output"], y) and close(r["grad_input"], dx)
    assert r["grad_weight"] is None


@pytest.mark.parametrize("mesh,placements", MESHES)
def test_global_avg_pool(mesh, placements):
    x, _, _, _ = data(2)
    dy = np.random.default_rng(3).standard_normal(x.shape[:2]).astype(np.float32)
    r = tessera.functional.global_avg_pool(x, mesh=tessera.DeviceMesh(mesh), placement=placements, grad_output=dy)
    y, dx = R.global_avg_pool(x, dy)
    assert r["output"].shape == (2, 5)
    assert close(r["output"], y) and close(r["grad_input"], dx)


def test_layer_errors():
    x, w, b, dy = data()
    with pytest.raises(tessera.InvalidArgument, match="weight has shape"):
        tessera.functional.layer_norm(x, w[:3], b)
    with pytest.raises(ValueError, match="unknown kind"):
        tessera.functional.activation(x, "tanh")
    with pytest.raises(tessera.InvalidArgument, match="BatchNorm needs whole channels"):
        tessera.functional.batch_norm(x, mesh=tessera.DeviceMesh(sp=2), placement=tessera.Shard(1))
    with pytest.raises(tessera.InvalidArgument, match="grad_output has shape"):
        tessera.functional.activation(x, "relu", grad_output=dy[:1])
