// HaloExchange: pack, one batch_p2p, unpack — forward, and its adjoint backward.
#include "tessera/nn/halo_exchange.hpp"

#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

HaloExchange::HaloExchange(const HaloPlan& plan, comm::Backend* world, core::AllocatorPtr allocator,
                           compute::Backend* compute)
    : plan_(plan), world_(world), alloc_(std::move(allocator)), compute_(compute) {
  TESSERA_CHECK(world_ != nullptr || !plan_.exchanges(), plan_.spec.describe(), ": rank ", plan_.rank,
                " must exchange halos but was given no communicator");
}

Tensor HaloExchange::view_of(const Tensor& t, const Box& t_box, const Box& sub) const {
  Tensor v = t;
  for (int d = 0; d < 4; ++d) v = v.narrow(d, sub.r[d].begin - t_box.r[d].begin, sub.r[d].size());
  return v;
}

namespace {
comm::BufferView view(const Tensor& t) {
  return comm::BufferView{t.raw_data(), static_cast<std::size_t>(t.numel()), t.dtype(), t.space(), t.device()};
}
}  // namespace

void HaloExchange::copy(const Tensor& from, Tensor to) {
  if (compute_)
    compute::copy(*compute_, from, to);
  else
    to.copy_from(from);
}

void HaloExchange::post(std::vector<comm::P2POp>& ops) {
  work_ = ops.empty() ? nullptr : world_->batch_p2p(ops);
}

void HaloExchange::own_part(const Tensor& x_own) {
  TESSERA_CHECK(x_own.ndim() == 4 && x_own.shape() == plan_.own.shape(), plan_.spec.describe(),
                ": rank ", plan_.rank, " got input ", x_own.describe(), " but its layout gives it ",
                core::shape_str(plan_.own.shape()));
  const core::DType dt = x_own.dtype();
  if (plan_.recvs.empty()) {
    // Everything needed is local: the buffer is a view of the input, no copy.
    buffer_ = plan_.need.empty() ? Tensor::empty(plan_.need.shape(), dt, MemCategory::HaloBuffer, alloc_)
                                 : view_of(x_own, plan_.own, plan_.need);
  } else {
    buffer_ = Tensor::empty(plan_.need.shape(), dt, MemCategory::HaloBuffer, alloc_);
    const Box mine = plan_.need.intersect(plan_.own);
    if (!mine.empty()) copy(view_of(x_own, plan_.own, mine), view_of(buffer_, plan_.need, mine));
  }
}

void HaloExchange::start_forward(const Tensor& x_own) {
  own_part(x_own);
  const core::DType dt = x_own.dtype();
  std::vector<comm::P2POp> ops;
  recv_staging_.clear();
  send_staging_.clear();
  for (auto& p : plan_.recvs) {
    recv_staging_.push_back(Tensor::empty(p.box.shape(), dt, MemCategory::HaloBuffer, alloc_));
    ops.push_back({comm::P2POp::Kind::Recv, view(recv_staging_.back()), p.peer, kHaloTag});
  }
  for (auto& p : plan_.sends) {
    send_staging_.push_back(view_of(x_own, plan_.own, p.box).clone(MemCategory::HaloBuffer));
    ops.push_back({comm::P2POp::Kind::Send, view(send_staging_.back()), p.peer, kHaloTag});
  }
  post(ops);
}

const Tensor& HaloExchange::finish_forward(std::vector<Tensor>* keep) {
  if (work_) work_->wait();
  work_.reset();
  for (std::size_t i = 0; i < plan_.recvs.size(); ++i) copy(recv_staging_[i], view_of(buffer_, plan_.need, plan_.recvs[i].box));
  if (keep) *keep = std::move(recv_staging_);  // the staging blocks are the halos: no copy
  recv_staging_.clear();
  send_staging_.clear();
  return buffer_;
}

const Tensor& HaloExchange::replay_forward(const Tensor& x_own, const std::vector<Tensor>& kept) {
  TESSERA_CHECK(kept.size() == plan_.recvs.size(), plan_.spec.describe(), ": rank ", plan_.rank, ": ",
                kept.size(), " kept halos for a plan that receives ", plan_.recvs.size(),
                "; keep them with finish_forward of the same plan");
  own_part(x_own);
  for (std::size_t i = 0; i < plan_.recvs.size(); ++i) {
    TESSERA_CHECK(kept[i].shape() == plan_.recvs[i].box.shape() && kept[i].dtype() == x_own.dtype(),
                  plan_.spec.describe(), ": rank ", plan_.rank, ": kept halo ", i, " is ", kept[i].describe(),
                  " but the plan receives ", core::shape_str(plan_.recvs[i].box.shape()), " of ",
                  core::dtype_name(x_own.dtype()), "; keep them with finish_forward of the same plan");
    copy(kept[i], view_of(buffer_, plan_.need, plan_.recvs[i].box));
  }
  return buffer_;
}

void HaloExchange::start_backward(const Tensor& dbuf) {
  TESSERA_CHECK(dbuf.ndim() == 4 && dbuf.shape() == plan_.need.shape(), plan_.spec.describe(),
                ": rank ", plan_.rank, " got a halo-buffer gradient ", dbuf.describe(),
                " but its plan needs ", core::shape_str(plan_.need.shape()));
  dbuf_ = dbuf;
  const core::DType dt = dbuf.dtype();
  std::vector<comm::P2POp> ops;
  recv_staging_.clear();
  send_staging_.clear();
  // Adjoint of the forward: what I received, I send back as gradient; what I sent comes back.
  for (auto& p : plan_.sends) {
    recv_staging_.push_back(Tensor::empty(p.box.shape(), dt, MemCategory::HaloBuffer, alloc_));
    ops.push_back({comm::P2POp::Kind::Recv, view(recv_staging_.back()), p.peer, kHaloTag + 1});
  }
  for (auto& p : plan_.recvs) {
    send_staging_.push_back(view_of(dbuf, plan_.need, p.box).clone(MemCategory::HaloBuffer));
    ops.push_back({comm::P2POp::Kind::Send, view(send_staging_.back()), p.peer, kHaloTag + 1});
  }
  post(ops);
}

Tensor HaloExchange::finish_backward() {
  const core::DType dt = dbuf_.dtype();
  Tensor dx;
  const Box mine = plan_.need.intersect(plan_.own);
  if (plan_.need == plan_.own && plan_.sends.empty()) {
    dx = dbuf_;  // nothing foreign either way: the buffer gradient is the input gradient
  } else {
    // Zeros only where the buffer holds none of the input (a part no output window reads).
    dx = mine == plan_.own ? Tensor::empty(plan_.own.shape(), dt, MemCategory::Activation, alloc_)
                           : Tensor::zeros(plan_.own.shape(), dt, MemCategory::Activation, alloc_);
    if (!mine.empty()) copy(view_of(dbuf_, plan_.need, mine), view_of(dx, plan_.own, mine));
  }
  if (work_) work_->wait();
  work_.reset();
  for (std::size_t i = 0; i < plan_.sends.size(); ++i)
    view_of(dx, plan_.own, plan_.sends[i].box).add_from(recv_staging_[i]);
  recv_staging_.clear();
  send_staging_.clear();
  dbuf_ = Tensor();
  return dx;
}

}  // namespace tessera::nn
