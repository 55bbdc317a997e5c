// NcclBackend: one rank's view of a group over an NCCL communicator. Collectives map one to one
// onto NCCL's; batch_p2p and all_to_all are grouped ncclSend/ncclRecv; barrier is a 1-element
// all-reduce. Device (MemorySpace::Cuda) buffers only; see README.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm.hpp"
#include "tessera/comm/backend.hpp"

namespace tessera::comm::nccl {

/// NCCL's element type for a tessera dtype (every DType has one).
ncclDataType_t nccl_type(core::DType t) noexcept;
/// NCCL's reduction for a tessera ReduceOp (every ReduceOp has one; Avg is ncclAvg).
ncclRedOp_t nccl_op(ReduceOp op) noexcept;

class NcclBackend final : public Backend {
 public:
  /// `members`: the world rank of each rank of this group (for messages); `world`: this is the
  /// world group (messages then omit the world rank).
  NcclBackend(std::shared_ptr<Comm> comm, std::vector<int> members, int rank, bool world);

  std::string_view name() const noexcept override { return "nccl"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return static_cast<int>(members_.size()); }
  Capabilities capabilities() const noexcept override;
  std::chrono::milliseconds timeout() const noexcept override { return comm_->timeout(); }

  /// The CUDA stream every operation of this group is enqueued on (a blocking stream: ordered after
  /// work on the legacy default stream). The plugin exports it (tessera_comm_plugin_v1_stream), so
  /// the host makes it wait for the compute stream's work before each call with device tensors.
  cudaStream_t stream() const noexcept { return comm_->stream(); }

  /// All operations below are enqueued on this group's CUDA stream and return at once; the Work
  /// completes when the stream reaches the operation's end. They read and write their buffers only
  /// on that stream, so whoever produced the buffers on another stream must order this stream
  /// after that work first (the host does, through the exported stream; a caller of raw pointers
  /// does it itself). Buffers: CUDA device memory of this rank's device (Unsupported for host
  /// memory, InvalidArgument for another device's).
  WorkPtr all_reduce(BufferView buf, ReduceOp op) override;
  WorkPtr all_gather(BufferView send, BufferView recv) override;
  WorkPtr reduce_scatter(BufferView send, BufferView recv, ReduceOp op) override;
  WorkPtr broadcast(BufferView buf, int root) override;
  /// One ncclGroupStart/End: receives and sends to the same peer and direction are posted in
  /// (tag, call order), so the two sides pair up as the Backend contract says. Counts must match
  /// (NCCL cannot check it: a mismatch ends at the deadline or corrupts the receive).
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override;
  /// A 1-element all-reduce, waited for.
  void barrier() override;
  /// Grouped ncclSend/ncclRecv of the blocks (send to self included).
  WorkPtr all_to_all(BufferView send, BufferView recv) override;
  /// ncclCommSplit: color = the smallest listed rank, key = the position in the list.
  std::unique_ptr<Backend> split(const std::vector<int>& ranks) override;

 private:
  std::string where() const;  ///< "rank 1" or "rank 1 (world rank 3)"
  /// Throws Unsupported for host memory, InvalidArgument for a null pointer or another device.
  void check_buffer(const BufferView& b, const std::string& what, const char* role) const;
  /// "ranks 0, 2, 3" (everyone else in the group).
  std::string others() const;
  /// Records the end of the operation just enqueued and returns its Work.
  WorkPtr finish(const std::string& what, Clock::time_point deadline, std::string waiting_for);

  std::shared_ptr<Comm> comm_;
  std::vector<int> members_;
  int rank_ = 0;
  bool world_ = true;
  std::uint64_t seq_ = 0;
};

/// The stream of an NcclBackend (as void*), null for any other backend.
void* stream_of(Backend& b) noexcept;

/// The factory behind the plugin: options.rendezvous must offer a store.
std::unique_ptr<Backend> create(const BackendOptions& options);
Capabilities capabilities();

}  // namespace tessera::comm::nccl
