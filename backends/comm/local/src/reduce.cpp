// Data movement of the local collectives, done by the last rank to arrive: rank-order reductions
// (bit-reproducible; the kernels every host-memory backend shares, tessera/comm/reduction.hpp)
// and block copies between the ranks' buffers.
#include <cstring>

#include "tessera/comm/reduction.hpp"
#include "world_state.hpp"

namespace tessera::comm::local {
namespace {

const std::byte* at(const void* base, std::size_t element, std::size_t elem_bytes) {
  return static_cast<const std::byte*>(base) + element * elem_bytes;
}
std::byte* at(void* base, std::size_t element, std::size_t elem_bytes) {
  return static_cast<std::byte*>(base) + element * elem_bytes;
}

/// memcpy that accepts empty and identical (in-place) ranges.
void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}

}  // namespace

void perform_collective(const std::vector<CollectiveCall>& calls) {
  const CollectiveCall& c0 = calls.front();
  const std::size_t n = calls.size();
  const std::size_t count = c0.count;
  const std::size_t esize = core::dtype_size(c0.dtype);
  const std::size_t block_bytes = count * esize;
  if (count == 0 && c0.kind != CollectiveKind::Split) return;

  switch (c0.kind) {
    case CollectiveKind::AllReduce: {
      std::vector<const void*> in(n);
      std::vector<void*> out(n);
      for (std::size_t r = 0; r < n; ++r) in[r] = out[r] = calls[r].recv;
      reduction::reduce_in_order(in, out, count, c0.dtype, *c0.op);
      return;
    }
    case CollectiveKind::ReduceScatter: {
      std::vector<const void*> in(n);
      for (std::size_t q = 0; q < n; ++q) {
        for (std::size_t r = 0; r < n; ++r) in[r] = at(calls[r].send, q * count, esize);
        reduction::reduce_in_order(in, {calls[q].recv}, count, c0.dtype, *c0.op);
      }
      return;
    }
    case CollectiveKind::AllGather:
      // Block r of every recv comes from rank r.
      for (std::size_t q = 0; q < n; ++q)
        for (std::size_t r = 0; r < n; ++r)
          copy_bytes(at(calls[q].recv, r * count, esize), calls[r].send, block_bytes);
      return;
    case CollectiveKind::Broadcast: {
      const void* src = calls[static_cast<std::size_t>(c0.root)].recv;
      for (std::size_t q = 0; q < n; ++q) copy_bytes(calls[q].recv, src, block_bytes);
      return;
    }
    case CollectiveKind::AllToAll:
      // Block q of rank r's send becomes block r of rank q's recv.
      for (std::size_t q = 0; q < n; ++q)
        for (std::size_t r = 0; r < n; ++r)
          copy_bytes(at(calls[q].recv, r * count, esize), at(calls[r].send, q * count, esize),
                     block_bytes);
      return;
    case CollectiveKind::Barrier:
    case CollectiveKind::Split:
      return;
  }
}

}  // namespace tessera::comm::local
