// The collectives over UcxBackend::exchange. Small payloads: one direct round (every rank sends
// to every other) and reductions in rank order, so results equal the local backend's bit for bit.
// Large payloads: rings (reduce-scatter then all-gather), n-1 steps each; an all_reduce over a
// power-of-two group of 4 or more halves and doubles instead (log2 n steps each, the same bytes).
// A reduce step moves its block in chunks of kReduceChunkBytes, each reduced as it arrives.
//
// bf16/f16 reductions are summed in f32 and rounded to 16 bits once, so every rank gets the same
// bits. The direct round sends the 16-bit inputs and every rank widens them and reduces them in
// rank order in f32 (the local backend's result, bit for bit). Rings and halving run their reduce
// steps on an f32 copy and forward f32 partial sums (twice the bytes of 16-bit ones in those
// steps): rounding each hop's partial instead would add one rounding per hop, a bound growing
// with the group (n−1 roundings of u·|partial| against one). The rank that finishes a block
// divides it (Avg) and rounds it once; the gather steps then move the rounded 16-bit block.
#include <algorithm>
#include <cstring>

#include "tessera/comm/reduction.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"
#include "ucx_backend.hpp"

namespace tessera::comm::ucx {

// The kernels every host-memory backend shares (the local backend's, bit for bit).
using reduction::finish_avg;
using reduction::narrow_half;
using reduction::reduce_in_order;
using reduction::reduce_into;
using reduction::widen_half;

namespace {
/// Block b of n balanced blocks of `count`: [first, first + len).
std::pair<std::size_t, std::size_t> block(std::size_t count, int n, int b) {
  const std::size_t base = count / static_cast<std::size_t>(n), rem = count % static_cast<std::size_t>(n);
  const auto ub = static_cast<std::size_t>(b);
  return {ub * base + std::min(ub, rem), base + (ub < rem ? 1 : 0)};
}
char* at(void* p, std::size_t bytes) { return static_cast<char*>(p) + bytes; }
const char* at(const void* p, std::size_t bytes) { return static_cast<const char*>(p) + bytes; }

/// The reduced elements [first, first + len) of `acc` made final in `out`: divided by n (Avg),
/// then, for a 16-bit `out` (acc in f32), rounded into it once.
void finish_block(BufferView acc, BufferView out, std::size_t first, std::size_t len, ReduceOp op,
                  int n) {
  const std::size_t es = core::dtype_size(acc.dtype);
  if (op == ReduceOp::Avg) finish_avg(at(acc.data, first * es), len, acc.dtype, n);
  if (out.data != acc.data)
    narrow_half(static_cast<const float*>(acc.data) + first,
                at(out.data, first * core::dtype_size(out.dtype)), len, out.dtype);
}
}  // namespace

BufferView UcxBackend::widened(const void* data, std::size_t count, core::DType dt) {
  if (wide_.size() < count) wide_.resize(count);
  widen_half(data, wide_.data(), count, dt);
  return {wide_.data(), count, core::DType::F32, MemorySpace::Host};
}

void UcxBackend::all_reduce_now(BufferView buf, ReduceOp op) {
  const Header h = header(CollOp::AllReduce, buf.dtype, op, buf.count);
  const int n = size();
  const bool half = core::dtype_is_half(buf.dtype);
  // One rank: its buffer is the result (Avg included); no elements: nothing to do.
  if (n == 1 || buf.count == 0) return;
  const bool pow2 = n >= 4 && (n & (n - 1)) == 0;
  if (buf.bytes() > kDirectBytes || (pow2 && buf.bytes() > kHalvingBytes)) {
    // bf16/f16: the reduce steps accumulate in an f32 copy, the gather steps move 16 bits.
    const BufferView acc = half ? widened(buf.data, buf.count, buf.dtype) : buf;
    if (pow2)
      all_reduce_halving(acc, buf, op, h);
    else
      all_reduce_ring(acc, buf, op, h);
    return;
  }
  std::vector<Send> sends;
  std::vector<Recv> recvs;
  for (int p = 0; p < n; ++p)
    if (p != rank_) {
      sends.push_back({p, buf.data, buf.bytes()});
      recvs.push_back({p, buf.bytes()});
    }
  exchange(h, sends, recvs);
  // Rank order: ((x0 ⊕ x1) ⊕ x2) ...
  std::vector<char> mine(static_cast<char*>(buf.data), static_cast<char*>(buf.data) + buf.bytes());
  auto data_of = [&](int r) -> const char* {
    if (r == rank_) return mine.data();
    return recvs[static_cast<std::size_t>(r < rank_ ? r : r - 1)].payload();
  };
  std::vector<const void*> in(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) in[static_cast<std::size_t>(r)] = data_of(r);
  reduce_in_order(in, {buf.data}, buf.count, buf.dtype, op);
}

void UcxBackend::exchange_reduce(const Header& h, int to, const void* send, std::size_t send_count, int from,
                                 void* dst, std::size_t recv_count, std::size_t max_count, core::DType dt,
                                 ReduceOp op, std::uint32_t& step) {
  const std::size_t es = core::dtype_size(dt);
  const std::size_t per = std::max<std::size_t>(1, kReduceChunkBytes / es);  // elements per chunk
  const std::size_t chunks = std::max<std::size_t>(1, (max_count + per - 1) / per);
  scratch_.resize(std::max(scratch_.size(), std::min(per, max_count) * es));
  for (std::size_t c = 0; c < chunks; ++c, ++step) {
    const std::size_t s0 = std::min(send_count, c * per), s1 = std::min(send_count, (c + 1) * per);
    const std::size_t r0 = std::min(recv_count, c * per), r1 = std::min(recv_count, (c + 1) * per);
    std::vector<Recv> recvs{{from, (r1 - r0) * es, step, scratch_.data()}};
    exchange(h, {{to, at(send, s0 * es), (s1 - s0) * es, step}}, recvs);
    reduce_into(at(dst, r0 * es), scratch_.data(), r1 - r0, dt, op);
  }
}

void UcxBackend::all_reduce_ring(BufferView acc, BufferView out, ReduceOp op, const Header& h) {
  const int n = size();
  const std::size_t es = core::dtype_size(acc.dtype), eo = core::dtype_size(out.dtype);
  const int next = (rank_ + 1) % n, prev = (rank_ + n - 1) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  const std::size_t longest = block(acc.count, n, 0).second;  // earlier blocks are the longer
  std::uint32_t step = 0;
  // Reduce-scatter: after n-1 steps this rank holds the full reduction of its own block.
  for (int s = 0; s < n - 1; ++s) {
    const auto [so, sl] = block(acc.count, n, mod(rank_ - s - 1));
    const auto [ro, rl] = block(acc.count, n, mod(rank_ - s - 2));
    exchange_reduce(h, next, at(acc.data, so * es), sl, prev, at(acc.data, ro * es), rl, longest,
                    acc.dtype, op, step);
  }
  const auto [mo, ml] = block(acc.count, n, rank_);
  finish_block(acc, out, mo, ml, op, n);
  // All-gather of the finished blocks, straight into place (one message per block).
  for (int s = 0; s < n - 1; ++s, ++step) {
    const auto [so, sl] = block(out.count, n, mod(rank_ - s));
    const auto [ro, rl] = block(out.count, n, mod(rank_ - s - 1));
    std::vector<Recv> recvs{{prev, rl * eo, step, at(out.data, ro * eo)}};
    exchange(h, {{next, at(out.data, so * eo), sl * eo, step}}, recvs);
  }
}

// Power-of-two groups: recursive halving (Rabenseifner's reduce-scatter: at mask m = n/2 … 1 the
// partner is rank ^ m; the pair splits its range of blocks, each keeps one half and reduces the
// partner's copy of it into its own), which leaves rank r with block r fully reduced; then
// recursive doubling (m = 1 … n/2) gathers the blocks back. 2·log2(n) steps against the ring's
// 2(n−1), each rank sending and receiving the same 2(n−1)/n of the buffer; with more ranks than
// cores, every step waits for one partner only, not for the whole ring to be scheduled. Each
// block is reduced by one rank only, so every rank ends with the same bits.
void UcxBackend::all_reduce_halving(BufferView acc, BufferView out, ReduceOp op, const Header& h) {
  const int n = size();
  const std::size_t es = core::dtype_size(acc.dtype), eo = core::dtype_size(out.dtype);
  // Elements [offset, offset + length) of the blocks [lo, hi).
  auto span_of = [&](int lo, int hi) {
    const std::size_t first = block(acc.count, n, lo).first;
    const std::size_t end = hi == n ? acc.count : block(acc.count, n, hi).first;
    return std::pair<std::size_t, std::size_t>{first, end - first};
  };
  int lo = 0, hi = n;
  std::uint32_t step = 0;
  for (int m = n / 2; m >= 1; m /= 2) {
    const int partner = rank_ ^ m, mid = lo + (hi - lo) / 2;
    const bool upper = (rank_ & m) != 0;
    const auto [ko, kl] = upper ? span_of(mid, hi) : span_of(lo, mid);  // kept and reduced here
    const auto [so, sl] = upper ? span_of(lo, mid) : span_of(mid, hi);  // reduced by the partner
    // Every rank's halves here are m blocks; the first m blocks are the longest such span.
    exchange_reduce(h, partner, at(acc.data, so * es), sl, partner, at(acc.data, ko * es), kl,
                    span_of(0, m).second, acc.dtype, op, step);
    (upper ? lo : hi) = mid;
  }
  {
    const auto [mo, ml] = span_of(lo, hi);
    finish_block(acc, out, mo, ml, op, n);
  }
  // Here [lo, hi) is block rank_; the partner at mask m holds the aligned range next to ours.
  for (int m = 1; m < n; m *= 2, ++step) {
    const int partner = rank_ ^ m, plo = lo ^ m;
    const auto [mo, ml] = span_of(lo, hi);
    const auto [po, pl] = span_of(plo, plo + m);
    std::vector<Recv> recvs{{partner, pl * eo, step, at(out.data, po * eo)}};
    exchange(h, {{partner, at(out.data, mo * eo), ml * eo, step}}, recvs);
    lo = std::min(lo, plo);
    hi = lo + 2 * m;
  }
}

void UcxBackend::check_all_gather(BufferView send, BufferView recv) const {
  check_host(send, "all_gather");
  check_host(recv, "all_gather");
  const int n = size();
  TESSERA_CHECK(recv.count == send.count * static_cast<std::size_t>(n) && recv.dtype == send.dtype, "ucx: ", where(),
                ": all_gather: recv has ", recv.count, " elements, expected ", send.count * static_cast<std::size_t>(n),
                " (size ", n, " x send count ", send.count, ") of the send's dtype");
}

void UcxBackend::all_gather_now(BufferView send, BufferView recv) {
  const int n = size();
  const Header h = header(CollOp::AllGather, send.dtype, ReduceOp::Sum, send.count);
  const std::size_t bytes = send.bytes();
  char* mine = at(recv.data, static_cast<std::size_t>(rank_) * bytes);
  if (bytes && mine != send.data) std::memmove(mine, send.data, bytes);
  if (n == 1 || bytes == 0) return;
  if (bytes * static_cast<std::size_t>(n) <= kDirectBytes * 4) {
    std::vector<Send> sends;
    std::vector<Recv> recvs;
    for (int p = 0; p < n; ++p)
      if (p != rank_) {
        sends.push_back({p, mine, bytes});
        recvs.push_back({p, bytes, 0, at(recv.data, static_cast<std::size_t>(p) * bytes)});
      }
    exchange(h, sends, recvs);
    return;
  }
  const int next = (rank_ + 1) % n, prev = (rank_ + n - 1) % n;
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((rank_ - s) % n + n) % n, rb = ((rank_ - s - 1) % n + n) % n;
    std::vector<Recv> recvs{{prev, bytes, static_cast<std::uint32_t>(s), at(recv.data, static_cast<std::size_t>(rb) * bytes)}};
    exchange(h, {{next, at(recv.data, static_cast<std::size_t>(sb) * bytes), bytes, static_cast<std::uint32_t>(s)}},
             recvs);
  }
}

void UcxBackend::check_reduce_scatter(BufferView send, BufferView recv) const {
  check_host(send, "reduce_scatter");
  check_host(recv, "reduce_scatter");
  const int n = size();
  TESSERA_CHECK(send.count == recv.count * static_cast<std::size_t>(n) && recv.dtype == send.dtype, "ucx: ", where(),
                ": reduce_scatter: send has ", send.count, " elements, expected ",
                recv.count * static_cast<std::size_t>(n), " (size ", n, " x recv count ", recv.count, ")");
}

void UcxBackend::reduce_scatter_now(BufferView send, BufferView recv, ReduceOp op) {
  const int n = size();
  const Header h = header(CollOp::ReduceScatter, send.dtype, op, recv.count);
  const bool half = core::dtype_is_half(send.dtype);
  const std::size_t bytes = recv.bytes();
  const char* my_block = at(send.data, static_cast<std::size_t>(rank_) * bytes);
  if (n == 1 || bytes == 0) {
    if (bytes && recv.data != my_block) std::memmove(recv.data, my_block, bytes);
    return;  // Avg of one rank: itself
  }
  if (bytes <= kDirectBytes) {
    std::vector<Send> sends;
    std::vector<Recv> recvs;
    for (int p = 0; p < n; ++p)
      if (p != rank_) {
        sends.push_back({p, at(send.data, static_cast<std::size_t>(p) * bytes), bytes});
        recvs.push_back({p, bytes});
      }
    exchange(h, sends, recvs);
    std::vector<char> mine(my_block, my_block + bytes);
    auto data_of = [&](int r) -> const char* {
      return r == rank_ ? mine.data() : recvs[static_cast<std::size_t>(r < rank_ ? r : r - 1)].payload();
    };
    std::vector<const void*> in(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) in[static_cast<std::size_t>(r)] = data_of(r);
    reduce_in_order(in, {recv.data}, recv.count, recv.dtype, op);
    return;
  }
  // Ring on a working copy (bf16/f16: widened to f32, the partial sums travel in f32): block b
  // travels and accumulates; this rank ends with block rank_, which it finishes (Avg, rounding).
  std::vector<char> copy;
  BufferView work;
  if (half) {
    work = widened(send.data, send.count, send.dtype);
  } else {
    copy.assign(static_cast<const char*>(send.data),
                static_cast<const char*>(send.data) + send.bytes());
    work = {copy.data(), send.count, send.dtype, MemorySpace::Host};
  }
  const std::size_t wb = recv.count * core::dtype_size(work.dtype);  // bytes of a block of work
  const int next = (rank_ + 1) % n, prev = (rank_ + n - 1) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  std::uint32_t step = 0;
  for (int s = 0; s < n - 1; ++s) {
    const auto sb = static_cast<std::size_t>(mod(rank_ - s - 1)),
               rb = static_cast<std::size_t>(mod(rank_ - s - 2));
    exchange_reduce(h, next, at(work.data, sb * wb), recv.count, prev, at(work.data, rb * wb),
                    recv.count, recv.count, work.dtype, op, step);
  }
  const std::size_t mine = static_cast<std::size_t>(rank_) * recv.count;  // block rank_'s first
  if (half) {
    float* own = static_cast<float*>(work.data) + mine;
    if (op == ReduceOp::Avg) finish_avg(own, recv.count, core::DType::F32, n);
    narrow_half(own, recv.data, recv.count, recv.dtype);
  } else {
    std::memcpy(recv.data, at(work.data, mine * core::dtype_size(work.dtype)), bytes);
    if (op == ReduceOp::Avg) finish_avg(recv.data, recv.count, recv.dtype, n);
  }
}

void UcxBackend::check_broadcast(BufferView buf, int root) const {
  check_host(buf, "broadcast");
  TESSERA_CHECK(root >= 0 && root < size(), "ucx: ", where(), ": broadcast root ", root, " outside this group of ",
                size(), " ranks");
}

void UcxBackend::broadcast_now(BufferView buf, int root) {
  const Header h = header(CollOp::Broadcast, buf.dtype, ReduceOp::Sum, buf.count, root);
  const int n = size();
  if (n == 1) return;
  // Every rank hears from every other (the root with the data, the others with their header
  // only), so ranks that disagree on the root all find out.
  std::vector<Send> sends;
  std::vector<Recv> recvs;
  for (int p = 0; p < n; ++p)
    if (p != rank_) {
      sends.push_back({p, buf.data, rank_ == root ? buf.bytes() : 0});
      recvs.push_back({p, p == root ? buf.bytes() : 0, 0, p == root ? buf.data : nullptr});
    }
  exchange(h, sends, recvs);
}

void UcxBackend::check_all_to_all(BufferView send, BufferView recv) const {
  check_host(send, "all_to_all");
  check_host(recv, "all_to_all");
  const int n = size();
  TESSERA_CHECK(send.count == recv.count && send.dtype == recv.dtype && send.count % static_cast<std::size_t>(n) == 0,
                "ucx: ", where(), ": all_to_all: send has ", send.count, " and recv ", recv.count,
                " elements; both must be equal and a multiple of the group size ", n);
  TESSERA_CHECK(send.data != recv.data || send.count == 0, "ucx: ", where(), ": all_to_all cannot run in place");
}

void UcxBackend::all_to_all_now(BufferView send, BufferView recv) {
  const int n = size();
  const Header h = header(CollOp::AllToAll, send.dtype, ReduceOp::Sum, send.count);
  const std::size_t bytes = send.bytes() / static_cast<std::size_t>(n);
  if (bytes) std::memcpy(at(recv.data, static_cast<std::size_t>(rank_) * bytes),
                         at(send.data, static_cast<std::size_t>(rank_) * bytes), bytes);
  if (n == 1) return;
  std::vector<Send> sends;
  std::vector<Recv> recvs;
  for (int p = 0; p < n; ++p)
    if (p != rank_) {
      sends.push_back({p, at(send.data, static_cast<std::size_t>(p) * bytes), bytes});
      recvs.push_back({p, bytes, 0, at(recv.data, static_cast<std::size_t>(p) * bytes)});
    }
  exchange(h, sends, recvs);
}

void UcxBackend::barrier_now() {
  const Header h = header(CollOp::Barrier, core::DType::I32, ReduceOp::Sum, 0);
  if (size() == 1) return;
  std::vector<Send> sends;
  std::vector<Recv> recvs;
  for (int p = 0; p < size(); ++p)
    if (p != rank_) {
      sends.push_back({p, nullptr, 0});
      recvs.push_back({p, 0});
    }
  exchange(h, sends, recvs);
}

}  // namespace tessera::comm::ucx
