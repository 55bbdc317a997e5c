"""Independent float64 references (NumPy only) of Linear, LayerScale, DropPath, squeeze-and-
excitation and nearest upsampling, forward and backward, written from the textbook formulas (the
DropPath keep decision from its documented hash: FNV-1a 64 of the layer name, then of the
(step, sample) int64 pair, a splitmix64 finaliser, kept when the 53-bit uniform is >= prob).
Nothing here calls tessera."""

import numpy as np

_M64 = (1 << 64) - 1


def linear(x, w, b, dy):
    """y (N,out) = x (N,in) · wᵀ + b."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    y = x @ w.T + (0 if b is None else b.astype(np.float64))
    dy = dy.astype(np.float64)
    return y, dy @ w, dy.T @ x, None if b is None else dy.sum(axis=0)


def layer_scale(x, gamma, dy):
    x, g, dy = x.astype(np.float64), gamma.astype(np.float64).reshape(1, -1, 1, 1), dy.astype(np.float64)
    return x * g, dy * g, (dy * x).sum(axis=(0, 2, 3))


def _fnv1a64(data: bytes, h: int) -> int:
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & _M64
    return h


def drop_path_keep(seed, step, layer, sample, prob):
    if prob <= 0:
        return True
    h = _fnv1a64(layer.encode(), (seed ^ 0x5BD1E9955BD1E995) & _M64)
    h = _fnv1a64(int(step).to_bytes(8, "little", signed=True) + int(sample).to_bytes(8, "little", signed=True), h)
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & _M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & _M64
    h ^= h >> 31
    return (h >> 11) * 2.0 ** -53 >= prob


def drop_path(x, dy, prob, seed, step, layer):
    scale = np.array([1.0 / (1.0 - prob) if drop_path_keep(seed, step, layer, n, prob) else 0.0
                      for n in range(x.shape[0])]).reshape(-1, *([1] * (x.ndim - 1)))
    return x.astype(np.float64) * scale, dy.astype(np.float64) * scale


def squeeze_excite(x, w1, b1, w2, b2, dy):
    """s = sigmoid(fc2(relu(fc1(mean_HW x)))), y = x · s; the gradients by the chain rule."""
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    w1, b1, w2, b2 = (a.astype(np.float64) for a in (w1, b1, w2, b2))
    hw = x.shape[2] * x.shape[3]
    pooled = x.mean(axis=(2, 3))                 # (N,C)
    z1 = pooled @ w1.T + b1                      # (N,S)
    h = np.maximum(z1, 0)
    z2 = h @ w2.T + b2                           # (N,C)
    s = 1.0 / (1.0 + np.exp(-z2))
    y = x * s[:, :, None, None]
    ds = (dy * x).sum(axis=(2, 3))               # (N,C)
    dz2 = ds * s * (1 - s)
    dh = dz2 @ w2
    dz1 = dh * (z1 > 0)
    dpooled = dz1 @ w1                           # (N,C)
    dx = dy * s[:, :, None, None] + dpooled[:, :, None, None] / hw
    return y, dx, dz1.T @ pooled, dz1.sum(axis=0), dz2.T @ h, dz2.sum(axis=0)


def upsample_nearest(x, dy, f):
    x = x.astype(np.float64)
    y = x.repeat(f, axis=2).repeat(f, axis=3)
    n, c, h, w = x.shape
    dx = dy.astype(np.float64).reshape(n, c, h, f, w, f).sum(axis=(3, 5))
    return y, dx
