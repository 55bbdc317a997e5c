"""Zero-copy NumPy interop, and every C++ error class arriving as its Python exception with the
C++ message."""

import numpy as np
import pytest

import tessera


def test_from_numpy_is_a_view():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = tessera.from_numpy(a)
    assert t.shape == (2, 3, 4) and t.dtype == "f32" and t.shares_memory_with(a)
    b = np.asarray(t)
    assert np.shares_memory(a, b)
    a[0, 0, 0] = 42
    assert t.numpy()[0, 0, 0] == 42


def test_strided_view_keeps_strides():
    a = np.arange(40, dtype=np.float64).reshape(4, 10)[:, ::2]
    t = tessera.from_numpy(a)
    assert t.strides == (10, 2) and not t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), a)


def test_tensor_outlives_the_array_name():
    t = tessera.from_numpy(np.full((3,), 7, dtype=np.int64))
    import gc

    gc.collect()
    np.testing.assert_array_equal(t.numpy(), [7, 7, 7])


def test_unsupported_dtype():
    with pytest.raises(tessera.InvalidArgument, match="float16"):
        tessera.from_numpy(np.zeros(3, np.float16))


ERRORS = [
    ("InvalidArgument", tessera.InvalidArgument, ValueError),
    ("Unsupported", tessera.Unsupported, NotImplementedError),
    ("BackendError", tessera.BackendError, RuntimeError),
    ("TimeoutError", tessera.TimeoutError, TimeoutError),
    ("InternalError", tessera.InternalError, RuntimeError),
    ("OutOfMemory", tessera.OutOfMemory, MemoryError),
    ("Error", tessera.Error, Exception),
]


@pytest.mark.parametrize("kind,cls,builtin", ERRORS)
def test_every_error_class_is_mapped(kind, cls, builtin):
    with pytest.raises(cls) as e:
        tessera._tessera._raise_cpp_error(kind, f"{kind}: what, where, how to fix")
    assert isinstance(e.value, tessera.Error) and isinstance(e.value, builtin)
    assert str(e.value).endswith(f"{kind}: what, where, how to fix")
    if kind == "TimeoutError":
        assert isinstance(e.value, tessera.BackendError)


def test_real_errors_carry_the_cpp_message():
    x = np.zeros((1, 4, 8, 8), np.float32)
    with pytest.raises(ValueError, match=r"weight has shape \[4,3,3,3\]"):
        tessera.functional.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), padding=1)
    with pytest.raises(tessera.InvalidArgument, match="sp=2"):
        tessera.functional.conv2d(x, np.zeros((4, 4, 3, 3), np.float32), mesh=tessera.DeviceMesh(sp=2))
    with pytest.raises(NotImplementedError):
        tessera.functional.conv2d(x, np.zeros((4, 4, 3, 3), np.float32), padding=1,
                                  mesh=tessera.DeviceMesh(sp=2), placement=tessera.Shard(1))
    with pytest.raises(tessera.InvalidArgument):
        tessera.DeviceMesh(sp=0)
    with pytest.raises(ValueError, match="convnext-atto"):
        tessera.model_preset("no-such-model")
    with pytest.raises(tessera.InvalidArgument, match="dgx-a100"):
        tessera.sim.Topology.preset("no-such-cluster")
    with pytest.raises(tessera.InvalidArgument, match="grad_output has shape"):
        tessera.functional.conv2d(x, np.zeros((4, 4, 3, 3), np.float32), padding=1,
                                  grad_output=np.zeros((1, 4, 7, 7), np.float32))


def test_long_calls_release_the_gil():
    # While a worker thread is inside a long C++ call, this thread keeps running Python: it could
    # not if the call held the GIL (it would be frozen until the call returned).
    import threading
    import time

    state = {"inside": False, "done": False}

    def work():
        state["inside"] = True
        tessera.train(input=(3, 32, 128), batch=2, steps=2, mesh="sp=2", threads=1)
        state["done"] = True

    t = threading.Thread(target=work)
    t.start()
    ticks = 0
    while not state["done"]:
        if state["inside"]:
            ticks += 1
            time.sleep(0.001)
    t.join()
    assert ticks > 50  # a 2-step training run takes well over 50 ms
