#!/usr/bin/python3
"""Loads tessera's exports back into timm: for each model of make_reference.py, OUT_DIR/<model>
_export.safetensors (written by tests/nn/timm_weights_test.cpp through export_checkpoint) must go
into timm.create_model(<model>) with load_state_dict(strict=True) and equal the original weights
OUT_DIR/<model>.safetensors tensor for tensor (torch.equal: same dtype, shape and bits).
"""
import sys

MODELS = ["convnext_atto", "convnext_tiny", "regnety_002"]


def check(name, out_dir, torch, timm, load_file):
    exported = load_file(f"{out_dir}/{name}_export.safetensors")
    original = load_file(f"{out_dir}/{name}.safetensors")
    model = timm.create_model(name, pretrained=False).double()
    model.load_state_dict(exported, strict=True)  # raises on a missing, unexpected or misshapen tensor
    state = model.state_dict()
    bad = [k for k, v in original.items() if not torch.equal(state[k], v)]
    if bad or set(state) != set(original):
        sys.exit(f"{name}: {len(bad)} tensors differ from timm's original after the round trip "
                 f"(first: {bad[:3]}); names only on one side: {sorted(set(state) ^ set(original))[:5]}")
    print(f"{name}: {len(state)} tensors loaded into timm (strict) and equal to the original")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_export.py OUT_DIR")
    try:
        import torch
        import timm
        from safetensors.torch import load_file
    except ImportError as e:
        sys.exit(f"check_export.py: {e}: run tools/setup.sh (python3-torch, timm 1.0.12, safetensors)")
    for name in MODELS:
        check(name, sys.argv[1], torch, timm, load_file)


if __name__ == "__main__":
    main()
