// Gathering one step's figures from every rank: the local threads' board and the processes'
// all_gather of doubles.
#include "step_gather.hpp"

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::run {

LocalGatherBoard::LocalGatherBoard(int ranks) {
  current_.ranks.resize(static_cast<std::size_t>(ranks));
  current_.bytes.resize(static_cast<std::size_t>(ranks));
  current_.data.resize(static_cast<std::size_t>(ranks));
}

Gathered LocalGatherBoard::exchange(comm::Backend& world, const nn::StepStats& mine,
                                    const Bytes& bytes, const data::DataStats& data) {
  const auto r = static_cast<std::size_t>(world.rank());
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_.ranks[r] = mine;
    current_.bytes[r] = bytes;
    current_.data[r] = data;
  }
  world.barrier();  // every rank has posted
  Gathered all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all = current_;
  }
  world.barrier();  // every rank has read before anyone posts the next step
  return all;
}

namespace {

/// A step's figures as doubles, in this order: step, loss, grad_norm, lr, step_time_s,
/// data_time_s, peak_total, loss_scale, skipped, skipped_steps, the category peaks,
/// grad_comm_bytes, grad_dense_bytes, halo bytes, collective bytes, load_time_s,
/// pipeline_wait_s, then the data figures (kDataDoubles).
constexpr std::size_t kDataDoubles = 8;
constexpr std::size_t kStatDoubles = 16 + core::kNumMemCategories + kDataDoubles;

void pack_data(const data::DataStats& d, std::vector<double>& v) {
  for (double x :
       {double(d.samples), double(d.files), double(d.pixels_decoded), double(d.pixels_total),
        double(d.bytes_read), d.decode_s, double(d.bad_skipped), double(d.labels_ignored)})
    v.push_back(x);
}

data::DataStats unpack_data(const double* v) {
  const auto i = [](double x) { return static_cast<std::int64_t>(x); };
  return {i(v[0]), i(v[1]), i(v[2]), i(v[3]), i(v[4]), v[5], i(v[6]), i(v[7])};
}

std::vector<double> pack(const nn::StepStats& st, const Bytes& bytes) {
  std::vector<double> v = {double(st.step),
                           st.loss,
                           st.grad_norm,
                           st.lr,
                           st.step_time_s,
                           st.data_time_s,
                           double(st.memory.peak_total),
                           st.loss_scale,
                           st.skipped ? 1.0 : 0.0,
                           double(st.skipped_steps)};
  for (int c = 0; c < core::kNumMemCategories; ++c) v.push_back(double(st.memory.peak[c]));
  v.push_back(double(st.grad_comm_bytes));
  v.push_back(double(st.grad_dense_bytes));
  v.push_back(double(bytes[0]));
  v.push_back(double(bytes[1]));
  v.push_back(st.load_time_s);
  v.push_back(st.pipeline_wait_s);
  return v;
}

void unpack(const double* v, nn::StepStats& out, Bytes& bytes) {
  constexpr int k = core::kNumMemCategories;
  out.step = static_cast<std::int64_t>(v[0]);
  out.loss = v[1];
  out.grad_norm = v[2];
  out.lr = v[3];
  out.step_time_s = v[4];
  out.data_time_s = v[5];
  out.memory.peak_total = static_cast<std::size_t>(v[6]);
  out.loss_scale = v[7];
  out.skipped = v[8] != 0;
  out.skipped_steps = static_cast<std::int64_t>(v[9]);
  for (int c = 0; c < k; ++c) out.memory.peak[c] = static_cast<std::size_t>(v[10 + c]);
  out.grad_comm_bytes = static_cast<std::int64_t>(v[10 + k]);
  out.grad_dense_bytes = static_cast<std::int64_t>(v[11 + k]);
  bytes = {static_cast<std::int64_t>(v[12 + k]), static_cast<std::int64_t>(v[13 + k])};
  out.load_time_s = v[14 + k];
  out.pipeline_wait_s = v[15 + k];
}

/// all_gather of `mine` into `all`, staged through device memory when the rank's tensors live
/// there (nccl takes nothing else).
void gather_doubles(comm::Backend& world, std::vector<double>& mine, std::vector<double>& all,
                    const core::AllocatorPtr& memory) {
  using Dim = core::Shape::value_type;
  if (!memory || memory->space() == core::MemorySpace::Host) {
    world
        .all_gather({mine.data(), mine.size(), core::DType::F64},
                    {all.data(), all.size(), core::DType::F64})
        ->wait();
    return;
  }
  const core::Tensor host_mine =
      core::Tensor::from_blob(mine.data(), {Dim(mine.size())}, core::DType::F64, nullptr);
  const core::Tensor dev_mine = host_mine.to(memory, core::MemCategory::Workspace);
  core::Tensor dev_all = core::Tensor::empty({Dim(all.size())}, core::DType::F64,
                                             core::MemCategory::Workspace, memory);
  world.all_gather(comm::buffer_of(dev_mine), comm::buffer_of(dev_all))->wait();
  core::Tensor::from_blob(all.data(), {Dim(all.size())}, core::DType::F64, nullptr)
      .copy_from(dev_all);
}

}  // namespace

Gathered all_gather_figures(comm::Backend& world, const nn::StepStats& mine, const Bytes& bytes,
                            const data::DataStats& data, const core::AllocatorPtr& memory) {
  const auto n = static_cast<std::size_t>(world.size());
  std::vector<double> packed = pack(mine, bytes);
  pack_data(data, packed);
  std::vector<double> all(kStatDoubles * n);
  gather_doubles(world, packed, all, memory);
  Gathered out;
  out.ranks.resize(n);
  out.bytes.resize(n);
  out.data.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    const double* v = all.data() + r * kStatDoubles;
    unpack(v, out.ranks[r], out.bytes[r]);
    out.data[r] = unpack_data(v + kStatDoubles - kDataDoubles);
  }
  return out;
}

}  // namespace tessera::run
