"""tessera.functional.conv2d (core's sharded path over in-process ranks) against the float64
NumPy reference, over kernel sizes, strides, padding, dilation, groups and 1-4 shards, even and
uneven; output and the input, weight and bias gradients."""

import itertools

import numpy as np
import pytest

import tessera
from reference_conv import conv2d_backward, conv2d_forward

# fp32 kernels against a float64 reference: every output sums at most C/g·k² ≤ 4·49 products of
# values in [-1, 1] (and the weight gradient N·Ho·Wo ≤ 2·15·23), so the rounding error stays far
# below 1e-4 of the largest magnitude; a wrong halo or a missing tap is off by O(1).
RTOL = 1e-4


def close(a, ref):
    scale = max(1.0, float(np.max(np.abs(ref))))
    return float(np.max(np.abs(a.astype(np.float64) - ref))) <= RTOL * scale


def run_case(k, s, p, d, g, shards, placement_dim=3, n=2, c=4, h=15, w=23, seed=0):
    rng = np.random.default_rng(seed)
    cout = 4
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
    wt = rng.uniform(-1, 1, (cout, c // g, k, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (cout,)).astype(np.float32)
    y_ref = conv2d_forward(x, wt, b, s, p, d, g)
    gy = rng.uniform(-1, 1, y_ref.shape).astype(np.float32)
    dx_ref, dw_ref, db_ref = conv2d_backward(x, wt, gy, s, p, d, g)
    r = tessera.functional.conv2d(x, wt, b, stride=s, padding=p, dilation=d, groups=g,
                                  mesh=tessera.DeviceMesh(sp=shards), placement=tessera.Shard(placement_dim),
                                  grad_output=gy)
    assert r["output"].shape == y_ref.shape
    assert r["grad_input"].shape == x.shape
    assert r["grad_weight"].shape == wt.shape
    assert r["grad_bias"].shape == b.shape
    for name, ref in (("output", y_ref), ("grad_input", dx_ref), ("grad_weight", dw_ref), ("grad_bias", db_ref)):
        assert close(r[name], ref), f"{name} differs: max err {np.max(np.abs(r[name] - ref)):.3e}"
    return r


GRID = [
    (k, s, p, d, g, shards)
    for k, s, d, g, shards in itertools.product((1, 3, 7), (1, 2), (1, 2), (1, 4), (1, 2, 3, 4))
    for p in sorted({d * (k - 1) // 2, 0 if k == 3 else d * (k - 1) // 2})
]


@pytest.mark.parametrize("k,s,p,d,g,shards", GRID)
def test_conv2d_sharded_w_matches_reference(k, s, p, d, g, shards):
    r = run_case(k, s, p, d, g, shards)
    if shards > 1 and k > 1:
        assert r["halo_elements"] > 0  # the sharded path really exchanged halos


@pytest.mark.parametrize("k,s,p,shards", [(3, 1, 1, 3), (7, 1, 3, 4), (3, 2, 1, 2), (5, 2, 2, 3)])
def test_conv2d_sharded_h_matches_reference(k, s, p, shards):
    run_case(k, s, p, 1, 1, shards, placement_dim=2)


def test_conv2d_batch_sharded_matches_reference():
    run_case(3, 1, 1, 1, 1, 2, placement_dim=0, n=4)


def test_conv2d_2d_mesh_tiles_match_reference():
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (1, 3, 17, 19)).astype(np.float32)
    w = rng.uniform(-1, 1, (5, 3, 3, 3)).astype(np.float32)
    gy = rng.uniform(-1, 1, (1, 5, 17, 19)).astype(np.float32)
    r = tessera.functional.conv2d(x, w, None, padding=1, mesh=tessera.DeviceMesh(sp_h=2, sp_w=3),
                                  placement=[tessera.Shard(2), tessera.Shard(3)], grad_output=gy)
    assert close(r["output"], conv2d_forward(x, w, None, 1, 1, 1, 1))
    dx, dw, _ = conv2d_backward(x, w, gy, 1, 1, 1, 1)
    assert close(r["grad_input"], dx) and close(r["grad_weight"], dw)
    assert r["grad_bias"] is None


def test_conv2d_without_grad_output_returns_output_only():
    x = np.ones((1, 2, 8, 12), np.float32)
    w = np.ones((2, 2, 3, 3), np.float32)
    r = tessera.functional.conv2d(x, w, padding=1, mesh=tessera.DeviceMesh(sp=3), placement=tessera.Shard(3))
    assert r["grad_input"] is None and r["grad_weight"] is None
    assert close(r["output"], conv2d_forward(x, w, None, 1, 1, 1, 1))


def test_conv2d_accepts_float64_and_non_contiguous_inputs():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 3, 10, 26))[:, :, :, ::2]  # float64, strided view
    w = rng.uniform(-1, 1, (3, 3, 3, 3))
    r = tessera.functional.conv2d(x, w, padding=1, mesh=tessera.DeviceMesh(sp=2), placement=tessera.Shard(3))
    assert close(r["output"], conv2d_forward(x, w, None, 1, 1, 1, 1))


def test_issue_example_stride2_over_4_shards():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 8, 16, 40)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    gy = rng.standard_normal((2, 8, 8, 20)).astype(np.float32)
    r = tessera.functional.conv2d(x, w, b, stride=2, padding=1, dilation=1, groups=1,
                                  mesh=tessera.DeviceMesh(sp=4), placement=tessera.Shard(3), grad_output=gy)
    assert set(r) >= {"output", "grad_input", "grad_weight", "grad_bias"}
    dx, dw, db = conv2d_backward(x, w, gy, 2, 1, 1, 1)
    assert close(r["output"], conv2d_forward(x, w, b, 2, 1, 1, 1))
    assert close(r["grad_input"], dx) and close(r["grad_weight"], dw) and close(r["grad_bias"], db)


def test_reference_catches_a_wrong_result():
    # The comparison can fail: a result missing one kernel tap is far outside the tolerance.
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (1, 2, 9, 9)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 2, 3, 3)).astype(np.float32)
    r = tessera.functional.conv2d(x, w, padding=1)
    w_broken = w.copy()
    w_broken[:, :, 0, 0] = 0
    assert close(r["output"], conv2d_forward(x, w, None, 1, 1, 1, 1))
    assert not close(r["output"], conv2d_forward(x, w_broken, None, 1, 1, 1, 1))


def test_device_names_the_memory_the_ranks_compute_in():
    x = np.random.default_rng(0).random((1, 2, 5, 6), dtype=np.float32)
    w = np.random.default_rng(1).random((3, 2, 3, 3), dtype=np.float32)
    cpu = tessera.functional.conv2d(x, w, padding=1, device="cpu")["output"]
    np.testing.assert_array_equal(cpu, tessera.functional.conv2d(x, w, padding=1)["output"])
    with pytest.raises(ValueError, match="expected 'cpu', 'cuda' or 'cuda:N'"):
        tessera.functional.conv2d(x, w, padding=1, device="tpu")
    # Without a usable GPU, "cuda" says why: not built here, or built with no device visible.
    try:
        gpu = tessera.functional.conv2d(x, w, padding=1, device="cuda")["output"]
    except (ValueError, NotImplementedError) as e:
        assert "cuda" in str(e)
    else:
        np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-6)
