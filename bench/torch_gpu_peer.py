#!/usr/bin/env python3
"""PyTorch eager peer of bench_train and bench_conv on a CUDA GPU.

bench_train --device cuda and bench_conv --device cuda run this script as a subprocess with
--json and read the one JSON object it prints on stdout. It times, on the same GPU:

  train: ConvNeXt training steps (forward, cross-entropy loss, backward, AdamW) built in plain
         torch.nn to match tessera's ConvNeXt (core/src/models.cpp): stem 4x4/s4 conv + LayerNorm
         over channels; per stage (after the first) LayerNorm + 2x2/s2 conv; blocks dw7x7 ->
         LayerNorm -> pointwise 4x -> GELU (erf) -> pointwise -> LayerScale (1e-6) -> residual;
         head global average pool -> LayerNorm -> Linear. DropPath off (tessera's bench turns it
         off too). Pointwise layers as nn.Linear over the channels of the channels-last tensor
         (the reference implementation's form: a plain GEMM on an NHWC view) or, with
         --pointwise conv, as 1x1 convolutions (tessera's form).
  conv:  the 7x7 depthwise convolution (padding 3, bias) forward + backward (input, weight and
         bias gradients) at --shape N,C,H,W.

Both in channels-last memory format, with the TF32 setting given by --tf32
(torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32), cudnn.benchmark on.
--precision fp32 (default) runs in fp32; bf16 / fp16 is PyTorch AMP: the forward and the loss
under torch.autocast("cuda", dtype=torch.bfloat16 / torch.float16), parameters, gradients and
AdamW state in fp32 (master weights), and for fp16 a torch.amp.GradScaler (dynamic loss scaling),
as tessera's --precision means. The input stays fp32 (autocast casts it at the first conv).
Timing. train: a step's time is wall clock between torch.cuda.synchronize() calls, after --warmup
untimed steps (as bench_train times tessera's steps). conv: --warmup untimed calls, one batch of
max(1, --warmup) calls timed to size the batches, then --steps batches of N back-to-back calls,
each timed between two torch.cuda.Event records on the current stream and divided by N, with N the
fewest calls that last --min-batch-ms (at most 10000): bench_conv times tessera's calls the same
way (bench/gpu_bench.hpp, time_batched_ms and calls_per_batch), so that neither side's short
depthwise calls measure a host synchronisation.
Memory: torch.cuda.max_memory_allocated / max_memory_reserved of the timed steps (or calls): the
peak counters are reset once the warm-up is done, so cudnn.benchmark's algorithm trials (first
step) are not counted. As tessera's peak in bench_train, it counts what is live during a step:
parameters, gradients, optimizer state, the input, activations and library workspaces. The
reserved figure is what the caching allocator holds (warm-up's cache included, since it is kept).

Without torch, or without CUDA in torch, it prints {"error": "..."} and exits with status 4.
torch is imported only after the arguments are parsed, so --help works without it.
"""

import argparse
import json
import math
import statistics
import sys
import time

EXIT_NO_PEER = 4
MAX_CALLS_PER_BATCH = 10000  # bench/gpu_bench.hpp: kMaxCallsPerBatch


def int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers")
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"'{text}': every entry must be a positive integer")
    return values


def chw(text):
    return int_list(text.replace("x", ","))


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Times PyTorch eager on the GPU for bench_train / bench_conv --device cuda.")
    p.add_argument("--mode", choices=["train", "conv"], default="train")
    p.add_argument("--depths", type=int_list, default=[3, 3, 9, 3], help="ConvNeXt depths (train)")
    p.add_argument("--dims", type=int_list, default=[96, 192, 384, 768], help="ConvNeXt widths (train)")
    p.add_argument("--input", type=chw, default=[3, 512, 2048], help="CxHxW of one image (train)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--shape", type=int_list, default=[2, 96, 128, 512], help="N,C,H,W (conv)")
    p.add_argument("--steps", type=int, default=5,
                   help="timed steps (train) or timed batches (conv)")
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed steps (train) or calls (conv) first")
    p.add_argument("--min-batch-ms", type=float, default=10.0,
                   help="conv: a timed batch of back-to-back calls lasts at least this long")
    p.add_argument("--tf32", type=int, choices=[0, 1], default=0)
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="fp32, or PyTorch AMP (torch.autocast) in bf16/fp16 with fp32 master weights")
    p.add_argument("--pointwise", choices=["linear", "conv"], default="linear")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (else a line)")
    a = p.parse_args(argv)
    if len(a.depths) != len(a.dims):
        p.error(f"--depths has {len(a.depths)} entries but --dims has {len(a.dims)}")
    if len(a.input) != 3:
        p.error("--input must be CxHxW")
    if len(a.shape) != 4:
        p.error("--shape must be N,C,H,W")
    if a.steps < 1 or a.warmup < 0 or a.batch < 1 or a.classes < 1:
        p.error("--steps and --batch and --classes must be >= 1, --warmup >= 0")
    if not a.min_batch_ms > 0:
        p.error("--min-batch-ms must be > 0")
    return a


def build_convnext(torch, depths, dims, in_ch, classes, pointwise):
    nn = torch.nn
    F = torch.nn.functional

    class LayerNormChannels(nn.Module):
        """LayerNorm over C of an (N,C,H,W) tensor (eps 1e-6), through an NHWC view."""

        def __init__(self, c):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(c))
            self.bias = nn.Parameter(torch.zeros(c))
            self.c = c

        def forward(self, x):
            y = F.layer_norm(x.permute(0, 2, 3, 1), (self.c,), self.weight, self.bias, 1e-6)
            return y.permute(0, 3, 1, 2)

    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
            self.norm_w = nn.Parameter(torch.ones(dim))
            self.norm_b = nn.Parameter(torch.zeros(dim))
            if pointwise == "linear":
                self.pw1, self.pw2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            else:
                self.pw1, self.pw2 = nn.Conv2d(dim, 4 * dim, 1), nn.Conv2d(4 * dim, dim, 1)
            self.gamma = nn.Parameter(torch.full((dim,), 1e-6))
            self.dim = dim

        def forward(self, x):
            y = self.dwconv(x)
            y = y.permute(0, 2, 3, 1)  # (N,H,W,C): a contiguous view of a channels-last tensor
            y = F.layer_norm(y, (self.dim,), self.norm_w, self.norm_b, 1e-6)
            if pointwise == "linear":
                y = self.pw2(F.gelu(self.pw1(y))) * self.gamma
                return x + y.permute(0, 3, 1, 2)
            y = y.permute(0, 3, 1, 2)
            y = self.pw2(F.gelu(self.pw1(y)))
            return x + y * self.gamma.view(1, -1, 1, 1)

    layers = [nn.Conv2d(in_ch, dims[0], 4, stride=4), LayerNormChannels(dims[0])]
    for i, (d, w) in enumerate(zip(depths, dims)):
        if i > 0:
            layers += [LayerNormChannels(dims[i - 1]), nn.Conv2d(dims[i - 1], w, 2, stride=2)]
        layers += [Block(w) for _ in range(d)]

    class Head(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.norm = nn.LayerNorm(c, eps=1e-6)
            self.fc = nn.Linear(c, classes)

        def forward(self, x):
            return self.fc(self.norm(x.mean(dim=(2, 3))))

    layers.append(Head(dims[-1]))
    return nn.Sequential(*layers)


def warm_up(torch, fn, warmup):
    """Runs the untimed calls, then restarts the peak-memory counters (see the module's doc)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()


def timed_steps(torch, fn, steps, warmup):
    """Milliseconds of each step, wall clock between synchronize() calls (train)."""
    warm_up(torch, fn, warmup)
    ms = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append(1e3 * (time.perf_counter() - t0))
    return ms


def calls_per_batch(call_ms, min_batch_ms):
    """bench/gpu_bench.hpp's calls_per_batch: the fewest calls of call_ms that last min_batch_ms,
    in [1, MAX_CALLS_PER_BATCH] (the most for a call_ms that is not positive)."""
    if not call_ms > 0:
        return MAX_CALLS_PER_BATCH
    return max(1, min(MAX_CALLS_PER_BATCH, math.ceil(min_batch_ms / call_ms)))


def timed_batches(torch, fn, batches, warmup, min_batch_ms):
    """Milliseconds per call of each batch of N back-to-back calls between two CUDA events, and N
    (conv; bench/gpu_bench.hpp's time_batched_ms)."""
    warm_up(torch, fn, warmup)
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)

    def batch_ms(n):
        start.record()
        for _ in range(n):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    probe = max(1, warmup)
    n = calls_per_batch(batch_ms(probe) / probe, min_batch_ms)
    return [batch_ms(n) / n for _ in range(batches)], n


def stats(ms):
    q = statistics.quantiles(ms, n=4, method="inclusive") if len(ms) > 1 else [ms[0]] * 3
    return {"step_ms_median": statistics.median(ms), "step_ms_min": min(ms),
            "step_ms_max": max(ms), "step_ms_q1": q[0], "step_ms_q3": q[2], "reps": len(ms)}


def run(a):
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install raising something else
        return {"error": f"torch is not importable ({type(e).__name__}: {e}); install PyTorch with "
                         "CUDA to get the GPU peer"}
    if not torch.cuda.is_available():
        return {"error": f"torch {torch.__version__} sees no CUDA device (torch.version.cuda = "
                         f"{torch.version.cuda}); a CUDA build of PyTorch on a GPU machine is needed"}
    dev = torch.device(a.device)
    torch.cuda.set_device(dev)
    torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32)
    torch.backends.cudnn.allow_tf32 = bool(a.tf32)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    cl = torch.channels_last
    out = {"torch_version": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "device_name": torch.cuda.get_device_name(dev),
           "mode": a.mode, "tf32": bool(a.tf32), "channels_last": True, "eager": True,
           "precision": a.precision, "loss_scale": "dynamic" if a.precision == "fp16" else "off",
           "memory_covers": "timed steps (peak counters reset after warm-up)"}
    amp_dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[a.precision]

    def autocast():
        # enabled=False for fp32: the same code path, no casts.
        return torch.autocast("cuda", dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None)
    if a.mode == "train":
        model = build_convnext(torch, a.depths, a.dims, a.input[0], a.classes, a.pointwise)
        model = model.to(dev, memory_format=cl)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
        x = torch.randn(a.batch, *a.input, device=dev).contiguous(memory_format=cl)
        labels = torch.randint(0, a.classes, (a.batch,), device=dev)
        losses = []
        scaler = torch.amp.GradScaler("cuda", enabled=a.precision == "fp16")

        def step():
            opt.zero_grad(set_to_none=True)
            with autocast():
                loss = torch.nn.functional.cross_entropy(model(x), labels)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(loss)

        ms = timed_steps(torch, step, a.steps, a.warmup)
        out.update({"depths": a.depths, "dims": a.dims, "input": "x".join(map(str, a.input)),
                    "batch": a.batch, "classes": a.classes, "pointwise": a.pointwise,
                    "optimizer": "adamw", "parameters": sum(p.numel() for p in model.parameters()),
                    "loss_last": float(losses[-1].item())})
    else:
        n, c, h, w = a.shape
        conv = torch.nn.Conv2d(c, c, 7, padding=3, groups=c).to(dev, memory_format=cl)
        x = torch.randn(n, c, h, w, device=dev).contiguous(memory_format=cl).requires_grad_(True)
        dy = torch.randn(n, c, h, w, device=dev).contiguous(memory_format=cl)

        def fwd_bwd():
            x.grad = None
            conv.zero_grad(set_to_none=True)
            with autocast():
                y = conv(x)
            y.backward(dy.to(y.dtype))

        ms, calls = timed_batches(torch, fwd_bwd, a.steps, a.warmup, a.min_batch_ms)
        out.update({"shape": a.shape, "layer": "dw7x7_p3", "pass": "fwd+bwd",
                    "calls_per_batch": calls, "min_batch_ms": a.min_batch_ms,
                    "timing": "cuda_events_batched"})
    out.update(stats(ms))
    out["max_memory_allocated_mib"] = torch.cuda.max_memory_allocated(dev) / 2**20
    out["max_memory_reserved_mib"] = torch.cuda.max_memory_reserved(dev) / 2**20
    return out


def main(argv):
    a = parse_args(argv)
    try:
        out = run(a)
    except Exception as e:  # a CUDA error, out of memory, ...: still one JSON object
        out = {"error": f"{type(e).__name__}: {e}"}
    if a.json:
        print(json.dumps(out))
    elif "error" in out:
        print(f"torch_gpu_peer: {out['error']}", file=sys.stderr)
    else:
        print(f"torch {out['torch_version']} on {out['device_name']}: {a.mode} {a.precision} "
              f"{out['step_ms_median']:.2f} ms [{out['step_ms_min']:.2f} - {out['step_ms_max']:.2f}], "
              f"max allocated {out['max_memory_allocated_mib']:.1f} MiB, "
              f"reserved {out['max_memory_reserved_mib']:.1f} MiB")
    return EXIT_NO_PEER if "error" in out else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
