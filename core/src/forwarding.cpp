// ForwardingBackend's out-of-line parts: the owning constructor and split.
#include "tessera/comm/forwarding.hpp"

#include "tessera/core/error.hpp"

namespace tessera::comm {

ForwardingBackend::ForwardingBackend(std::unique_ptr<Backend> inner)
    : owned_(std::move(inner)), inner_(owned_.get()) {
  TESSERA_CHECK(inner_ != nullptr, "comm decorator: no backend to wrap was given");
}

std::unique_ptr<Backend> ForwardingBackend::split(const std::vector<int>& ranks) {
  std::unique_ptr<Backend> sub = inner_->split(ranks);
  if (!sub) return nullptr;
  return decorate_split(std::move(sub), ranks);
}

std::unique_ptr<Backend> ForwardingBackend::decorate_split(std::unique_ptr<Backend> sub,
                                                           const std::vector<int>&) {
  return sub;
}

}  // namespace tessera::comm
