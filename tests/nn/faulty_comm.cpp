// FaultyComm: the deliberate faults of the training tests' tolerance check.
#include "nn/faulty_comm.hpp"

#include <algorithm>

#include <cstring>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/nn/halo_exchange.hpp"

namespace tessera::test {

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::None: return "none";
    case Fault::HaloZero: return "forward halos arrive as zeros";
    case Fault::HaloOneValue: return "one value of every forward halo arrives as zero";
    case Fault::HaloBackwardZero: return "the adjoint's halo gradients are dropped";
    case Fault::SyncBnLocal: return "BatchNorm does not reduce its statistics across ranks";
    case Fault::SyncBnMissingRank: return "BatchNorm's reductions leave out the last rank";
    case Fault::GradMissingRank: return "the gradient all-reduce leaves out the last rank";
  }
  return "?";
}

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Breaks the receive buffers of a batch once the inner batch has completed, before the caller
// reads them.
class CorruptingWork final : public comm::Work {
 public:
  CorruptingWork(comm::WorkPtr inner, std::vector<comm::BufferView> bufs, bool whole)
      : inner_(std::move(inner)), bufs_(std::move(bufs)), whole_(whole) {}
  bool is_completed() override {
    if (!inner_->is_completed()) return false;
    corrupt();
    return true;
  }
  void wait() override {
    inner_->wait();
    corrupt();
  }

 private:
  void corrupt() {
    if (done_) return;
    done_ = true;
    for (const comm::BufferView& b : bufs_) {
      if (b.data == nullptr || b.count == 0) continue;
      std::memset(b.data, 0, whole_ ? b.bytes() : core::dtype_size(b.dtype));
    }
  }
  comm::WorkPtr inner_;
  std::vector<comm::BufferView> bufs_;
  bool whole_;
  bool done_ = false;
};

template <class T>
void subtract(comm::BufferView buf, const std::vector<unsigned char>& other) {
  T* a = static_cast<T*>(buf.data);
  const T* b = reinterpret_cast<const T*>(other.data());
  for (std::size_t i = 0; i < buf.count; ++i) a[i] -= b[i];
}

}  // namespace

FaultyComm::FaultyComm(std::unique_ptr<comm::Backend> owned, std::shared_ptr<FaultState> state)
    : ForwardingBackend(std::move(owned)), state_(std::move(state)) {}

FaultyComm::FaultyComm(comm::Backend& inner, std::shared_ptr<FaultState> state)
    : ForwardingBackend(inner), state_(std::move(state)) {}

comm::WorkPtr FaultyComm::batch_p2p(const std::vector<comm::P2POp>& ops) {
  const Fault f = state_->fault;
  const int tag = f == Fault::HaloBackwardZero ? nn::kHaloTag + 1 : nn::kHaloTag;
  const bool halo_fault = f == Fault::HaloZero || f == Fault::HaloOneValue || f == Fault::HaloBackwardZero;
  std::vector<comm::BufferView> hit;
  if (std::any_of(ops.begin(), ops.end(), [](const comm::P2POp& op) { return op.tag == nn::kHaloTag; }))
    ++state_->halo_batches;
  if (halo_fault)
    for (const comm::P2POp& op : ops)
      if (op.kind == comm::P2POp::Kind::Recv && op.tag == tag) hit.push_back(op.buf);
  comm::WorkPtr w = inner().batch_p2p(ops);
  if (hit.empty()) return w;
  ++state_->injected;
  return std::make_unique<CorruptingWork>(std::move(w), std::move(hit), f != Fault::HaloOneValue);
}

comm::WorkPtr FaultyComm::all_reduce(comm::BufferView buf, comm::ReduceOp op) {
  const Fault f = state_->fault;
  const std::string where = layer();
  const bool in_bn = ends_with(where, "bn");
  if (in_bn && f == Fault::SyncBnLocal && size() > 1) {
    ++state_->injected;
    return std::make_unique<comm::CompletedWork>();
  }
  if ((in_bn && f == Fault::SyncBnMissingRank) || (where == "grad_bucket" && f == Fault::GradMissingRank))
    if (size() > 1) return reduce_without_last(buf, op);
  return inner().all_reduce(buf, op);
}

comm::WorkPtr FaultyComm::reduce_without_last(comm::BufferView buf, comm::ReduceOp op) {
  TESSERA_CHECK(op == comm::ReduceOp::Sum && (buf.dtype == core::DType::F32 || buf.dtype == core::DType::F64),
                "FaultyComm: the missing-rank fault handles f32/f64 sums only");
  ++state_->injected;
  // The sum of every rank, less what the last rank contributed (its buffer, broadcast).
  std::vector<unsigned char> last(static_cast<const unsigned char*>(buf.data),
                                  static_cast<const unsigned char*>(buf.data) + buf.bytes());
  inner().all_reduce(buf, op)->wait();
  comm::BufferView lv = buf;
  lv.data = last.data();
  inner().broadcast(lv, size() - 1)->wait();
  if (buf.dtype == core::DType::F32) subtract<float>(buf, last);
  else subtract<double>(buf, last);
  return std::make_unique<comm::CompletedWork>();
}

std::unique_ptr<comm::Backend> FaultyComm::decorate_split(std::unique_ptr<comm::Backend> sub,
                                                          const std::vector<int>&) {
  return std::make_unique<FaultyComm>(std::move(sub), state_);
}

}  // namespace tessera::test
