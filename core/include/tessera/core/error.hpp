// The tessera error hierarchy and the always-on argument checks.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessera {

/// Base of every error tessera throws. The message says what was wrong, where, and how to fix it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The caller's fault: shapes, meshes, options, file contents.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A valid request that this backend or layer cannot carry out.
class Unsupported : public Error {
 public:
  using Error::Error;
};

/// A failure reported by a backend (communication or vendor library); keeps the backend's code.
class BackendError : public Error {
 public:
  BackendError(std::string backend, int code, const std::string& msg)
      : Error(backend + ": " + msg), backend_(std::move(backend)), code_(code) {}
  const std::string& backend() const noexcept { return backend_; }
  int code() const noexcept { return code_; }

 private:
  std::string backend_;
  int code_;
};

/// A communication deadline expired. The message names the operation, the rank and the peer(s).
class TimeoutError : public BackendError {
 public:
  TimeoutError(std::string backend, const std::string& msg)
      : BackendError(std::move(backend), kCode, msg) {}
  static constexpr int kCode = 110;  // ETIMEDOUT
};

/// A broken invariant inside tessera: a bug to report, not a usage error.
class InternalError : public Error {
 public:
  using Error::Error;
};

/// Memory requested beyond an allocator's configured capacity.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

/// Training produced a non-finite loss or gradient (the run diverged). The message names the step,
/// the parameter and what to try; every rank of the run throws it at the same step with the same
/// message. Not the caller's fault in the InvalidArgument sense: the options were valid, the
/// numbers blew up.
class NonFiniteError : public Error {
 public:
  NonFiniteError(const std::string& msg, std::int64_t step, std::string parameter)
      : Error(msg), step_(step), parameter_(std::move(parameter)) {}
  /// 0-based index of the step that failed (as Trainer::next_step() and StepStats::step count).
  std::int64_t step() const noexcept { return step_; }
  /// The first parameter, in the order backward produces gradients (from the loss back), whose
  /// gradient is not finite; empty when every gradient is finite and only the loss or the norm is not.
  const std::string& parameter() const noexcept { return parameter_; }

 private:
  std::int64_t step_;
  std::string parameter_;
};

namespace detail {
inline void append_all(std::ostringstream&) {}
template <class T, class... Rest>
void append_all(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append_all(os, rest...);
}
/// Concatenates the arguments with operator<< into one string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  append_all(os, args...);
  return os.str();
}
}  // namespace detail

}  // namespace tessera

/// Always-on check of a caller-supplied value; throws InvalidArgument with the streamed message.
#define TESSERA_CHECK(cond, ...)                                           \
  do {                                                                     \
    if (!(cond)) throw ::tessera::InvalidArgument(::tessera::detail::cat(__VA_ARGS__)); \
  } while (0)

/// Check of an internal invariant (always on: cheap, and a silent wrong answer is worse).
#define TESSERA_ASSERT(cond, ...)                                                       \
  do {                                                                                  \
    if (!(cond))                                                                        \
      throw ::tessera::InternalError(::tessera::detail::cat(                            \
          __FILE__, ":", __LINE__, ": internal error (", #cond, "): ", __VA_ARGS__));   \
  } while (0)
