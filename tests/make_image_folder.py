#!/usr/bin/env python3
"""Writes small image folders for the image-data tests, deterministically, with PIL only:

  OUT/seg      segmentation: images/ (JPEG and PNG, RGB and gray) + masks/ (palette PNGs of
               class indices 0..3, with a band of 255: ignored)
  OUT/cls      classification: one folder per class (circle, square, triangle), JPEG only (a
               rank decodes only the iMCU columns its shard needs; PNG rows are decoded whole)
  OUT/seg_bad  seg plus one truncated JPEG (and its mask): a bad sample

Usage: make_image_folder.py OUT [--width W] [--height H]
"""

import argparse
import os
import random
import shutil

from PIL import Image, ImageDraw

SEG_CLASSES = 4


def palette_mask(size):
    mask = Image.new("P", size, 0)
    # A palette so that viewers show the classes; the pixel values are the class indices.
    pal = [0, 0, 0, 200, 40, 40, 40, 200, 40, 40, 40, 200] + [0] * (3 * 252)
    pal[3 * 255:3 * 256] = [255, 255, 255]
    mask.putpalette(pal)
    return mask


def scene(rng, size, gray):
    """An image and its mask: a noisy background (class 0) with a few shapes (classes 1-3)."""
    w, h = size
    img = Image.new("RGB", size)
    px = img.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = (rng.randrange(40, 90), rng.randrange(40, 90), rng.randrange(40, 90))
    mask = palette_mask(size)
    di, dm = ImageDraw.Draw(img), ImageDraw.Draw(mask)
    for _ in range(3):
        cls = rng.randrange(1, SEG_CLASSES)
        x0, y0 = rng.randrange(0, w - w // 4), rng.randrange(0, h - h // 4)
        box = [x0, y0, x0 + rng.randrange(w // 8, w // 4), y0 + rng.randrange(h // 8, h // 4)]
        colour = [(220, 60, 60), (60, 220, 60), (60, 60, 220)][cls - 1]
        (di.ellipse if cls == 1 else di.rectangle)(box, fill=colour)
        (dm.ellipse if cls == 1 else dm.rectangle)(box, fill=cls)
    dm.rectangle([0, h - 3, w - 1, h - 1], fill=255)  # an unlabelled band: ignored
    return (img.convert("L") if gray else img), mask


def write_seg(out, rng, size):
    os.makedirs(os.path.join(out, "images"))
    os.makedirs(os.path.join(out, "masks"))
    for i, (ext, gray) in enumerate([("jpg", False), ("png", False), ("jpg", False), ("png", True)]):
        img, mask = scene(rng, size, gray)
        name = "scene_%02d" % i
        if ext == "jpg":
            img.save(os.path.join(out, "images", name + ".jpg"), quality=90)
        else:
            img.save(os.path.join(out, "images", name + ".png"))
        mask.save(os.path.join(out, "masks", name + ".png"))


def write_cls(out, rng, size):
    w, h = size
    for c, kind in enumerate(["circle", "square", "triangle"]):
        os.makedirs(os.path.join(out, kind))
        for i in range(2):
            img = Image.new("RGB", size, (rng.randrange(30, 80),) * 3)
            d = ImageDraw.Draw(img)
            x0, y0 = rng.randrange(0, w // 2), rng.randrange(0, h // 2)
            box = [x0, y0, x0 + w // 3, y0 + h // 3]
            if kind == "circle":
                d.ellipse(box, fill=(230, 200, 40))
            elif kind == "square":
                d.rectangle(box, fill=(40, 200, 230))
            else:
                d.polygon([(box[0], box[3]), (box[2], box[3]), ((box[0] + box[2]) // 2, box[1])],
                          fill=(200, 40, 230))
            img.save(os.path.join(out, kind, "%s_%d.jpg" % (kind, i)), quality=90)


def write_seg_bad(out, seg, rng, size):
    shutil.copytree(seg, out)
    img, mask = scene(rng, size, False)
    path = os.path.join(out, "images", "scene_99.jpg")
    img.save(path, quality=90)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])  # truncated: no end-of-image marker
    mask.save(os.path.join(out, "masks", "scene_99.png"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=160)
    ap.add_argument("--height", type=int, default=96)
    a = ap.parse_args()
    size = (a.width, a.height)
    rng = random.Random(36)
    for sub in ("seg", "cls", "seg_bad"):
        shutil.rmtree(os.path.join(a.out, sub), ignore_errors=True)
    write_seg(os.path.join(a.out, "seg"), rng, size)
    write_cls(os.path.join(a.out, "cls"), rng, size)
    write_seg_bad(os.path.join(a.out, "seg_bad"), os.path.join(a.out, "seg"), rng, size)


if __name__ == "__main__":
    main()
