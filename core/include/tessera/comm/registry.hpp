// Registry of communication backends by name (the built-in list lives in backends/).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/comm/backend.hpp"

namespace tessera::comm {

using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendOptions&)>;

/// Maps names to factories. Not a global: the caller owns one (see
/// tessera::register_builtin_backends, which fills it with what this build contains).
class Registry {
 public:
  /// Throws InvalidArgument when `name` is already registered.
  void add(std::string name, BackendFactory factory, Capabilities caps);
  /// Throws InvalidArgument("no comm backend 'foo'; available: local, ucx") for an unknown name.
  std::unique_ptr<Backend> create(std::string_view name, const BackendOptions& options) const;
  bool contains(std::string_view name) const;
  Capabilities capabilities(std::string_view name) const;
  /// Sorted.
  std::vector<std::string> names() const;

 private:
  struct Entry {
    BackendFactory factory;
    Capabilities caps;
  };
  const Entry& find(std::string_view name) const;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace tessera::comm
