"""Independent float64 reference of a 2-D convolution (NCHW, PyTorch semantics: symmetric zero
padding, dilation, groups) and its gradients, written directly with NumPy: a sum over kernel
taps of strided input windows. Nothing here calls tessera."""

import numpy as np


def _out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _window(xp, i, j, s, d, ho, wo):
    # Input rows/cols that kernel tap (i, j) reads for every output: i*d + s*oh.
    return xp[:, :, i * d: i * d + s * (ho - 1) + 1: s, j * d: j * d + s * (wo - 1) + 1: s]


def conv2d_forward(x, w, b, s, p, d, g):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho, wo = _out_size(h, kh, s, p, d), _out_size(wd, kw, s, p, d)
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    wg = w.reshape(g, o // g, cg, kh, kw)
    y = np.zeros((n, g, o // g, ho, wo))
    for i in range(kh):
        for j in range(kw):
            win = _window(xp, i, j, s, d, ho, wo).reshape(n, g, cg, ho, wo)
            y += np.einsum("ngchw,goc->ngohw", win, wg[:, :, :, i, j])
    y = y.reshape(n, o, ho, wo)
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


def conv2d_backward(x, w, dy, s, p, d, g):
    """Returns (dx, dw, db) for y = conv2d_forward(x, w, b, ...)."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    dy = dy.astype(np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho, wo = dy.shape[2], dy.shape[3]
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    dxp = np.zeros_like(xp)
    wg = w.reshape(g, o // g, cg, kh, kw)
    dyg = dy.reshape(n, g, o // g, ho, wo)
    dw = np.zeros((g, o // g, cg, kh, kw))
    for i in range(kh):
        for j in range(kw):
            win = _window(xp, i, j, s, d, ho, wo).reshape(n, g, cg, ho, wo)
            dw[:, :, :, i, j] = np.einsum("ngchw,ngohw->goc", win, dyg)
            dwin = np.einsum("ngohw,goc->ngchw", dyg, wg[:, :, :, i, j]).reshape(n, c, ho, wo)
            _window(dxp, i, j, s, d, ho, wo)[...] += dwin
    dx = dxp[:, :, p: p + h, p: p + wd]
    return dx, dw.reshape(o, cg, kh, kw), dy.sum(axis=(0, 2, 3))
