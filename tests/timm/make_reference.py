#!/usr/bin/python3
"""Reference runs of timm's ConvNeXt and RegNetY for tests/nn/timm_weights_test.cpp.

For each model: timm.create_model(pretrained=False) with every parameter and buffer randomised
(no branch near zero: LayerScale gammas ~U(0.5, 1.5), not 1e-6; positive running variances;
weights scaled for O(1) activations), in float64 and train() mode. Writes, into OUT_DIR:
  <model>.safetensors      its weights (timm names, the state dict before the forward)
  <model>_ref.safetensors  input, G, logits = model(input), grad.<name> of (logits * G).sum()
                           for every parameter, after.<name> for every BatchNorm running statistic
                           after the forward
Run with Debian's /usr/bin/python3 (python3-torch, timm 1.0.12, safetensors; tools/setup.sh).
"""
import sys

# (timm model, input shape): small inputs; 160 = 5 blocks of 32 pixels splits unevenly over 3 ranks.
MODELS = [("convnext_atto", (2, 3, 64, 96)), ("convnext_tiny", (2, 3, 64, 160)), ("regnety_002", (2, 3, 64, 160))]


def randomise(model, torch, gen):
    """Every tensor of the state dict drawn so no branch is near zero and activations stay O(1)."""
    with torch.no_grad():
        for name, t in model.state_dict().items():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "num_batches_tracked":
                continue
            if leaf == "running_var" or leaf == "gamma" or (leaf == "weight" and t.dim() == 1):
                t.copy_(torch.rand(t.shape, generator=gen, dtype=torch.float64) + 0.5)  # U(0.5, 1.5)
            elif leaf == "bias" or leaf == "running_mean":
                t.copy_(0.2 * torch.randn(t.shape, generator=gen, dtype=torch.float64))
            else:  # conv / linear weights: unit-variance outputs for unit-variance inputs
                fan_in = t[0].numel()
                t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float64) / fan_in**0.5)


def reference(name, shape, out_dir, torch, timm, save_file):
    gen = torch.Generator().manual_seed(1234)
    model = timm.create_model(name, pretrained=False, drop_path_rate=0.0).double().train()
    randomise(model, torch, gen)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, f"{out_dir}/{name}.safetensors")
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    logits = model(x)
    g = torch.randn(logits.shape, generator=gen, dtype=torch.float64)
    (logits * g).sum().backward()
    ref = {"input": x, "G": g, "logits": logits.detach()}
    for k, p in model.named_parameters():
        ref["grad." + k] = p.grad
    for k, v in model.state_dict().items():
        if k.endswith("running_mean") or k.endswith("running_var"):
            ref["after." + k] = v
    save_file({k: v.contiguous() for k, v in ref.items()}, f"{out_dir}/{name}_ref.safetensors")
    print(f"{name}: input {tuple(shape)}, logits norm {logits.norm().item():.6g}, {len(ref)} reference tensors")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_reference.py OUT_DIR")
    try:
        import torch
        import timm
        from safetensors.torch import save_file
    except ImportError as e:
        sys.exit(f"make_reference.py: {e}: the timm reference needs torch, timm and safetensors in "
                 f"{sys.executable}; run tools/setup.sh (it installs python3-torch, timm 1.0.12 and "
                 f"safetensors)")
    import os
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, shape in MODELS:
        reference(name, shape, sys.argv[1], torch, timm, save_file)


if __name__ == "__main__":
    main()
