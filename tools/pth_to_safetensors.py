#!/usr/bin/env python3
"""Converts a PyTorch state dict (.pth / .pt) to a safetensors file that tessera reads
(nn::load_weights, Trainer::init_from).

    tools/pth_to_safetensors.py model.pth model.safetensors

Accepts a plain state dict or one wrapped as {"state_dict": ...} or {"model": ...} (training
checkpoints), and drops the "module." prefix DataParallel adds. Needs torch and safetensors
(Debian: python3-torch; tools/setup.sh installs both into /usr/bin/python3).
"""
import sys


def state_dict_of(obj, torch):
    """The tensor dict inside a loaded .pth: plain, or under a "state_dict" / "model" key."""
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict) or not obj:
        sys.exit("pth_to_safetensors: the file holds no state dict (a dict of tensors, possibly under "
                 "'state_dict' or 'model'); save one with torch.save(model.state_dict(), path)")
    tensors = {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}
    skipped = sorted(set(obj) - set(tensors))
    if skipped:
        print(f"pth_to_safetensors: skipped {len(skipped)} entries that are not tensors: {skipped[:5]}")
    if tensors and all(k.startswith("module.") for k in tensors):
        tensors = {k[len("module."):]: v for k, v in tensors.items()}
    # safetensors refuses shared storage (tied weights): each tensor gets its own contiguous copy.
    return {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: pth_to_safetensors.py IN.pth OUT.safetensors")
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError as e:
        sys.exit(f"pth_to_safetensors: {e}; this converter needs torch and safetensors: run it with "
                 f"/usr/bin/python3 after tools/setup.sh, or `pip install torch safetensors`")
    try:
        obj = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
    except TypeError:  # torch before 1.13 has no weights_only
        obj = torch.load(sys.argv[1], map_location="cpu")
    tensors = state_dict_of(obj, torch)
    save_file(tensors, sys.argv[2], metadata={"format": "pt", "source": sys.argv[1]})
    print(f"pth_to_safetensors: wrote {len(tensors)} tensors to {sys.argv[2]}")


if __name__ == "__main__":
    main()
