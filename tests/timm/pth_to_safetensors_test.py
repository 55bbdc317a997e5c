#!/usr/bin/python3
"""tools/pth_to_safetensors.py on small state dicts: plain, {"state_dict": ...}, {"model": ...}
and DataParallel's "module." names all convert to the same tensors (names, dtypes and bits), tied
weights included; a file without a state dict is refused with a message."""
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "pth_to_safetensors.py")


def convert(obj, tmp, name):
    src, dst = os.path.join(tmp, name + ".pth"), os.path.join(tmp, name + ".safetensors")
    torch.save(obj, src)
    r = subprocess.run([sys.executable, TOOL, src, dst], capture_output=True, text=True)
    return r, dst


def main():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(4, 3, 1, 1, generator=g)
    sd = {"a.weight": w, "tied.weight": w, "a.bias": torch.randn(4, generator=g).double(),
          "bn.num_batches_tracked": torch.tensor(5)}
    with tempfile.TemporaryDirectory() as tmp:
        for name, obj in [("plain", sd), ("wrapped", {"state_dict": sd, "epoch": 3}), ("model", {"model": sd}),
                          ("dp", {"module." + k: v for k, v in sd.items()})]:
            r, dst = convert(obj, tmp, name)
            assert r.returncode == 0, f"{name}: {r.stderr}"
            out = load_file(dst)
            assert set(out) == set(sd), f"{name}: names {sorted(out)}"
            for k, v in sd.items():
                assert out[k].dtype == v.dtype and torch.equal(out[k], v), f"{name}: tensor {k} differs"
        r, _ = convert([1, 2, 3], tmp, "list")
        assert r.returncode != 0 and "holds no state dict" in r.stderr, r.stderr
    print("pth_to_safetensors: 4 layouts converted exactly, a non-state-dict refused")


if __name__ == "__main__":
    main()
