// Softmax cross-entropy over dim 1 of logits (N,K) or (N,K,H,W) with i64 labels: the max is
// subtracted before exponentiating (stable), sums and the loss accumulate in double, labels < 0
// are ignored and a label ≥ K is refused before anything is written. Pixel blocks as in layer norm.
#include <cmath>
#include <sstream>
#include <vector>

#include "ops_common.hpp"
#include "ops_kernels.hpp"
#include "ops_math.hpp"

namespace tessera::compute::cpu::ops {

namespace {

/// "[n]" or "[n,h,w]": the position of flat index i in a tensor of `shape`.
std::string position(const core::Shape& shape, std::int64_t i) {
  std::vector<std::int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] > 0 ? i % shape[d] : 0;
    i = shape[d] > 0 ? i / shape[d] : 0;
  }
  return core::shape_str(idx);
}

}  // namespace

template <class T>
void run_softmax_cross_entropy(const OpCall& call, ThreadPool& pool) {
  const core::Tensor labels = call.input("labels").contiguous();
  const std::int64_t* lab = labels.data<std::int64_t>();
  const NcpIn<T> xin(call.input("logits"));
  const Ncp<const T> x = xin.view;
  const std::int64_t K = x.c, P = x.p;
  for (std::int64_t i = 0; i < labels.numel(); ++i)
    TESSERA_CHECK(lab[i] < K, "softmax_cross_entropy: label ", lab[i], " at position ",
                  position(labels.shape(), i), " of labels ", labels.describe(), " is out of range for ",
                  K, " classes (labels must be < ", K, "; negative labels are ignored)");
  NcpOut<T> dout(call.output("dlogits"), false);
  const Ncp<T> dl = dout.view;
  const double gs = call.scalar("grad_scale");
  const std::int64_t B = block_pixels<T>(P, K), blocks = P > 0 ? ceil_div(P, B) : 0;
  // T scratch: the block's logits, then their exponentials (K rows of B), the row max and
  // grad_scale / Σexp per pixel; double: Σexp.
  const Scratch<T> scratch(call.input("logits"), pool.size(), K * B + 2 * B, B);

  const std::vector<double> part =
      chunk_partials(pool, x.n * blocks, 2 * K * B, 1, [&](std::int64_t unit, int worker, double* loss) {
        const std::int64_t n = unit / blocks, p0 = (unit % blocks) * B, L = std::min(B, P - p0);
        const std::int64_t* lrow = lab + n * P + p0;
        T* stage = scratch.ts(worker);
        T* mx = stage + K * B;
        T* inv = mx + B;
        double* sum = scratch.ds(worker);
        // Pass 1: stage the logits and take the max over classes.
        for (std::int64_t k = 0; k < K; ++k) {
          const T* row = x.plane(n, k) + p0;
          if (k + kPrefetchRows < K) prefetch_run(x.plane(n, k + kPrefetchRows) + p0, L);
          T* st = stage + k * L;
          vec_for<T>(L, [&](std::int64_t i, auto len) {
            const Vec<T> v = vload(row + i, len);
            vstore(st + i, v, len);
            if (k == 0) {
              vstore(mx + i, v, len);
            } else {
              const Vec<T> m = vload(mx + i, len);
              vstore(mx + i, v > m ? v : m, len);
            }
          });
        }
        // The loss terms −log softmax at the label = log Σexp − (x_label − max), with Σexp below.
        std::fill(sum, sum + L, 0.0);
        for (std::int64_t k = 0; k < K; ++k) {
          T* st = stage + k * L;
          vec_for<T>(L, [&](std::int64_t i, auto len) {
            const Vec<T> e = exp_lanes(vload(st + i, len) - vload(mx + i, len));
            vstore(st + i, e, len);
            astore<T>(sum + i, aload<T>(sum + i, len) + widen<T>(e), len);
          });
        }
        for (std::int64_t i = 0; i < L; ++i) {
          const std::int64_t l = lrow[i];
          if (l >= 0) *loss += std::log(sum[i]) - (double(x.plane(n, l)[p0 + i]) - double(mx[i]));
          inv[i] = l >= 0 ? static_cast<T>(gs / sum[i]) : T(0);
        }
        // dlogits = (softmax − onehot)·grad_scale, zero where the label is ignored.
        for (std::int64_t k = 0; k < K; ++k) {
          const T* st = stage + k * L;
          T* out = dl.plane(n, k) + p0;
          if (k + kPrefetchRows < K) prefetch_run(dl.plane(n, k + kPrefetchRows) + p0, L, true);
          vec_for<T>(L, [&](std::int64_t i, auto len) {
            vstore(out + i, vload(st + i, len) * vload(inv + i, len), len);
          });
        }
        for (std::int64_t i = 0; i < L; ++i)
          if (lrow[i] >= 0) dl.plane(n, lrow[i])[p0 + i] -= static_cast<T>(gs);
      });
  dout.commit();
  double total = 0;
  for (double v : part) total += v;
  call.output("loss").data<double>()[0] = total;
}

template void run_softmax_cross_entropy<float>(const OpCall&, ThreadPool&);
template void run_softmax_cross_entropy<double>(const OpCall&, ThreadPool&);

}  // namespace tessera::compute::cpu::ops
