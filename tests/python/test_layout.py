"""Meshes, placements, layouts (core's balanced split) and their round trips through core's
redistribute over in-process ranks; the halo plan as plain data."""

import numpy as np
import pytest

import tessera


def test_mesh_spellings():
    assert tessera.DeviceMesh(sp=4).shape == (4,)
    m = tessera.DeviceMesh(dp=2, sp=3)
    assert m.shape == (2, 3) and m.names == ("dp", "sp") and m.size == 6
    assert m == tessera.DeviceMesh("dp=2,sp=3")
    assert m.coords_of(4) == [1, 1] and m.rank_at([1, 1]) == 4
    assert str(m) == "dp=2,sp=3"


def test_placements():
    assert tessera.Shard(3) == tessera.Shard(3) and tessera.Shard(3) != tessera.Shard(2)
    assert tessera.Shard(3).kind == "shard" and tessera.Shard(3).dim == 3
    assert tessera.Replicate().kind == "replicate" and tessera.Replicate().dim is None
    assert repr(tessera.Partial()) == "Partial()"


def test_uneven_balanced_split():
    lay = tessera.Layout(tessera.DeviceMesh(sp=3), (2, 4, 8, 10), tessera.Shard(3))
    widths = [lay.local_shape(r)[3] for r in range(3)]
    assert widths == [4, 3, 3]  # balanced: sizes differ by at most one, the first get the extra
    assert [lay.local_range(r, 3) for r in range(3)] == [(0, 4), (4, 7), (7, 10)]
    assert lay.local_offset(2) == (0, 0, 0, 7)


@pytest.mark.parametrize("mesh,placements,shape", [
    ("sp=3", [tessera.Shard(3)], (2, 3, 5, 11)),
    ("sp=4", [tessera.Shard(2)], (1, 2, 9, 4)),
    ("sp=2", [tessera.Replicate()], (1, 2, 3, 4)),
    ("dp=2,sp=3", [tessera.Shard(0), tessera.Shard(3)], (4, 2, 3, 7)),
    ("sp_h=2,sp_w=2", [tessera.Shard(2), tessera.Shard(3)], (1, 1, 5, 7)),
    ("a=2,b=2", [tessera.Shard(3), tessera.Shard(3)], (1, 1, 2, 9)),
])
def test_distribute_gather_round_trip(mesh, placements, shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    lay = tessera.Layout(tessera.DeviceMesh(mesh), shape, placements)
    pieces = tessera.distribute(x, lay)
    assert len(pieces) == lay.mesh.size
    for r, p in enumerate(pieces):
        assert p.shape == lay.local_shape(r)
        np.testing.assert_array_equal(p, x[lay.local_slices(r)])
    np.testing.assert_array_equal(tessera.gather(pieces, lay), x)


def test_gather_refuses_wrong_piece_shapes():
    lay = tessera.Layout(tessera.DeviceMesh(sp=2), (1, 1, 2, 5), tessera.Shard(3))
    with pytest.raises(tessera.InvalidArgument, match="piece 1 has shape"):
        tessera.gather([np.zeros((1, 1, 2, 3), np.float32), np.zeros((1, 1, 2, 3), np.float32)], lay)


def test_halo_plan_plain_data_7x7_over_3_uneven_shards():
    spec = tessera.ConvSpec(4, 4, 7, stride=1, padding=3, groups=4)
    lay = tessera.Layout(tessera.DeviceMesh(sp=3), (1, 4, 16, 20), tessera.Shard(3))
    plans = tessera.halo_plan(spec, lay)
    assert [p["rank"] for p in plans] == [0, 1, 2]
    assert [tuple(p["own"][3]) for p in plans] == [(0, 7), (7, 14), (14, 20)]
    # The middle rank needs 3 columns on each side, from ranks 0 and 2.
    mid = plans[1]
    assert tuple(mid["need"][3]) == (4, 17)
    assert sorted((r["peer"], tuple(r["box"][3])) for r in mid["recvs"]) == [(0, (4, 7)), (2, (14, 17))]
    assert mid["recv_elements"] == 2 * 3 * 16 * 4
    # Every receive is some rank's send (the plan is consistent across ranks).
    sends = {(p["rank"], s["peer"], str(s["box"])) for p in plans for s in p["sends"]}
    recvs = {(r["peer"], p["rank"], str(r["box"])) for p in plans for r in p["recvs"]}
    assert sends == recvs


def test_halo_plan_3x3_stride2():
    spec = tessera.ConvSpec(2, 2, 3, stride=2, padding=1)
    lay = tessera.Layout(tessera.DeviceMesh(sp=3), (1, 2, 8, 20), tessera.Shard(3))
    plans = tessera.halo_plan(spec, lay)
    out = tessera.conv_output_layout(spec, lay)
    assert out.global_shape == (1, 2, 4, 10)
    assert [tuple(p["out"][3]) for p in plans] == [out.local_range(r, 3) for r in range(3)]
    # The outputs [a, b) read [2a - 1, 2(b-1) - 1 + 3): core's halo rule, clipped at the border.
    for p in plans:
        a, b = p["out"][3]
        assert tuple(p["need"][3]) == (max(0, 2 * a - 1), min(20, 2 * (b - 1) + 2))


def test_partial_round_trip():
    # Replicate -> Partial keeps the value on coordinate 0 (the others hold zeros, so the sum is
    # the tensor); gathering Partial -> Replicate sums the pieces.
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    lay = tessera.Layout(tessera.DeviceMesh(sp=3), x.shape, tessera.Partial())
    pieces = tessera.distribute(x, lay)
    np.testing.assert_array_equal(pieces[0], x)
    assert not pieces[1].any() and not pieces[2].any()
    parts = [x * 0.5, x * 0.25, x * 0.25]
    np.testing.assert_array_equal(tessera.gather(parts, lay), x)
