// DeviceMesh: an N-d arrangement of ranks with named dimensions (for example dp × sp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::core {

/// Ranks laid out row-major on an N-d grid. Dimension names are unique ("dp", "sp", "sp_h", ...).
/// `ranks` maps grid positions (row-major) to ranks of the world communicator; by default
/// position i is rank i.
class DeviceMesh {
 public:
  /// A 1-rank mesh with one dimension named "sp".
  DeviceMesh();
  /// Throws InvalidArgument for a non-positive size, duplicate or empty names, or a rank list
  /// that is not a set of distinct non-negative ranks of the right length.
  explicit DeviceMesh(std::vector<int> shape, std::vector<std::string> names = {},
                      std::vector<int> ranks = {});

  /// Parses "sp=4", "dp=2,sp=2" or "sp_h=2,sp_w=3" (sizes multiply to the world size).
  static DeviceMesh parse(std::string_view spec);

  int ndim() const noexcept { return static_cast<int>(shape_.size()); }
  /// Number of ranks in the mesh.
  int size() const noexcept;
  const std::vector<int>& shape() const noexcept { return shape_; }
  int dim_size(int dim) const;
  const std::string& dim_name(int dim) const;
  /// Index of the dimension called `name`; throws InvalidArgument naming the known dimensions.
  int dim_index(std::string_view name) const;
  /// -1 when there is no dimension of that name.
  int find_dim(std::string_view name) const noexcept;
  const std::vector<int>& ranks() const noexcept { return ranks_; }

  bool contains(int rank) const noexcept;
  /// Grid coordinates of a rank; throws InvalidArgument when the rank is not in the mesh.
  std::vector<int> coords_of(int rank) const;
  int coord(int rank, int dim) const;
  /// Rank at grid coordinates.
  int rank_at(const std::vector<int>& coords) const;
  /// The ranks that share every coordinate with `rank` except along `dim`, ordered by that
  /// coordinate: the sub-group of `dim` that `rank` belongs to.
  std::vector<int> group_ranks(int dim, int rank) const;
  /// The ranks that share with `rank` every coordinate outside `dims` (row-major over `dims`).
  std::vector<int> group_ranks(const std::vector<int>& dims, int rank) const;

  /// "dp=2,sp=4".
  std::string to_string() const;
  bool operator==(const DeviceMesh& o) const {
    return shape_ == o.shape_ && names_ == o.names_ && ranks_ == o.ranks_;
  }

 private:
  int position_of(int rank) const;
  std::vector<int> shape_;
  std::vector<std::string> names_;
  std::vector<int> ranks_;
};

}  // namespace tessera::core
