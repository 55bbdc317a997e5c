// CountingComm: passes every call on unchanged and counts the bytes this rank hands to halo
// exchanges (batch_p2p sends) and to collectives (the buffers, as StepStats::grad_comm_bytes
// counts them), for the live metrics. Sub-groups from split() count into the same totals.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/comm/backend.hpp"

namespace tessera::run {

struct CommCounts {
  std::atomic<std::int64_t> halo_bytes{0};
  std::atomic<std::int64_t> collective_bytes{0};
};

class CountingComm final : public comm::Backend {
 public:
  CountingComm(comm::Backend& inner, std::shared_ptr<CommCounts> counts) : inner_(&inner), counts_(std::move(counts)) {}
  CountingComm(std::unique_ptr<comm::Backend> owned, std::shared_ptr<CommCounts> counts)
      : owned_(std::move(owned)), inner_(owned_.get()), counts_(std::move(counts)) {}

  std::string_view name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  comm::Capabilities capabilities() const noexcept override { return inner_->capabilities(); }
  std::chrono::milliseconds timeout() const noexcept override { return inner_->timeout(); }
  comm::WorkPtr all_reduce(comm::BufferView buf, comm::ReduceOp op) override {
    add_collective(buf.bytes());
    return inner_->all_reduce(buf, op);
  }
  comm::WorkPtr all_gather(comm::BufferView send, comm::BufferView recv) override {
    add_collective(recv.bytes());
    return inner_->all_gather(send, recv);
  }
  comm::WorkPtr reduce_scatter(comm::BufferView send, comm::BufferView recv, comm::ReduceOp op) override {
    add_collective(send.bytes());
    return inner_->reduce_scatter(send, recv, op);
  }
  comm::WorkPtr broadcast(comm::BufferView buf, int root) override {
    add_collective(buf.bytes());
    return inner_->broadcast(buf, root);
  }
  comm::WorkPtr all_to_all(comm::BufferView send, comm::BufferView recv) override {
    add_collective(send.bytes());
    return inner_->all_to_all(send, recv);
  }
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override {
    counts_->halo_bytes += sent_bytes(ops);
    return inner_->batch_p2p(ops);
  }
  comm::P2PPlanPtr prepare_p2p(const std::vector<comm::P2POp>& ops) override {
    // The inner backend's own prepared plan (ucx sets its messages up once), counted per start.
    class Counted final : public comm::P2PPlan {
     public:
      Counted(comm::P2PPlanPtr inner, std::shared_ptr<CommCounts> counts, std::int64_t sent)
          : inner_(std::move(inner)), counts_(std::move(counts)), sent_(sent) {}
      void start() override {
        inner_->start();
        counts_->halo_bytes += sent_;
      }
      bool is_completed() override { return inner_->is_completed(); }
      void wait() override { inner_->wait(); }
      std::optional<comm::Moved> moved() const override { return inner_->moved(); }

     private:
      comm::P2PPlanPtr inner_;
      std::shared_ptr<CommCounts> counts_;
      std::int64_t sent_;
    };
    return std::make_unique<Counted>(inner_->prepare_p2p(ops), counts_, sent_bytes(ops));
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<comm::Backend> split(const std::vector<int>& ranks) override {
    auto sub = inner_->split(ranks);
    if (!sub) return nullptr;
    return std::make_unique<CountingComm>(std::move(sub), counts_);
  }

 private:
  static std::int64_t sent_bytes(const std::vector<comm::P2POp>& ops) {
    std::int64_t sent = 0;
    for (const comm::P2POp& o : ops)
      if (o.kind == comm::P2POp::Kind::Send) sent += static_cast<std::int64_t>(o.buf.bytes());
    return sent;
  }
  void add_collective(std::size_t bytes) { counts_->collective_bytes += static_cast<std::int64_t>(bytes); }
  std::unique_ptr<comm::Backend> owned_;
  comm::Backend* inner_;
  std::shared_ptr<CommCounts> counts_;
};

}  // namespace tessera::run
