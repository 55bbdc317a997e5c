// The run layer tests' checks on messages: the text a refusal throws, and whether a text says
// something.
#pragma once

#include <string>

#include "tessera/core/error.hpp"

namespace tessera::runtest {

/// The message of the InvalidArgument that `f` throws, or "" when it returns (another exception
/// propagates and fails the test).
template <class F>
std::string message(F f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return {};
}

/// Whether `text` contains `part`.
inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace tessera::runtest
