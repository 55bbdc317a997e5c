"""Image folders and weights files from Python: tessera.train on a folder of JPEG/PNG images
(records carry what each rank decoded), and tessera.load_weights against a safetensors file
written here by hand (the format's reference: 8-byte header size, JSON header, raw bytes)."""

import json
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

import tessera

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = tmp_path_factory.mktemp("images")
    subprocess.run([sys.executable, str(ROOT / "tests" / "make_image_folder.py"), str(out)], check=True)
    return out


def write_safetensors(path, tensors):
    """The safetensors layout, written independently of tessera: little-endian u64 header size,
    the JSON header (dtype, shape, [begin, end) offsets), then each tensor's C-order bytes."""
    names = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}
        blobs.append(a.tobytes())
        at += a.nbytes
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_train_on_image_folder_reports_decoded_pixels(folders):
    seen = []
    kw = dict(model=str(ROOT / "examples" / "convnext-mini.json"), input=(3, 64, 128), batch=2, steps=2,
              threads=1, dtype="f64", classes=4, zoom=(1, 1.5))
    r2 = tessera.train(data=f"images:{folders / 'seg'}", mesh="sp=2", callback=seen.append, **kw)
    assert seen == r2["steps"]
    for s in seen:
        assert all(r["data"]["pixels_decoded"] > 0 for r in s["ranks"]), s["ranks"]
    # The run's totals per rank are the sums of its steps'.
    for r in (0, 1):
        assert r2["data"][r]["pixels_decoded"] == sum(s["ranks"][r]["data"]["pixels_decoded"] for s in seen)
    r1 = tessera.train(data=f"images:{folders / 'seg'}", mesh="sp=1", **kw)
    np.testing.assert_allclose([s["loss"] for s in r2["steps"]], [s["loss"] for s in r1["steps"]], rtol=1e-9)
    # Synthetic data decodes nothing: no data figures.
    syn = tessera.train(mesh="sp=1", model=kw["model"], input=(3, 32, 64), steps=1, threads=1)
    assert "data" not in syn["steps"][0]["ranks"][0] and "data" not in syn
    # The classification folder gives the task and its three classes; a task against it raises.
    cls = dict(data=f"images:{folders / 'cls'}", model=kw["model"], input=(3, 64, 64), steps=1, threads=1)
    assert len(tessera.train(augment=False, **cls)["steps"]) == 1
    with pytest.raises(tessera.InvalidArgument, match="classification layout"):
        tessera.train(task="segment", **cls)
    with pytest.raises(tessera.InvalidArgument, match="zoom"):
        tessera.train(zoom="2:1", **cls)


def test_load_weights_report_and_tensors(tmp_path, folders):
    rng = np.random.default_rng(36)
    head_w = rng.standard_normal((5, 320)).astype(np.float32)
    head_b = rng.standard_normal(5).astype(np.float32)
    stem = rng.standard_normal((40, 3, 4, 4)).astype(np.float32)  # ConvNeXt-atto: 4x4/4, 3 -> 40
    path = tmp_path / "part.safetensors"
    write_safetensors(path, {"head.fc.weight": head_w, "head.fc.bias": head_b, "stem.conv.weight": stem,
                             "extra.thing": head_b})
    r = tessera.load_weights(str(path), model="convnext-atto")  # classes: the file's, 5
    assert r["naming"] == "tessera" and r["loaded"] == 3 and r["unexpected"] == ["extra.thing"]
    assert not r["replaced"]
    for name, a in (("head.fc.weight", head_w), ("head.fc.bias", head_b), ("stem.conv.weight", stem)):
        assert np.array_equal(r["tensors"][name], a), name
    assert len(r["missing"]) == len(r["tensors"]) - 3 and "head.fc.weight" not in r["missing"]
    # Another class count: the classifier is re-initialised and says so; the rest loads.
    r7 = tessera.load_weights(str(path), model="convnext-atto", classes=7)
    assert sorted(r7["replaced"]) == ["head.fc.bias", "head.fc.weight"] and r7["loaded"] == 1
    assert r7["tensors"]["head.fc.weight"].shape == (7, 320)
    assert np.array_equal(r7["tensors"]["stem.conv.weight"], stem)
    # Every tensor under tessera's names, changed, goes in whole.
    full = {k: v + 1 for k, v in r["tensors"].items()}
    write_safetensors(tmp_path / "full.safetensors", full)
    back = tessera.load_weights(str(tmp_path / "full.safetensors"), model="convnext-atto")
    assert back["naming"] == "tessera" and back["loaded"] == len(full) and not back["missing"]
    assert all(np.array_equal(back["tensors"][k], v) for k, v in full.items())
    # The same file starts a run: the folder's 3 classes replace the file's 5-class head.
    run = tessera.train(model="convnext-atto", data=f"images:{folders / 'cls'}", input=(3, 64, 64), steps=1,
                        threads=1, init_from=str(tmp_path / "full.safetensors"))
    assert run["init_from"]["loaded"] == len(full) - 2 and run["init_from"]["naming"] == "tessera"
    assert sorted(run["init_from"]["replaced"]) == ["head.fc.bias", "head.fc.weight"]
    # A tensor of another shape (not the classifier) raises naming it.
    name = next(k for k in full if k.endswith("weight") and not k.startswith("head"))
    write_safetensors(tmp_path / "bad.safetensors", {name: np.zeros((3, 3), np.float32)})
    with pytest.raises(tessera.InvalidArgument, match=name.replace(".", r"\.")):
        tessera.load_weights(str(tmp_path / "bad.safetensors"), model="convnext-atto")
    with pytest.raises(tessera.InvalidArgument, match="task"):
        tessera.load_weights(str(path), task="detect")


def test_restart_markers_added_to_a_copy(folders, tmp_path):
    info = tessera.images_info(folders / "seg")
    assert info["jpegs"] > 0 and info["jpegs_from_top"] == info["jpegs"] and info["pngs"] > 0, info
    done = tessera.add_restarts(folders / "seg", tmp_path / "rs", rows=2)
    assert done["jpegs"] == info["jpegs"] and done["copied"] == info["pngs"] + info["other_files"]
    assert done["bytes_in"] > 0 and done["bytes_out"] > 0 and done["seconds"] >= 0, done
    after = tessera.images_info(tmp_path / "rs")
    assert after["jpegs_from_top"] == 0 and after["restart_rows_max"] == 2, after
    masks = sorted((folders / "seg" / "masks").iterdir())
    assert [m.read_bytes() for m in masks] == [(tmp_path / "rs" / "masks" / m.name).read_bytes() for m in masks]
    with pytest.raises(tessera.InvalidArgument, match="inside the source"):
        tessera.add_restarts(folders / "seg", folders / "seg" / "copy")
    with pytest.raises(tessera.InvalidArgument, match="1 to 65535"):
        tessera.add_restarts(folders / "seg", tmp_path / "x", rows=0)
