// Internal to the datasets: NumPy .npy headers (format 1.0, 2.0 and 3.0) and positioned reads.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/core/tensor.hpp"

namespace tessera::data::internal {

/// A file opened for positioned reads (pread); closed on destruction.
class ReadFile {
 public:
  /// Throws InvalidArgument naming the path when it cannot be opened.
  explicit ReadFile(std::string path);
  ~ReadFile();
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;

  const std::string& path() const noexcept { return path_; }
  std::uint64_t size() const noexcept { return size_; }
  /// Reads exactly `bytes` bytes at `offset`; throws InvalidArgument naming the file otherwise.
  void read_at(void* dst, std::uint64_t bytes, std::uint64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// What an .npy header says.
struct NpyHeader {
  std::string descr;          ///< e.g. "<f4"
  bool fortran_order = false;
  core::Shape shape;
  std::uint64_t data_offset = 0;  ///< where the array's bytes start
};

/// Parses the header of an .npy file: magic, version, header length and the Python dict
/// {'descr': ..., 'fortran_order': ..., 'shape': (...)}. Throws InvalidArgument naming the file
/// and the problem (never reads past the file's end).
NpyHeader read_npy_header(const ReadFile& file);

}  // namespace tessera::data::internal
