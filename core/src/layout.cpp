// Placement, balanced splits and Layout: which part of a global tensor each rank holds.
#include "tessera/core/layout.hpp"

#include <algorithm>
#include <sstream>

namespace tessera::core {

Range Range::intersect(const Range& o) const noexcept {
  Range r{std::max(begin, o.begin), std::min(end, o.end)};
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

std::string Placement::to_string() const {
  switch (kind_) {
    case Kind::Shard: return "S(" + std::to_string(dim_) + ")";
    case Kind::Replicate: return "R";
    case Kind::Partial: return "P";
  }
  return "?";
}

Range balanced_split(std::int64_t length, int parts, int index, std::int64_t align) {
  TESSERA_CHECK(parts > 0 && index >= 0 && index < parts, "balanced_split: part ", index, " of ", parts);
  TESSERA_CHECK(length >= 0 && align > 0, "balanced_split: length ", length, " align ", align);
  const std::int64_t units = (length + align - 1) / align;
  const std::int64_t base = units / parts;
  const std::int64_t extra = units % parts;
  const std::int64_t first_unit = index * base + std::min<std::int64_t>(index, extra);
  const std::int64_t my_units = base + (index < extra ? 1 : 0);
  Range r{std::min(length, first_unit * align), std::min(length, (first_unit + my_units) * align)};
  return r;
}

Layout::Layout(DeviceMesh mesh, Shape global_shape, std::vector<Placement> placements, Shape align)
    : mesh_(std::move(mesh)), global_(std::move(global_shape)), placements_(std::move(placements)),
      align_(std::move(align)) {
  TESSERA_CHECK(static_cast<int>(placements_.size()) == mesh_.ndim(), "layout: mesh ",
                mesh_.to_string(), " has ", mesh_.ndim(), " dimensions but ", placements_.size(),
                " placements were given; give one placement per mesh dimension");
  for (auto d : global_) TESSERA_CHECK(d >= 0, "layout: negative size in shape ", shape_str(global_));
  for (std::size_t i = 0; i < placements_.size(); ++i) {
    const auto& p = placements_[i];
    if (p.is_shard())
      TESSERA_CHECK(p.dim() >= 0 && p.dim() < ndim(), "layout: placement ", p.to_string(),
                    " on mesh dimension '", mesh_.dim_name(static_cast<int>(i)), "' names a tensor dimension that a ",
                    ndim(), "-d tensor ", shape_str(global_), " does not have");
  }
  if (align_.empty()) align_.assign(global_.size(), 1);
  TESSERA_CHECK(align_.size() == global_.size(), "layout: ", align_.size(),
                " alignments for a ", ndim(), "-d tensor");
  for (auto a : align_) TESSERA_CHECK(a > 0, "layout: alignment ", a, " must be positive");
}

Layout Layout::replicated(DeviceMesh mesh, Shape global_shape) {
  std::vector<Placement> p(mesh.ndim(), Replicate());
  return Layout(std::move(mesh), std::move(global_shape), std::move(p));
}

std::vector<int> Layout::mesh_dims_sharding(int dim) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(placements_.size()); ++i)
    if (placements_[i].is_shard(dim)) out.push_back(i);
  return out;
}

bool Layout::has_partial() const noexcept {
  return std::any_of(placements_.begin(), placements_.end(), [](const Placement& p) { return p.is_partial(); });
}

Range Layout::local_range(int rank, int dim) const {
  TESSERA_CHECK(dim >= 0 && dim < ndim(), "layout ", to_string(), " has no dimension ", dim);
  Range r{0, global_[dim]};
  const auto mesh_dims = mesh_dims_sharding(dim);
  if (mesh_dims.empty()) return r;
  const auto coords = mesh_.coords_of(rank);
  for (int md : mesh_dims) {
    Range sub = balanced_split(r.size(), mesh_.dim_size(md), coords[md], align_[dim]);
    r = Range{r.begin + sub.begin, r.begin + sub.end};
  }
  return r;
}

Shape Layout::local_shape(int rank) const {
  Shape s(global_.size());
  for (int d = 0; d < ndim(); ++d) s[d] = local_range(rank, d).size();
  return s;
}

Shape Layout::local_offset(int rank) const {
  Shape s(global_.size());
  for (int d = 0; d < ndim(); ++d) s[d] = local_range(rank, d).begin;
  return s;
}

Layout Layout::with_shape(Shape global_shape) const {
  Shape a = align_;
  if (global_shape.size() != global_.size()) a.clear();
  return Layout(mesh_, std::move(global_shape), placements_, std::move(a));
}

Layout Layout::with_placements(std::vector<Placement> placements) const {
  return Layout(mesh_, global_, std::move(placements), align_);
}

std::string Layout::to_string() const {
  std::ostringstream os;
  os << shape_str(global_) << " (";
  for (std::size_t i = 0; i < placements_.size(); ++i) os << (i ? "," : "") << placements_[i].to_string();
  os << ") on " << mesh_.to_string();
  return os.str();
}

}  // namespace tessera::core
