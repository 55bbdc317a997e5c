// Checks of a communication backend on CUDA buffers, shared by the nccl tests (one GPU per rank)
// and the ucx staging tests (every rank on one GPU): each runs inside a rank and throws
// CheckFailure naming the rank and what differed. Device buffers are filled and read with plain
// CUDA runtime calls; expected values come from the host reference of the conformance suite.
#pragma once

#include <string>

#include "comm/conformance.hpp"
#include "tessera/comm/backend.hpp"

namespace tessera::test::cuda_checks {

/// all_reduce sum/max/min (f32, f64, i32, i64) and avg (f32, f64) at 1, 4099 and 2^18 elements.
void all_reduce(comm::Backend& b);
/// all_gather, reduce_scatter, broadcast from every root (i64 and bf16 bits), all_to_all,
/// barrier, and is_completed turning true.
void collectives(comm::Backend& b);
/// A periodic halo exchange through batch_p2p, with tags (one rank: itself as both neighbours).
void halo(comm::Backend& b);
/// split into even and odd ranks and into {0}; sub-group all_reduce on device buffers.
void split(comm::Backend& b);

#if TESSERA_TEST_CUDA_COMPUTE
/// One rank (size 1), with the cuda compute backend on the rank's device: tensors of its memory are
/// written on its compute stream while a host function holds that stream up for 300 ms, then sent
/// to this rank itself (batch_p2p, then all_gather); every received element must be the new value
/// (the transfer read the send buffer after the compute stream wrote it, and wrote the receive
/// buffer after the compute stream's own write of it). Where the backend is not staged (nccl), a
/// post must also return while the stream is held: its stream waits on the device, not the host.
void ordered_with_compute(comm::Backend& b);
#endif

/// Checks that `f` throws E with `part` in its message (inside a rank).
template <class E, class F>
void expect_throw(const comm::Backend& b, const std::string& what, const std::string& part, F&& f) {
  try {
    f();
  } catch (const E& e) {
    if (std::string(e.what()).find(part) == std::string::npos)
      conformance::fail(b, what, ": the message lacks '", part, "': ", e.what());
    return;
  }
  conformance::fail(b, what, ": no exception of the expected type");
}

}  // namespace tessera::test::cuda_checks
