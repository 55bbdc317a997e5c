// Hierarchical all-reduce: reduce_scatter inside the node, all_reduce of the shard across nodes,
// all_gather inside the node, with the padding, f32 staging of 16-bit buffers and Avg around them.
#include "tessera/comm/hierarchical.hpp"

#include <cstring>
#include <exception>
#include <functional>

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"

namespace tessera::comm {

namespace {

constexpr const char* kNames[] = {"auto", "flat", "hier"};

/// The last phase's Work; its successful completion runs `finish` (copy back, unpad, round) once.
/// A failure seen by is_completed() is kept and thrown by wait(), as the phase's own wait would.
class HierarchicalWork final : public Work {
 public:
  HierarchicalWork(WorkPtr last, std::function<void()> finish)
      : last_(std::move(last)), finish_(std::move(finish)) {}

  bool is_completed() override {
    if (done_) return true;
    if (!last_->is_completed()) return false;
    try {
      complete();
    } catch (...) {
      error_ = std::current_exception();
      done_ = true;
    }
    return true;
  }

  void wait() override {
    if (error_) std::rethrow_exception(error_);
    if (!done_) complete();
  }

 private:
  void complete() {
    last_->wait();
    finish_();
    done_ = true;
  }
  WorkPtr last_;
  std::function<void()> finish_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// x[i] /= n for `count` elements of dtype `dt` (floats in their own precision, integers
/// truncated toward zero), as a flat Avg divides its sum.
void divide(void* data, std::size_t count, core::DType dt, int n) {
  switch (dt) {
    case core::DType::F32: {
      auto* x = static_cast<float*>(data);
      for (std::size_t i = 0; i < count; ++i) x[i] = x[i] / static_cast<float>(n);
      break;
    }
    case core::DType::F64: {
      auto* x = static_cast<double*>(data);
      for (std::size_t i = 0; i < count; ++i) x[i] = x[i] / static_cast<double>(n);
      break;
    }
    case core::DType::I32: {
      auto* x = static_cast<std::int32_t*>(data);
      for (std::size_t i = 0; i < count; ++i) x[i] = x[i] / n;
      break;
    }
    case core::DType::I64: {
      auto* x = static_cast<std::int64_t*>(data);
      for (std::size_t i = 0; i < count; ++i) x[i] = x[i] / n;
      break;
    }
    default:
      throw InternalError(detail::cat("hierarchical all_reduce: no Avg division for ",
                                      core::dtype_name(dt), " (16-bit buffers are staged in f32)"));
  }
}

}  // namespace

std::string_view all_reduce_algorithm_name(AllReduceAlgorithm a) noexcept {
  return kNames[static_cast<int>(a)];
}

AllReduceAlgorithm parse_all_reduce_algorithm(std::string_view s) {
  if (s == "hierarchical") return AllReduceAlgorithm::Hierarchical;
  for (int i = 0; i < 3; ++i)
    if (s == kNames[i]) return static_cast<AllReduceAlgorithm>(i);
  throw InvalidArgument(detail::cat("unknown all-reduce algorithm \"", s,
                                    "\"; use auto, flat or hier (hierarchical)"));
}

AllReduceAlgorithm choose_all_reduce_algorithm(AllReduceAlgorithm requested, const AllReduceShape& s,
                                               std::size_t max_bytes) {
  if (requested != AllReduceAlgorithm::Auto) return requested;
  const bool spans = s.nodes >= 2 && s.ranks_per_node >= 2;
  return spans && s.multi_process && s.host_buffer && s.bytes <= max_bytes
             ? AllReduceAlgorithm::Hierarchical
             : AllReduceAlgorithm::Flat;
}

WorkPtr hierarchical_all_reduce(core::Tensor& t, Backend& intra, Backend& inter, ReduceOp op) {
  const BufferView whole = buffer_of(t);  // checks contiguity
  if (!t.is_host())
    throw Unsupported(detail::cat(
        "hierarchical all_reduce of ", t.describe(), " on rank ", intra.rank(), " of the node group (",
        intra.name(), "): it pads and stages buffers on the host, and this one is in ",
        core::memory_space_name(t.space()), " memory; use AllReduceAlgorithm::Flat or Auto for "
        "device tensors (NCCL chooses its own topology-aware algorithm)"));
  const int L = intra.size(), H = inter.size();
  // One rank per node: the inter-node all_reduce is the whole reduction (Avg included).
  if (L == 1) return inter.all_reduce(whole, op);
  const std::size_t count = whole.count;
  if (count == 0) return std::make_unique<CompletedWork>();

  const core::DType dt = t.dtype();
  const bool half = core::dtype_is_half(dt);
  const core::DType wdt = core::accumulate_dtype(dt);  // f32 for bf16/f16
  const std::size_t shard = (count + L - 1) / L, padded = shard * L;
  const bool staged = half || padded != count;
  const bool meta = t.is_meta();
  const ReduceOp phase_op = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  const auto n = static_cast<std::int64_t>(padded);

  // full: what the node phases read and write — t itself, or a zero-padded (and widened) copy.
  core::Tensor full = staged
      ? core::Tensor::empty({n}, wdt, core::MemCategory::Workspace, t.allocator())
      : t.reshape({n});
  if (staged && !meta) {
    auto* dst = static_cast<unsigned char*>(full.raw_data());
    const std::size_t esize = core::dtype_size(wdt);
    if (half) {
      const auto* h = static_cast<const std::uint16_t*>(whole.data);
      auto* f = reinterpret_cast<float*>(dst);
      for (std::size_t i = 0; i < count; ++i) f[i] = core::half_to_float(h[i], dt);
    } else {
      std::memcpy(dst, whole.data, count * esize);
    }
    std::memset(dst + count * esize, 0, (padded - count) * esize);  // zeros of every dtype
  }
  core::Tensor piece = core::Tensor::empty({static_cast<std::int64_t>(shard)}, wdt,
                                           core::MemCategory::Workspace, t.allocator());

  intra.reduce_scatter(buffer_of(full), buffer_of(piece), phase_op)->wait();
  if (H > 1) inter.all_reduce(buffer_of(piece), phase_op)->wait();
  if (op == ReduceOp::Avg && !meta) divide(piece.raw_data(), shard, wdt, L * H);
  WorkPtr last = intra.all_gather(buffer_of(piece), buffer_of(full));

  auto finish = [t, full, piece, staged, half, meta, count, dt]() {
    if (!staged || meta) return;
    if (half) {
      const auto* f = static_cast<const float*>(full.raw_data());
      auto* h = static_cast<std::uint16_t*>(t.raw_data());
      for (std::size_t i = 0; i < count; ++i) h[i] = core::float_to_half(f[i], dt);
    } else {
      std::memcpy(t.raw_data(), full.raw_data(), count * core::dtype_size(dt));
    }
  };
  auto work = std::make_unique<HierarchicalWork>(std::move(last), std::move(finish));
  work->is_completed();  // local, ucx: the gather is done, so the result is in place on return
  return work;
}

}  // namespace tessera::comm
