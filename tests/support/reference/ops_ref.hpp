// Naive float64 references of the non-convolution compute ops, written from their definitions in
// tessera/compute/ops.hpp and sharing no code with the kernels. Images are row-major (N, C, P)
// with P = H·W pixels (a 2-d (N,C) tensor is P = 1).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tessera::test::ref {

using Vec = std::vector<double>;

inline std::size_t at(int n, int c, int p, int C, int P) { return (std::size_t(n) * C + c) * P + p; }

// ---- linear: x (M,K), w (N,K), b (N), y (M,N) ----------------------------------------------
inline Vec linear_forward(const Vec& x, const Vec& w, const Vec& b, int M, int K, int N) {
  Vec y(std::size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = b.empty() ? 0.0 : b[n];
      for (int k = 0; k < K; ++k) s += x[std::size_t(m) * K + k] * w[std::size_t(n) * K + k];
      y[std::size_t(m) * N + n] = s;
    }
  return y;
}
struct LinearGrads {
  Vec dx, dw, db;
};
inline LinearGrads linear_backward(const Vec& dy, const Vec& x, const Vec& w, int M, int K, int N) {
  LinearGrads g{Vec(std::size_t(M) * K, 0.0), Vec(std::size_t(N) * K, 0.0), Vec(N, 0.0)};
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const double d = dy[std::size_t(m) * N + n];
      g.db[n] += d;
      for (int k = 0; k < K; ++k) {
        g.dx[std::size_t(m) * K + k] += d * w[std::size_t(n) * K + k];
        g.dw[std::size_t(n) * K + k] += d * x[std::size_t(m) * K + k];
      }
    }
  return g;
}

// ---- layer norm over C for every (n, p) ------------------------------------------------------
struct LayerNormOut {
  Vec y, mean, rstd;  // mean, rstd: (N, P)
};
inline LayerNormOut layernorm_forward(const Vec& x, const Vec& gamma, const Vec& beta, int N, int C, int P,
                                      double eps) {
  LayerNormOut o{Vec(x.size()), Vec(std::size_t(N) * P), Vec(std::size_t(N) * P)};
  for (int n = 0; n < N; ++n)
    for (int p = 0; p < P; ++p) {
      double mean = 0, var = 0;
      for (int c = 0; c < C; ++c) mean += x[at(n, c, p, C, P)];
      mean /= C;
      for (int c = 0; c < C; ++c) var += (x[at(n, c, p, C, P)] - mean) * (x[at(n, c, p, C, P)] - mean);
      const double rstd = 1.0 / std::sqrt(var / C + eps);
      for (int c = 0; c < C; ++c)
        o.y[at(n, c, p, C, P)] = (x[at(n, c, p, C, P)] - mean) * rstd * gamma[c] + beta[c];
      o.mean[std::size_t(n) * P + p] = mean;
      o.rstd[std::size_t(n) * P + p] = rstd;
    }
  return o;
}
struct LayerNormGrads {
  Vec dx, dgamma, dbeta;
};
/// With x̂ = (x − mean)·rstd and g = γ·dy: dx = rstd·(g − mean_c g − x̂·mean_c(g·x̂)).
inline LayerNormGrads layernorm_backward(const Vec& dy, const Vec& x, const Vec& gamma, const Vec& mean,
                                         const Vec& rstd, int N, int C, int P) {
  LayerNormGrads g{Vec(x.size()), Vec(C, 0.0), Vec(C, 0.0)};
  for (int n = 0; n < N; ++n)
    for (int p = 0; p < P; ++p) {
      const double m = mean[std::size_t(n) * P + p], r = rstd[std::size_t(n) * P + p];
      double mg = 0, mgx = 0;
      for (int c = 0; c < C; ++c) {
        const double xh = (x[at(n, c, p, C, P)] - m) * r, gd = gamma[c] * dy[at(n, c, p, C, P)];
        mg += gd / C;
        mgx += gd * xh / C;
        g.dgamma[c] += dy[at(n, c, p, C, P)] * xh;
        g.dbeta[c] += dy[at(n, c, p, C, P)];
      }
      for (int c = 0; c < C; ++c) {
        const double xh = (x[at(n, c, p, C, P)] - m) * r;
        g.dx[at(n, c, p, C, P)] = r * (gamma[c] * dy[at(n, c, p, C, P)] - mg - xh * mgx);
      }
    }
  return g;
}

// ---- activations ------------------------------------------------------------------------------
inline double relu(double x) { return x > 0 ? x : 0.0; }
inline double gelu(double x) { return x * 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double gelu_grad(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * pi);
}

// ---- batch norm over (n, p) for every c -------------------------------------------------------
struct Moments {
  Vec sum, sumsq;
};
inline Moments channel_moments(const Vec& x, int N, int C, int P) {
  Moments m{Vec(C, 0.0), Vec(C, 0.0)};
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p) {
        m.sum[c] += x[at(n, c, p, C, P)];
        m.sumsq[c] += x[at(n, c, p, C, P)] * x[at(n, c, p, C, P)];
      }
  return m;
}
inline Vec batchnorm_forward(const Vec& x, const Vec& mean, const Vec& rstd, const Vec& gamma, const Vec& beta,
                             int N, int C, int P) {
  Vec y(x.size());
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p)
        y[at(n, c, p, C, P)] = (x[at(n, c, p, C, P)] - mean[c]) * rstd[c] * gamma[c] + beta[c];
  return y;
}
/// Σ dy and Σ dy·x̂ per channel.
inline Moments batchnorm_backward_reduce(const Vec& dy, const Vec& x, const Vec& mean, const Vec& rstd,
                                         int N, int C, int P) {
  Moments m{Vec(C, 0.0), Vec(C, 0.0)};
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p) {
        m.sum[c] += dy[at(n, c, p, C, P)];
        m.sumsq[c] += dy[at(n, c, p, C, P)] * (x[at(n, c, p, C, P)] - mean[c]) * rstd[c];
      }
  return m;
}
inline Vec batchnorm_backward_data(const Vec& dy, const Vec& x, const Vec& mean, const Vec& rstd,
                                   const Vec& gamma, const Vec& sum_dy, const Vec& sum_dy_xhat, double count,
                                   int N, int C, int P) {
  Vec dx(x.size());
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p) {
        const double xh = (x[at(n, c, p, C, P)] - mean[c]) * rstd[c];
        dx[at(n, c, p, C, P)] =
            gamma[c] * rstd[c] * (dy[at(n, c, p, C, P)] - sum_dy[c] / count - xh * sum_dy_xhat[c] / count);
      }
  return dx;
}

// ---- per-channel scaling, channel sum / broadcast, upsampling ---------------------------------
/// s has C entries (per channel) or N·C (per sample).
inline double scale_of(const Vec& s, int n, int c, int C) {
  return s.size() == std::size_t(C) ? s[c] : s[std::size_t(n) * C + c];
}
inline Vec scale_channels(const Vec& x, const Vec& s, int N, int C, int P) {
  Vec y(x.size());
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p) y[at(n, c, p, C, P)] = x[at(n, c, p, C, P)] * scale_of(s, n, c, C);
  return y;
}
/// ds (same size as s) = Σ dy·x over the broadcast dims.
inline Vec scale_channels_ds(const Vec& dy, const Vec& x, std::size_t s_size, int N, int C, int P) {
  Vec ds(s_size, 0.0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p)
        ds[s_size == std::size_t(C) ? c : std::size_t(n) * C + c] += dy[at(n, c, p, C, P)] * x[at(n, c, p, C, P)];
  return ds;
}
inline Vec channel_sum(const Vec& x, int N, int C, int P) {
  Vec y(std::size_t(N) * C, 0.0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p) y[std::size_t(n) * C + c] += x[at(n, c, p, C, P)];
  return y;
}
inline Vec channel_broadcast(const Vec& g, double scale, int N, int C, int P) {
  Vec y(std::size_t(N) * C * P);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p) y[at(n, c, p, C, P)] = g[std::size_t(n) * C + c] * scale;
  return y;
}
/// x (N,C,H,W) → y (N,C,H·f,W·f).
inline Vec upsample_nearest(const Vec& x, int N, int C, int H, int W, int f) {
  Vec y(x.size() * f * f);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < H * f; ++i)
        for (int j = 0; j < W * f; ++j)
          y[((std::size_t(n) * C + c) * H * f + i) * W * f + j] = x[((std::size_t(n) * C + c) * H + i / f) * W + j / f];
  return y;
}
inline Vec upsample_nearest_backward(const Vec& dy, int N, int C, int H, int W, int f) {
  Vec dx(std::size_t(N) * C * H * W, 0.0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < H * f; ++i)
        for (int j = 0; j < W * f; ++j)
          dx[((std::size_t(n) * C + c) * H + i / f) * W + j / f] += dy[((std::size_t(n) * C + c) * H * f + i) * W * f + j];
  return dx;
}

// ---- softmax cross-entropy over K for every (n, p) ---------------------------------------------
struct SoftmaxCe {
  double loss = 0;
  Vec dlogits;
};
inline SoftmaxCe softmax_cross_entropy(const Vec& logits, const std::vector<std::int64_t>& labels, int N, int K,
                                       int P, double grad_scale) {
  SoftmaxCe o{0.0, Vec(logits.size(), 0.0)};
  for (int n = 0; n < N; ++n)
    for (int p = 0; p < P; ++p) {
      const std::int64_t label = labels[std::size_t(n) * P + p];
      if (label < 0) continue;
      double mx = logits[at(n, 0, p, K, P)];
      for (int k = 1; k < K; ++k) mx = std::max(mx, logits[at(n, k, p, K, P)]);
      double z = 0;
      for (int k = 0; k < K; ++k) z += std::exp(logits[at(n, k, p, K, P)] - mx);
      o.loss += -(logits[at(n, int(label), p, K, P)] - mx - std::log(z));
      for (int k = 0; k < K; ++k)
        o.dlogits[at(n, k, p, K, P)] =
            (std::exp(logits[at(n, k, p, K, P)] - mx) / z - (k == label ? 1.0 : 0.0)) * grad_scale;
    }
  return o;
}

// ---- optimizers (one step, state updated in place) ---------------------------------------------
inline void sgd_step(Vec& p, const Vec& g, Vec& buf, double lr, double momentum, double wd, bool nesterov) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double gi = g[i] + wd * p[i];
    buf[i] = momentum * buf[i] + gi;
    const double v = nesterov ? gi + momentum * buf[i] : buf[i];
    p[i] -= lr * v;
  }
}
/// AdamW (Loshchilov & Hutter, as torch.optim.AdamW): decay, moments, bias-corrected step.
inline void adamw_step(Vec& p, const Vec& g, Vec& m, Vec& v, double lr, double b1, double b2, double eps,
                       double wd, std::int64_t step) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1.0 - lr * wd;
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    const double mhat = m[i] / (1 - std::pow(b1, double(step)));
    const double vhat = v[i] / (1 - std::pow(b2, double(step)));
    p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
  }
}

// ---- top-k gradient compression (compute::topk_select and friends) ---------------------------
/// The k indices of the largest |acc| (NaN largest, ties to the lower index), ascending: a full
/// stable sort of every index by |acc| descending, then the first k sorted by index.
inline std::vector<std::int64_t> topk_indices(const Vec& acc, std::int64_t k) {
  std::vector<std::int64_t> idx(acc.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = std::int64_t(i);
  auto key = [&](std::int64_t i) { return std::isnan(acc[std::size_t(i)]) ? HUGE_VAL : std::fabs(acc[std::size_t(i)]); };
  std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) { return key(a) > key(b); });
  idx.resize(std::size_t(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}
/// grad = Σ over blocks (in order) of each block's (index, value) pairs, zero elsewhere.
inline Vec topk_scatter_add(const std::vector<std::vector<std::int64_t>>& indices, const std::vector<Vec>& values,
                            std::size_t n) {
  Vec g(n, 0.0);
  for (std::size_t q = 0; q < indices.size(); ++q)
    for (std::size_t j = 0; j < indices[q].size(); ++j) g[std::size_t(indices[q][j])] += values[q][j];
  return g;
}

}  // namespace tessera::test::ref
