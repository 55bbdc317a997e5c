// DeviceMesh: validation, parsing and rank ↔ coordinate maps.
#include "tessera/core/mesh.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <set>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::core {

DeviceMesh::DeviceMesh() : DeviceMesh({1}, {"sp"}) {}

DeviceMesh::DeviceMesh(std::vector<int> shape, std::vector<std::string> names, std::vector<int> ranks)
    : shape_(std::move(shape)), names_(std::move(names)), ranks_(std::move(ranks)) {
  TESSERA_CHECK(!shape_.empty(), "device mesh: the shape is empty; give at least one dimension, e.g. sp=1");
  for (std::size_t i = 0; i < shape_.size(); ++i)
    TESSERA_CHECK(shape_[i] > 0, "device mesh: dimension ", i, " has size ", shape_[i],
                  "; every dimension needs at least one rank");
  if (names_.empty()) {
    for (std::size_t i = 0; i < shape_.size(); ++i) names_.push_back("d" + std::to_string(i));
  }
  TESSERA_CHECK(names_.size() == shape_.size(), "device mesh: ", shape_.size(), " dimensions but ",
                names_.size(), " names");
  std::set<std::string> seen;
  for (auto& n : names_) {
    TESSERA_CHECK(!n.empty(), "device mesh: a dimension has an empty name");
    TESSERA_CHECK(seen.insert(n).second, "device mesh: dimension name '", n, "' is used twice");
  }
  const int n = size();
  if (ranks_.empty()) {
    ranks_.resize(n);
    std::iota(ranks_.begin(), ranks_.end(), 0);
  }
  TESSERA_CHECK(static_cast<int>(ranks_.size()) == n, "device mesh ", to_string(), " has ", n,
                " positions but ", ranks_.size(), " ranks were given");
  std::set<int> rs(ranks_.begin(), ranks_.end());
  TESSERA_CHECK(static_cast<int>(rs.size()) == n && *rs.begin() >= 0, "device mesh ", to_string(),
                ": ranks must be distinct and non-negative");
}

DeviceMesh DeviceMesh::parse(std::string_view spec) {
  std::vector<int> shape;
  std::vector<std::string> names;
  std::size_t pos = 0;
  TESSERA_CHECK(!spec.empty(), "mesh '': expected NAME=SIZE[,NAME=SIZE...], e.g. sp=4 or dp=2,sp=2");
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view item = spec.substr(pos, comma - pos);
    const std::size_t eq = item.find('=');
    TESSERA_CHECK(eq != std::string_view::npos && eq > 0, "mesh '", spec, "': item '", item,
                  "' is not NAME=SIZE (e.g. sp=4 or dp=2,sp=2)");
    int size = 0;
    std::string_view num = item.substr(eq + 1);
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), size);
    TESSERA_CHECK(ec == std::errc() && p == num.data() + num.size() && size > 0, "mesh '", spec,
                  "': size '", num, "' of dimension '", item.substr(0, eq),
                  "' is not a positive integer");
    names.emplace_back(item.substr(0, eq));
    shape.push_back(size);
    pos = comma + 1;
  }
  return DeviceMesh(std::move(shape), std::move(names));
}

int DeviceMesh::size() const noexcept {
  int n = 1;
  for (int s : shape_) n *= s;
  return n;
}

int DeviceMesh::dim_size(int dim) const {
  TESSERA_CHECK(dim >= 0 && dim < ndim(), "device mesh ", to_string(), " has no dimension ", dim);
  return shape_[dim];
}

const std::string& DeviceMesh::dim_name(int dim) const {
  TESSERA_CHECK(dim >= 0 && dim < ndim(), "device mesh ", to_string(), " has no dimension ", dim);
  return names_[dim];
}

int DeviceMesh::find_dim(std::string_view name) const noexcept {
  for (int i = 0; i < ndim(); ++i)
    if (names_[i] == name) return i;
  return -1;
}

int DeviceMesh::dim_index(std::string_view name) const {
  const int i = find_dim(name);
  TESSERA_CHECK(i >= 0, "device mesh ", to_string(), " has no dimension named '", name, "'");
  return i;
}

bool DeviceMesh::contains(int rank) const noexcept {
  // Ranks are unique: the usual mesh (ranks 0..n-1 in order) answers without a scan, which at
  // thousands of ranks made every per-rank query O(ranks).
  if (rank >= 0 && rank < static_cast<int>(ranks_.size()) && ranks_[rank] == rank) return true;
  return std::find(ranks_.begin(), ranks_.end(), rank) != ranks_.end();
}

int DeviceMesh::position_of(int rank) const {
  // The usual mesh without a scan (see contains()).
  if (rank >= 0 && rank < static_cast<int>(ranks_.size()) && ranks_[rank] == rank) return rank;
  auto it = std::find(ranks_.begin(), ranks_.end(), rank);
  TESSERA_CHECK(it != ranks_.end(), "rank ", rank, " is not in device mesh ", to_string());
  return static_cast<int>(it - ranks_.begin());
}

std::vector<int> DeviceMesh::coords_of(int rank) const {
  int pos = position_of(rank);
  std::vector<int> c(shape_.size());
  for (int i = ndim() - 1; i >= 0; --i) {
    c[i] = pos % shape_[i];
    pos /= shape_[i];
  }
  return c;
}

int DeviceMesh::coord(int rank, int dim) const {
  TESSERA_CHECK(dim >= 0 && dim < ndim(), "device mesh ", to_string(), " has no dimension ", dim);
  return coords_of(rank)[dim];
}

int DeviceMesh::rank_at(const std::vector<int>& coords) const {
  TESSERA_CHECK(static_cast<int>(coords.size()) == ndim(), "device mesh ", to_string(),
                ": coordinates with ", coords.size(), " entries");
  int pos = 0;
  for (int i = 0; i < ndim(); ++i) {
    TESSERA_CHECK(coords[i] >= 0 && coords[i] < shape_[i], "device mesh ", to_string(),
                  ": coordinate ", coords[i], " outside dimension ", names_[i]);
    pos = pos * shape_[i] + coords[i];
  }
  return ranks_[pos];
}

std::vector<int> DeviceMesh::group_ranks(int dim, int rank) const {
  return group_ranks(std::vector<int>{dim}, rank);
}

std::vector<int> DeviceMesh::group_ranks(const std::vector<int>& dims, int rank) const {
  for (int d : dims)
    TESSERA_CHECK(d >= 0 && d < ndim(), "device mesh ", to_string(), " has no dimension ", d);
  std::vector<int> c = coords_of(rank);
  std::vector<int> out;
  int count = 1;
  for (int d : dims) count *= shape_[d];
  for (int i = 0; i < count; ++i) {
    int rem = i;
    for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
      c[dims[k]] = rem % shape_[dims[k]];
      rem /= shape_[dims[k]];
    }
    out.push_back(rank_at(c));
  }
  return out;
}

std::string DeviceMesh::to_string() const {
  std::ostringstream os;
  for (std::size_t i = 0; i < shape_.size(); ++i)
    os << (i ? "," : "") << (i < names_.size() ? names_[i] : "?") << "=" << shape_[i];
  return os.str();
}

}  // namespace tessera::core
