"""tessera.functional's blocks (core's Linear, LayerScale, DropPath, squeeze-and-excitation and
nearest upsampling) sharded over in-process ranks, uneven shards included, against the float64
references in reference_blocks.py: outputs and every gradient."""

import numpy as np
import pytest

import tessera
import reference_blocks as R

# fp32 against float64: sums over at most 2·13·17 products keep the rounding error below 1e-4 of
# the largest magnitude; a missing all-reduce of a parameter gradient or of SE's pooled mean /
# ds (per-shard values) is off by O(1).
RTOL = 1e-4

# W over 1..4 ranks (17 = 9+8, 6+6+5, 5+4+4+4), H over 3 (13 = 5+4+4), batch × W.
IMAGE_MESHES = [("sp=1", [tessera.Shard(3)]), ("sp=2", [tessera.Shard(3)]), ("sp=3", [tessera.Shard(3)]),
                ("sp=4", [tessera.Shard(3)]), ("sp=3", [tessera.Shard(2)]),
                ("dp=2,sp=2", [tessera.Shard(0), tessera.Shard(3)])]


def close(a, ref):
    scale = max(1.0, float(np.max(np.abs(ref))))
    return float(np.max(np.abs(np.asarray(a, np.float64) - ref))) <= RTOL * scale


def check(r, refs):
    for name, ref in refs.items():
        assert r[name] is not None, name
        assert r[name].shape == ref.shape, (name, r[name].shape, ref.shape)
        assert close(r[name], ref), f"{name}: max err {np.max(np.abs(r[name] - ref)):.3e}"


def rng_arrays(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_batch_sharded(ranks, with_bias):
    x, w, b, dy = rng_arrays(ranks, (7, 5), (3, 5), (3,), (7, 3))  # 7 samples: uneven over 2..4 ranks
    b = b if with_bias else None
    r = tessera.functional.linear(x, w, b, mesh=tessera.DeviceMesh(dp=ranks), placement=tessera.Shard(0),
                                  grad_output=dy)
    y, dx, dw, db = R.linear(x, w, b, dy)
    check(r, {"output": y, "grad_input": dx, "grad_weight": dw} | ({"grad_bias": db} if with_bias else {}))
    if not with_bias:
        assert r["grad_bias"] is None


def test_linear_replicated_over_a_spatial_mesh():
    # Every rank holds the whole batch: the result is the single rank's, not ranks × it.
    x, w, b, dy = rng_arrays(9, (4, 6), (2, 6), (2,), (4, 2))
    r = tessera.functional.linear(x, w, b, mesh=tessera.DeviceMesh(sp=3), placement=tessera.Replicate(),
                                  grad_output=dy)
    y, dx, dw, db = R.linear(x, w, b, dy)
    check(r, {"output": y, "grad_input": dx, "grad_weight": dw, "grad_bias": db})


@pytest.mark.parametrize("mesh,placements", IMAGE_MESHES)
def test_layer_scale(mesh, placements):
    x, g, dy = rng_arrays(1, (2, 5, 13, 17), (5,), (2, 5, 13, 17))
    r = tessera.functional.layer_scale(x, g, mesh=tessera.DeviceMesh(mesh), placement=placements, grad_output=dy)
    y, dx, dg = R.layer_scale(x, g, dy)
    check(r, {"output": y, "grad_input": dx, "grad_gamma": dg})


def test_drop_path_keep_matches_the_reference_hash():
    decisions = [(seed, step, layer, n, p) for seed in (0, 7) for step in (0, 3) for layer in ("drop_path", "s1.b0")
                 for n in range(16) for p in (0.0, 0.3, 0.7)]
    assert all(tessera.functional.drop_path_keep(*d) == R.drop_path_keep(*d) for d in decisions)
    kept = sum(R.drop_path_keep(*d) for d in decisions if d[4] == 0.7)
    assert 0 < kept < len(decisions) // 3  # both outcomes occur: the comparison above can fail


@pytest.mark.parametrize("mesh,placements", IMAGE_MESHES + [("dp=3", [tessera.Shard(0)]),
                                                            ("dp=4", [tessera.Shard(0)])])
def test_drop_path(mesh, placements):
    x, dy = rng_arrays(2, (10, 3, 5, 17), (10, 3, 5, 17))
    prob, seed, step, layer = 0.4, 11, 5, "stages.1.blocks.0.drop_path"
    r = tessera.functional.drop_path(x, prob, seed=seed, step=step, layer=layer, mesh=tessera.DeviceMesh(mesh),
                                     placement=placements, grad_output=dy)
    y, dx = R.drop_path(x, dy, prob, seed, step, layer)
    dropped = [n for n in range(10) if not R.drop_path_keep(seed, step, layer, n, prob)]
    assert 0 < len(dropped) < 10, dropped  # some samples dropped, some kept
    check(r, {"output": y, "grad_input": dx})


@pytest.mark.parametrize("mesh,placements", IMAGE_MESHES)
def test_squeeze_excite(mesh, placements):
    x, w1, b1, w2, b2, dy = rng_arrays(3, (2, 6, 13, 17), (3, 6), (3,), (6, 3), (6,), (2, 6, 13, 17))
    r = tessera.functional.squeeze_excite(x, w1, b1, w2, b2, mesh=tessera.DeviceMesh(mesh), placement=placements,
                                          grad_output=dy)
    y, dx, dw1, db1, dw2, db2 = R.squeeze_excite(x, w1, b1, w2, b2, dy)
    check(r, {"output": y, "grad_input": dx, "grad_w1": dw1, "grad_b1": db1, "grad_w2": dw2, "grad_b2": db2})


@pytest.mark.parametrize("mesh,placements", IMAGE_MESHES)
@pytest.mark.parametrize("factor", [2, 3])
def test_upsample_nearest(mesh, placements, factor):
    x = rng_arrays(4, (2, 3, 13, 17))[0]
    dy = rng_arrays(5, (2, 3, 13 * factor, 17 * factor))[0]
    r = tessera.functional.upsample_nearest(x, factor, mesh=tessera.DeviceMesh(mesh), placement=placements,
                                            grad_output=dy)
    y, dx = R.upsample_nearest(x, dy, factor)
    check(r, {"output": y, "grad_input": dx})


def test_forward_only_has_no_gradients():
    x, g = rng_arrays(6, (1, 2, 3, 8), (2,))
    r = tessera.functional.layer_scale(x, g, mesh=tessera.DeviceMesh(sp=2), placement=tessera.Shard(3))
    assert r["grad_input"] is None and r["grad_gamma"] is None
    assert close(r["output"], R.layer_scale(x, g, np.zeros_like(x))[0])


def test_bad_inputs_raise_value_errors_with_the_message():
    x = np.zeros((4, 5), np.float32)
    with pytest.raises(ValueError, match="should be \\(N,6\\)"):
        tessera.functional.linear(x, np.zeros((3, 6), np.float32))
    with pytest.raises(ValueError, match="weight must be \\(out, in\\)"):
        tessera.functional.linear(x, np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="must be \\(N,C,H,W\\)"):
        tessera.functional.layer_scale(x, np.ones(5, np.float32))
    img = np.zeros((1, 2, 3, 8), np.float32)
    with pytest.raises(ValueError, match="gamma has shape"):
        tessera.functional.layer_scale(img, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="must be in \\[0, 1\\)"):
        tessera.functional.drop_path(img, 1.0)
    with pytest.raises(ValueError, match="grad_output has shape"):
        tessera.functional.upsample_nearest(img, 2, grad_output=img)
