#!/usr/bin/env python3
"""bench_loader's peer: torchvision's ImageFolder + PIL + torch.utils.data.DataLoader over the folder
bench_loader wrote, timed the way bench_loader times data::Loader.

Per --workers count W: a DataLoader(batch_size=B, shuffle, num_workers=W, prefetch_factor=2) whose
workers each run torch.set_num_threads(1) (W = 0: the synchronous loader, in this process, also
on one thread). The sampler is a RandomSampler over as many samples as warm-up plus timed batches
need (a new permutation each epoch), so one iterator serves a whole repeat without restarting its
workers mid-run. Each repeat makes a new DataLoader, takes --warmup batches untimed (worker start-up
included there), then times --batches batches: images/s = batches x B / wall seconds. Repeats give
median [min-max]. Transforms: Resize((H, W)) with antialias when the output is smaller than the
images (PIL's own resampling, bilinear), RandomHorizontalFlip, ToTensor, Normalize(ImageNet).

Prints one JSON object on stdout (with --json; else also a short table); an error prints
{"error": ...} and exits 1.
"""
import argparse
import json
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folder", required=True, help="classification layout: one folder per class")
    p.add_argument("--height", type=int, required=True, help="output height")
    p.add_argument("--width", type=int, required=True, help="output width")
    p.add_argument("--resize", action="store_true", help="Resize((height, width)) first")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--batches", type=int, default=8, help="timed batches per repeat")
    p.add_argument("--warmup", type=int, default=2, help="untimed batches per repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--workers", default="0,1,2", help="comma-separated num_workers values")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def make_loader(args, workers):
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    from torchvision import datasets, transforms

    steps = [transforms.Resize((args.height, args.width), antialias=True)] if args.resize else []
    steps += [transforms.RandomHorizontalFlip(), transforms.ToTensor(),
              transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
    data = datasets.ImageFolder(args.folder, transform=transforms.Compose(steps))
    need = (args.warmup + args.batches) * args.batch
    sampler = RandomSampler(data, num_samples=need, generator=torch.Generator().manual_seed(args.seed))
    extra = {"prefetch_factor": 2, "worker_init_fn": lambda _: torch.set_num_threads(1)} if workers else {}
    return DataLoader(data, batch_size=args.batch, sampler=sampler, num_workers=workers, **extra)


def time_repeat(args, workers):
    """Images/s of one repeat, and the size of the first batch (to check the transforms)."""
    loader = iter(make_loader(args, workers))
    shape = None
    for _ in range(args.warmup):
        images, _labels = next(loader)
        shape = list(images.shape)
    t0 = time.perf_counter()
    for _ in range(args.batches):
        images, _labels = next(loader)
        shape = list(images.shape)
    seconds = time.perf_counter() - t0
    del loader  # shuts its workers down before the next repeat starts its own
    return args.batches * args.batch / seconds, shape


def run(args):
    import PIL
    import torch
    import torchvision

    torch.set_num_threads(1)  # the synchronous loader on one thread, as tessera's prefetch 0
    rows = []
    for workers in [int(w) for w in args.workers.split(",") if w]:
        rates, shape = [], None
        for _ in range(args.repeats):
            rate, shape = time_repeat(args, workers)
            rates.append(rate)
        rows.append({"workers": workers, "images_per_s_median": statistics.median(rates),
                     "images_per_s_min": min(rates), "images_per_s_max": max(rates),
                     "ms_per_batch_median": 1e3 * args.batch / statistics.median(rates),
                     "reps": len(rates), "batch_shape": shape})
    return {"torch_version": torch.__version__, "torchvision_version": torchvision.__version__,
            "pil_version": PIL.__version__, "python": sys.version.split()[0],
            "resize": args.resize, "runs": rows}


def main():
    args = parse_args()
    try:
        out = run(args)
    except Exception as e:  # the bench shows why the peer is missing
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 1
    if not args.json:
        for r in out["runs"]:
            print(f"workers {r['workers']}: {r['images_per_s_median']:.2f} images/s "
                  f"[{r['images_per_s_min']:.2f}-{r['images_per_s_max']:.2f}]")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
