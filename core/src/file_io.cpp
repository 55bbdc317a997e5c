// Atomic file writes (temporary + fsync + rename) and whole-file reads.
#include "tessera/core/file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::core {

namespace {
std::string sys_error() { return std::strerror(errno); }
}  // namespace

void write_file_atomic(const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TESSERA_CHECK(fd >= 0, "cannot create '", tmp, "': ", sys_error(),
                "; check that the folder exists and is writable");
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = sys_error();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw InvalidArgument(detail::cat("writing '", path, "' failed after ", done, " of ",
                                        data.size(), " bytes: ", why, "; the old file is untouched"));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = sys_error();
    ::unlink(tmp.c_str());
    throw InvalidArgument(detail::cat("flushing '", path, "' failed: ", why, "; the old file is untouched"));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = sys_error();
    ::unlink(tmp.c_str());
    throw InvalidArgument(detail::cat("replacing '", path, "' failed: ", why));
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TESSERA_CHECK(in.good(), "cannot open '", path, "': ", sys_error());
  std::ostringstream ss;
  ss << in.rdbuf();
  TESSERA_CHECK(!in.bad(), "reading '", path, "' failed: ", sys_error());
  return ss.str();
}

std::uint64_t fnv1a64(std::string_view data, std::uint64_t h) noexcept {
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace tessera::core
