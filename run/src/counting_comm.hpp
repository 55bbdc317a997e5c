// CountingComm: passes every call on unchanged and counts the bytes this rank hands to halo
// exchanges (batch_p2p sends) and to collectives (the buffers, as StepStats::grad_comm_bytes
// counts them), for the live metrics. Sub-groups from split() count into the same totals.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/comm/forwarding.hpp"

namespace tessera::run {

struct CommCounts {
  std::atomic<std::int64_t> halo_bytes{0};
  std::atomic<std::int64_t> collective_bytes{0};
};

class CountingComm final : public comm::ForwardingBackend {
 public:
  CountingComm(comm::Backend& inner, std::shared_ptr<CommCounts> counts)
      : ForwardingBackend(inner), counts_(std::move(counts)) {}
  CountingComm(std::unique_ptr<comm::Backend> owned, std::shared_ptr<CommCounts> counts)
      : ForwardingBackend(std::move(owned)), counts_(std::move(counts)) {}

  comm::WorkPtr all_reduce(comm::BufferView buf, comm::ReduceOp op) override {
    add_collective(buf.bytes());
    return inner().all_reduce(buf, op);
  }
  comm::WorkPtr all_gather(comm::BufferView send, comm::BufferView recv) override {
    add_collective(recv.bytes());
    return inner().all_gather(send, recv);
  }
  comm::WorkPtr reduce_scatter(comm::BufferView send, comm::BufferView recv,
                               comm::ReduceOp op) override {
    add_collective(send.bytes());
    return inner().reduce_scatter(send, recv, op);
  }
  comm::WorkPtr broadcast(comm::BufferView buf, int root) override {
    add_collective(buf.bytes());
    return inner().broadcast(buf, root);
  }
  comm::WorkPtr all_to_all(comm::BufferView send, comm::BufferView recv) override {
    add_collective(send.bytes());
    return inner().all_to_all(send, recv);
  }
  /// Counted once the batch is posted: a batch the inner backend refuses sends nothing.
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override {
    comm::WorkPtr work = inner().batch_p2p(ops);
    counts_->halo_bytes += sent_bytes(ops);
    return work;
  }

 protected:
  std::unique_ptr<comm::Backend> decorate_split(std::unique_ptr<comm::Backend> sub,
                                                const std::vector<int>&) override {
    return std::make_unique<CountingComm>(std::move(sub), counts_);
  }

 private:
  static std::int64_t sent_bytes(const std::vector<comm::P2POp>& ops) {
    std::int64_t sent = 0;
    for (const comm::P2POp& o : ops)
      if (o.kind == comm::P2POp::Kind::Send) sent += static_cast<std::int64_t>(o.buf.bytes());
    return sent;
  }
  void add_collective(std::size_t bytes) {
    counts_->collective_bytes += static_cast<std::int64_t>(bytes);
  }
  std::shared_ptr<CommCounts> counts_;
};

}  // namespace tessera::run
