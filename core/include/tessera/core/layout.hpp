// Placements (Shard, Replicate, Partial) and Layout: how a global tensor is spread over a mesh.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tessera/core/mesh.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::core {

/// A half-open index range [begin, end).
struct Range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const noexcept { return end > begin ? end - begin : 0; }
  bool empty() const noexcept { return end <= begin; }
  bool contains(const Range& o) const noexcept { return o.empty() || (o.begin >= begin && o.end <= end); }
  Range intersect(const Range& o) const noexcept;
  bool operator==(const Range& o) const noexcept { return begin == o.begin && end == o.end; }
};

/// Prints "[begin,end)".
inline std::ostream& operator<<(std::ostream& os, const Range& r) {
  return os << '[' << r.begin << ',' << r.end << ')';
}

/// How a tensor relates to one mesh dimension:
///  - Shard(d): split along tensor dimension d, balanced (see balanced_split);
///  - Replicate: every rank of that mesh dimension holds the whole thing;
///  - Partial: every rank holds a summand; the tensor is their sum.
class Placement {
 public:
  enum class Kind : std::uint8_t { Shard, Replicate, Partial };
  constexpr Placement() = default;
  static constexpr Placement shard(int dim) { return Placement(Kind::Shard, dim); }
  static constexpr Placement replicate() { return Placement(Kind::Replicate, -1); }
  static constexpr Placement partial() { return Placement(Kind::Partial, -1); }

  constexpr Kind kind() const noexcept { return kind_; }
  constexpr bool is_shard() const noexcept { return kind_ == Kind::Shard; }
  constexpr bool is_shard(int dim) const noexcept { return kind_ == Kind::Shard && dim_ == dim; }
  constexpr bool is_replicate() const noexcept { return kind_ == Kind::Replicate; }
  constexpr bool is_partial() const noexcept { return kind_ == Kind::Partial; }
  /// The sharded tensor dimension (only for Shard).
  constexpr int dim() const noexcept { return dim_; }
  /// "S(3)", "R", "P".
  std::string to_string() const;
  constexpr bool operator==(const Placement& o) const noexcept {
    return kind_ == o.kind_ && dim_ == o.dim_;
  }

 private:
  constexpr Placement(Kind k, int d) : kind_(k), dim_(d) {}
  Kind kind_ = Kind::Replicate;
  int dim_ = -1;
};

/// DTensor-style spellings.
constexpr Placement Shard(int dim) { return Placement::shard(dim); }
constexpr Placement Replicate() { return Placement::replicate(); }
constexpr Placement Partial() { return Placement::partial(); }

/// Part `index` of `length` split into `parts` balanced pieces in units of `align` elements:
/// the number of whole units per part differs by at most one, the first parts get the extra
/// units, and a final partial unit (length not a multiple of align) goes to the last non-empty
/// part. Parts may be empty when there are fewer units than parts.
Range balanced_split(std::int64_t length, int parts, int index, std::int64_t align = 1);

/// A global shape plus one placement per mesh dimension, with an alignment per tensor dimension
/// for the balanced split (a stride-2 downsampling wants shard boundaries at even indices).
/// When several mesh dimensions shard the same tensor dimension, they split it in mesh order.
class Layout {
 public:
  Layout() = default;
  /// Throws InvalidArgument when the placements don't match the mesh or name a missing dimension.
  Layout(DeviceMesh mesh, Shape global_shape, std::vector<Placement> placements, Shape align = {});

  /// Every rank holds the whole tensor.
  static Layout replicated(DeviceMesh mesh, Shape global_shape);

  const DeviceMesh& mesh() const noexcept { return mesh_; }
  const Shape& global_shape() const noexcept { return global_; }
  const std::vector<Placement>& placements() const noexcept { return placements_; }
  const Placement& placement(int mesh_dim) const { return placements_.at(mesh_dim); }
  const Shape& align() const noexcept { return align_; }
  int ndim() const noexcept { return static_cast<int>(global_.size()); }

  /// Index range of tensor dimension `dim` held by `rank`.
  Range local_range(int rank, int dim) const;
  /// Shape of `rank`'s local tensor.
  Shape local_shape(int rank) const;
  /// Global index of `rank`'s first local element.
  Shape local_offset(int rank) const;
  /// Mesh dimensions that shard tensor dimension `dim`, in mesh order.
  std::vector<int> mesh_dims_sharding(int dim) const;
  bool is_sharded(int dim) const { return !mesh_dims_sharding(dim).empty(); }
  bool has_partial() const noexcept;
  /// The same layout with another global shape or placements (alignment kept).
  Layout with_shape(Shape global_shape) const;
  Layout with_placements(std::vector<Placement> placements) const;

  /// "[2,96,128,512] (S(3)) on sp=4".
  std::string to_string() const;
  bool operator==(const Layout& o) const {
    return mesh_ == o.mesh_ && global_ == o.global_ && placements_ == o.placements_ && align_ == o.align_;
  }

 private:
  DeviceMesh mesh_;
  Shape global_;
  std::vector<Placement> placements_;
  Shape align_;
};

}  // namespace tessera::core
