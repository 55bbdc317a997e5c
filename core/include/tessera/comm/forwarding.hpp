// ForwardingBackend: the base of comm decorators (tracing, byte counting, fault injection, device
// staging). It holds the wrapped backend and passes every call on to it unchanged, so a decorator
// overrides only the calls it observes or changes.
#pragma once

#include <memory>
#include <vector>

#include "tessera/comm/backend.hpp"

namespace tessera::comm {

/// Passes every call to the wrapped backend. Sub-groups from split() are wrapped again through
/// decorate_split(), so a decorator covers them without rewriting split().
class ForwardingBackend : public Backend {
 public:
  /// Wraps `inner`, which must outlive this object.
  explicit ForwardingBackend(Backend& inner) noexcept : inner_(&inner) {}
  /// Wraps and owns `inner`; throws InvalidArgument when it is null.
  explicit ForwardingBackend(std::unique_ptr<Backend> inner);

  std::string_view name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  Capabilities capabilities() const noexcept override { return inner_->capabilities(); }
  std::chrono::milliseconds timeout() const noexcept override { return inner_->timeout(); }

  WorkPtr all_reduce(BufferView buf, ReduceOp op) override { return inner_->all_reduce(buf, op); }
  WorkPtr all_gather(BufferView send, BufferView recv) override {
    return inner_->all_gather(send, recv);
  }
  WorkPtr reduce_scatter(BufferView send, BufferView recv, ReduceOp op) override {
    return inner_->reduce_scatter(send, recv, op);
  }
  WorkPtr broadcast(BufferView buf, int root) override { return inner_->broadcast(buf, root); }
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override { return inner_->batch_p2p(ops); }
  void barrier() override { inner_->barrier(); }
  WorkPtr all_to_all(BufferView send, BufferView recv) override {
    return inner_->all_to_all(send, recv);
  }
  /// The wrapped backend's sub-group, passed through decorate_split(); nullptr when `ranks` does
  /// not contain this rank.
  std::unique_ptr<Backend> split(const std::vector<int>& ranks) override;

 protected:
  /// The wrapped backend.
  Backend& inner() const noexcept { return *inner_; }
  /// Wraps a sub-group of the wrapped backend (made by split(ranks)) as this decorator wraps its
  /// group. The default returns it undecorated.
  virtual std::unique_ptr<Backend> decorate_split(std::unique_ptr<Backend> sub,
                                                  const std::vector<int>& ranks);

 private:
  std::unique_ptr<Backend> owned_;
  Backend* inner_;
};

}  // namespace tessera::comm
