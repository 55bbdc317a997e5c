"""Training on the local backend from Python: per-step callback, and a sharded run whose loss
follows the unsharded one."""

import numpy as np
import pytest

import tessera


def test_train_callback_and_sharded_loss_equals_unsharded():
    seen = []
    kw = dict(model="convnext-atto", input=(3, 64, 128), batch=2, steps=3, seed=3, threads=1)
    r4 = tessera.train(mesh=tessera.DeviceMesh(sp=4), callback=seen.append, **kw)
    assert [s["step"] for s in seen] == [0, 1, 2]
    for s in seen:
        assert np.isfinite(s["loss"]) and s["step_time_s"] > 0
        assert len(s["peak_memory_bytes"]) == 4 and s["peak_memory_bytes"][0]["total"] > 0
        assert s["peak_memory_bytes"][0]["halo_buffer"] > 0  # sharded: halos were booked
    r1 = tessera.train(mesh="sp=1", **kw)
    l4 = [s["loss"] for s in r4["steps"]]
    l1 = [s["loss"] for s in r1["steps"]]
    np.testing.assert_allclose(l4, l1, rtol=1e-4)
    assert r1["steps"][0]["peak_memory_bytes"][0]["halo_buffer"] == 0
    assert r4["parameters"] == r1["parameters"] > 0


def test_model_spec_and_callback_errors():
    spec = tessera.model_preset("convnext-atto")
    assert spec.family == "convnext" and spec.total_stride == 32
    again = tessera.ModelSpec.from_json(spec.to_json())
    assert again.depths == spec.depths and again.widths == spec.widths

    def boom(step):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        tessera.train(model=again, input=(3, 32, 64), batch=1, steps=2, mesh="sp=2", callback=boom, threads=1)
    with pytest.raises(tessera.InvalidArgument):
        tessera.train(input=(3, 32, 64), batch=1, steps=1, mesh="sp=64")
