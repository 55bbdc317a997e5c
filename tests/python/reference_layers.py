"""Independent float64 references (NumPy only) of LayerNorm over channels, BatchNorm with batch
statistics, the activations and global average pooling, with their gradients written out from
the textbook formulas. Nothing here calls tessera."""

import math

import numpy as np


def _norm(x, w, b, dy, axes, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)  # biased, as in the forward of both
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd
    shape = [1, -1, 1, 1]
    y = xhat * w.reshape(shape) + b.reshape(shape)
    if dy is None:
        return y, None, None, None
    dy = dy.astype(np.float64)
    m = np.prod([x.shape[a] for a in axes])
    dxhat = dy * w.reshape(shape)
    dx = rstd / m * (m * dxhat - dxhat.sum(axis=axes, keepdims=True)
                     - xhat * (dxhat * xhat).sum(axis=axes, keepdims=True))
    return y, dx, (dy * xhat).sum(axis=(0, 2, 3)), dy.sum(axis=(0, 2, 3))


def layer_norm(x, w, b, dy, eps):
    """Normalises over C per (n, h, w)."""
    return _norm(x, w, b, dy, (1,), eps)


def batch_norm(x, w, b, dy, eps):
    """Normalises over (N, H, W) per channel."""
    return _norm(x, w, b, dy, (0, 2, 3), eps)


_erf = np.vectorize(math.erf)


def activation(x, dy, kind):
    x = x.astype(np.float64)
    if kind == "relu":
        return np.maximum(x, 0), dy * (x > 0)
    if kind == "sigmoid":
        s = 1 / (1 + np.exp(-x))
        return s, dy * s * (1 - s)
    cdf = 0.5 * (1 + _erf(x / math.sqrt(2)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return x * cdf, dy * (cdf + x * pdf)


def global_avg_pool(x, dy):
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    return x.mean(axis=(2, 3)), np.broadcast_to(dy.astype(np.float64)[:, :, None, None] / (h * w), x.shape)
