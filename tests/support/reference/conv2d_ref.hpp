// Naive float64 reference convolution (NCHW), forward and all three gradients. Written from the
// textbook definition, shares no code with tessera's kernels: seven nested loops, no tricks.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::test::ref {

/// Hyper-parameters, symmetric zero padding as in PyTorch's Conv2d.
struct Conv2d {
  int n = 1, cin = 1, h = 1, w = 1;  // input (N,Cin,H,W)
  int cout = 1;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;

  int ho() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int wo() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
  std::size_t x_size() const { return std::size_t(n) * cin * h * w; }
  std::size_t w_size() const { return std::size_t(cout) * (cin / groups) * kh * kw; }
  std::size_t y_size() const { return std::size_t(n) * cout * ho() * wo(); }
};

/// y (N,Cout,Ho,Wo) = conv(x, wt) + b; `b` may be empty.
inline std::vector<double> conv2d_forward(const Conv2d& c, const std::vector<double>& x,
                                          const std::vector<double>& wt, const std::vector<double>& b) {
  const int ho = c.ho(), wo = c.wo(), cpg_in = c.cin / c.groups, cpg_out = c.cout / c.groups;
  std::vector<double> y(c.y_size(), 0.0);
  for (int n = 0; n < c.n; ++n)
    for (int co = 0; co < c.cout; ++co)
      for (int oh = 0; oh < ho; ++oh)
        for (int ow = 0; ow < wo; ++ow) {
          double acc = b.empty() ? 0.0 : b[co];
          const int g = co / cpg_out;
          for (int ci = 0; ci < cpg_in; ++ci)
            for (int i = 0; i < c.kh; ++i)
              for (int j = 0; j < c.kw; ++j) {
                const int ih = oh * c.sh - c.ph + i * c.dh;
                const int iw = ow * c.sw - c.pw + j * c.dw;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                const double xv = x[((std::size_t(n) * c.cin + g * cpg_in + ci) * c.h + ih) * c.w + iw];
                const double wv = wt[((std::size_t(co) * cpg_in + ci) * c.kh + i) * c.kw + j];
                acc += xv * wv;
              }
          y[((std::size_t(n) * c.cout + co) * ho + oh) * wo + ow] = acc;
        }
  return y;
}

/// Gradients of ⟨y, dy⟩: dx (N,Cin,H,W), dw (Cout,Cin/g,kh,kw), db (Cout).
struct Conv2dGrads {
  std::vector<double> dx, dw, db;
};

inline Conv2dGrads conv2d_backward(const Conv2d& c, const std::vector<double>& x,
                                   const std::vector<double>& wt, const std::vector<double>& dy) {
  const int ho = c.ho(), wo = c.wo(), cpg_in = c.cin / c.groups, cpg_out = c.cout / c.groups;
  Conv2dGrads g{std::vector<double>(c.x_size(), 0.0), std::vector<double>(c.w_size(), 0.0),
                std::vector<double>(c.cout, 0.0)};
  for (int n = 0; n < c.n; ++n)
    for (int co = 0; co < c.cout; ++co)
      for (int oh = 0; oh < ho; ++oh)
        for (int ow = 0; ow < wo; ++ow) {
          const double d = dy[((std::size_t(n) * c.cout + co) * ho + oh) * wo + ow];
          g.db[co] += d;
          const int grp = co / cpg_out;
          for (int ci = 0; ci < cpg_in; ++ci)
            for (int i = 0; i < c.kh; ++i)
              for (int j = 0; j < c.kw; ++j) {
                const int ih = oh * c.sh - c.ph + i * c.dh;
                const int iw = ow * c.sw - c.pw + j * c.dw;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                const std::size_t xi = ((std::size_t(n) * c.cin + grp * cpg_in + ci) * c.h + ih) * c.w + iw;
                const std::size_t wi = ((std::size_t(co) * cpg_in + ci) * c.kh + i) * c.kw + j;
                g.dx[xi] += wt[wi] * d;
                g.dw[wi] += x[xi] * d;
              }
        }
  return g;
}

/// How far a floating-point convolution may be from the exact one, element by element: a sum of
/// m terms computed in any order is within γ·Σ|terms| of the exact sum, where Σ|terms| is this
/// convolution run on |x|, |w|, |b| and |dy|, and γ = gamma(m) is the relative bound the caller
/// gives for m-term sums (its type's γ_{m+2}, +2 for rounding the inputs to that type, plus this
/// float64 reference's own γ_m).
struct Conv2dBounds {
  std::vector<double> y, dx, dw, db;
};

template <class Gamma>
Conv2dBounds conv2d_bounds(const Conv2d& c, const std::vector<double>& x, const std::vector<double>& wt,
                           const std::vector<double>& b, const std::vector<double>& dy, Gamma gamma) {
  auto abs_of = [](std::vector<double> v) {
    for (double& e : v) e = e < 0 ? -e : e;
    return v;
  };
  const std::vector<double> ax = abs_of(x), aw = abs_of(wt), ab = abs_of(b), ady = abs_of(dy);
  Conv2dBounds r;
  r.y = conv2d_forward(c, ax, aw, ab);
  Conv2dGrads g = conv2d_backward(c, ax, aw, ady);
  r.dx = std::move(g.dx);
  r.dw = std::move(g.dw);
  r.db = std::move(g.db);
  // Terms per sum: y sums (Cin/g)·kh·kw products and the bias; dx at most (Cout/g)·kh·kw; dw and
  // db one per output position of the batch.
  const std::int64_t m_y = std::int64_t(c.cin / c.groups) * c.kh * c.kw + 1;
  const std::int64_t m_dx = std::int64_t(c.cout / c.groups) * c.kh * c.kw;
  const std::int64_t m_dw = std::int64_t(c.n) * c.ho() * c.wo();
  for (double& e : r.y) e *= gamma(m_y);
  for (double& e : r.dx) e *= gamma(m_dx);
  for (double& e : r.dw) e *= gamma(m_dw);
  for (double& e : r.db) e *= gamma(m_dw);
  return r;
}

}  // namespace tessera::test::ref
