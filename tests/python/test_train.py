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
        # The step takes as long as its slowest rank; each rank's own figures are beside it.
        assert len(s["ranks"]) == 4 and [r["rank"] for r in s["ranks"]] == [0, 1, 2, 3]
        assert s["step_time_s"] == max(r["step_time_s"] for r in s["ranks"])
        assert s["ranks"][0]["peak_bytes"]["total"] > 0
        assert s["ranks"][0]["peak_bytes"]["halo_buffer"] > 0  # sharded: halos were booked
    assert seen == r4["steps"]  # the callback's record is the returned one
    r1 = tessera.train(mesh="sp=1", **kw)
    l4 = [s["loss"] for s in r4["steps"]]
    l1 = [s["loss"] for s in r1["steps"]]
    # In float64 sharding changes nothing but summation order; in float32 the sharded loss is
    # within 16x as far from the float64 one as the unsharded float32 loss is, so far in the run
    # (the float32 rule of tests/nn/train_equivalence.hpp), plus 2 float32 ulps.
    e4 = [s["loss"] for s in tessera.train(mesh="sp=4", dtype="f64", **kw)["steps"]]
    e1 = [s["loss"] for s in tessera.train(mesh="sp=1", dtype="f64", **kw)["steps"]]
    np.testing.assert_allclose(e4, e1, rtol=1e-9)
    nu = 0.0
    for a, b, x in zip(l4, l1, e1):
        nu = max(nu, abs(b - x) / abs(x))
        assert abs(a - x) <= 16 * nu * abs(x) + 2 * abs(x) * 2.0**-23, (l4, l1, e1)
    with pytest.raises(tessera.Error, match=r'field "dtype" is "bf16": the trainer keeps its weights in f32 or f64 \(16-bit activations over f32 weights: precision bf16 or fp16\); use one of: f32, f64'):
        tessera.train(mesh="sp=1", dtype="bf16", **kw)
    assert r1["steps"][0]["ranks"][0]["peak_bytes"]["halo_buffer"] == 0
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


def test_diverged_run_raises_nonfinite_error_naming_step_and_parameter(tmp_path):
    seen = []
    trace = tmp_path / "diverged.json"
    kw = dict(model="convnext-atto", input=(3, 64, 256), batch=2, mesh="sp=2", steps=4, lr=1e8, clip=0.0,
              warmup=0, threads=1)
    with pytest.raises(tessera.NonFiniteError) as info:
        tessera.train(callback=seen.append, trace=str(trace), **kw)
    e = info.value
    assert isinstance(e, tessera.Error) and isinstance(e, FloatingPointError)
    msg = str(e)
    # The step (1-based in the message, 0-based on the exception), the parameter, the advice.
    assert f"diverged at step {e.step + 1}/4" in msg, msg
    assert e.parameter and f"'{e.parameter}'" in msg, msg
    assert "--lr" in msg and "--clip" in msg, msg
    # The callback saw exactly the steps that completed, all finite; the trace was written.
    assert [s["step"] for s in seen] == list(range(e.step)), (seen, e.step)
    assert all(np.isfinite(s["loss"]) and np.isfinite(s["grad_norm"]) for s in seen)
    assert trace.stat().st_size > 0
    # An lr that does not diverge still trains every step (the same run, clipped, at the default lr).
    ok = tessera.train(**{**kw, "lr": 2e-3, "clip": 1.0})
    assert [s["step"] for s in ok["steps"]] == [0, 1, 2, 3]


def test_device_is_checked_before_any_step():
    with pytest.raises(ValueError, match="training runs on cpu or cuda"):
        tessera.train(steps=1, device="h200")
    # Without a usable GPU, "cuda" stops at once with why (not built, or no device visible).
    try:
        r = tessera.train(steps=1, input=(3, 32, 64), device="cuda")
    except (ValueError, NotImplementedError) as e:
        assert "cuda" in str(e)
    else:
        assert len(r["steps"]) == 1


def test_micro_batches_schedule_and_stage_starts_are_checked_before_any_step():
    # Each keyword reaches the run description and is refused with its name, before a rank starts.
    with pytest.raises(ValueError, match="batch 3 is not a multiple of micro_batches 2"):
        tessera.train(steps=1, batch=3, micro_batches=2)
    with pytest.raises(ValueError, match='field "micro_batches" is 0: must be at least 1'):
        tessera.train(steps=1, micro_batches=0)
    with pytest.raises(ValueError, match='field "schedule" is "zigzag": expected one of: 1f1b, gpipe'):
        tessera.train(steps=1, schedule="zigzag")
    # A sequence of unit indices arrives as "4,9"; without a dim pp there is no stage to start.
    with pytest.raises(ValueError, match="stage_starts '4,9': mesh sp=1 has no pipeline stages"):
        tessera.train(steps=1, stage_starts=(4, 9))


def test_mixed_precision_halves_activations_and_reports_the_loss_scale():
    kw = dict(model="convnext-atto", input=(3, 64, 128), batch=2, steps=2, seed=3, threads=1, mesh="sp=2")
    seen = []
    f32 = tessera.train(**kw)
    f16 = tessera.train(precision="fp16", callback=seen.append, **kw)
    bf16 = tessera.train(precision="bf16", loss_scale="off", grad_reduce_dtype="bf16", **kw)
    assert [s["loss_scale"] for s in seen] == [65536.0, 65536.0]  # fp16: dynamic, 2^16 at the start
    assert all(s["skipped"] is False and s["skipped_steps"] == 0 for s in seen)
    assert all(s["loss_scale"] == 1.0 for s in bf16["steps"])
    act = lambda r: max(m["peak_bytes"]["activation"] for m in r["steps"][-1]["ranks"])
    assert act(bf16) <= 0.55 * act(f32) and act(f16) == act(bf16)
    for r in (f16, bf16):
        assert all(np.isfinite(s["loss"]) for s in r["steps"])
        assert abs(r["steps"][0]["loss"] - f32["steps"][0]["loss"]) <= 0.02 * f32["steps"][0]["loss"]
    with pytest.raises(tessera.Error, match="mixed precision keeps f32 master weights"):
        tessera.train(precision="bf16", dtype="f64", **kw)


def test_alarms_reach_the_callback_and_stop_raises(capsys):
    """tessera.train(alarm=, on_alarm=): each fired alarm is passed to on_alarm as its metrics
    dict and listed under "alarms" and in its step's record; the first of its kind is printed to
    sys.stderr, as tessera train prints it; an alarm whose action is stop raises tessera.Error."""
    seen = []
    kw = dict(model="convnext-atto", input=(3, 64, 128), batch=2, steps=8, seed=3, threads=1, mesh="sp=2")
    r = tessera.train(alarm="loss=1.01,grad_norm=off,grad_variance=off,step_time=off,warmup=2",
                      on_alarm=seen.append, **kw)
    assert seen and seen == r["alarms"]
    assert seen == [a for s in r["steps"] for a in s.get("alarms", [])]
    err = capsys.readouterr().err.splitlines()
    assert err == [seen[0]["message"] + "; later alarms of this kind are counted in the summary"], err
    losses = {s["step"]: s["loss"] for s in r["steps"]}
    for a in seen:
        assert a["alarm"] == "loss" and a["action"] == "warn" and a["value"] == losses[a["step"]]
        assert a["value"] > 1.01 * a["baseline"] and a["step"] >= 2
    with pytest.raises(tessera.Error, match=r"alarm loss at step \d+: .*stopped, as the alarm's action \(stop\) asks"):
        tessera.train(alarm="loss=1.01:stop,step_time=off,warmup=2", **kw)
    with pytest.raises(tessera.Error, match="no alarm named 'lost'"):
        tessera.train(alarm="lost=2", **kw)


def test_prefetched_input_pipeline_equals_loading_in_the_step():
    kw = dict(model="convnext-atto", input=(3, 64, 128), batch=2, steps=4, seed=5, threads=1, mesh="sp=2")
    seen = []
    ahead = tessera.train(prefetch=3, loader_workers=2, callback=seen.append, **kw)
    inline = tessera.train(prefetch=0, **kw)
    assert [s["loss"] for s in ahead["steps"]] == [s["loss"] for s in inline["steps"]]
    assert all(s["load_time_s"] > 0 and s["data_time_s"] >= 0 for s in seen)
    # Shuffled epochs (the default) visit other samples than the index order.
    plain = tessera.train(prefetch=0, shuffle=False, **kw)
    assert [s["loss"] for s in plain["steps"]] != [s["loss"] for s in inline["steps"]]
    with pytest.raises(ValueError, match="prefetch"):
        tessera.train(prefetch=-2, **kw)


def test_save_every_and_resume_auto_continue_the_run_bit_for_bit(tmp_path):
    kw = dict(model="convnext-atto", input=(3, 32, 64), batch=2, steps=4, seed=5, threads=1, mesh="sp=2")
    whole = tessera.train(**kw)
    ck = str(tmp_path / "ck")
    first = tessera.train(save=ck, save_every=1, keep_checkpoints=2, **{**kw, "steps": 4})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck", "ck.step2", "ck.step3"]
    # The final checkpoint is corrupted: resume auto skips it and takes ck.step3, so the one step
    # left is step 3 again, equal to the uninterrupted run's.
    data = bytearray((tmp_path / "ck").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "ck").write_bytes(bytes(data))
    again = tessera.train(save=ck, resume="auto", **kw)
    assert [s["step"] for s in again["steps"]] == [3]
    assert again["steps"][0]["loss"] == whole["steps"][3]["loss"] == first["steps"][3]["loss"]
    with pytest.raises(tessera.Error, match="save_every"):
        tessera.train(save_every=2, **kw)
