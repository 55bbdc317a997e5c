// NumPy .npy header parsing (a small reader of the header's Python dict literal) and pread-based
// positioned file reads.
#include "npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "tessera/core/error.hpp"

namespace tessera::data::internal {

ReadFile::ReadFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  TESSERA_CHECK(fd_ >= 0, "cannot open '", path_, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw InvalidArgument(detail::cat("'", path_, "' is not a regular file"));
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

ReadFile::~ReadFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadFile::read_at(void* dst, std::uint64_t bytes, std::uint64_t offset) const {
  auto* out = static_cast<char*>(dst);
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    TESSERA_CHECK(n > 0, "reading '", path_, "' failed: wanted ", bytes, " bytes at offset ", offset, ", got ",
                  done, n < 0 ? detail::cat(" (", std::strerror(errno), ")") : std::string(" (end of file)"),
                  "; was the file changed or truncated after the dataset was opened?");
    done += static_cast<std::uint64_t>(n);
  }
}

namespace {

// A reader of the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 8, 8), }
class DictParser {
 public:
  DictParser(std::string_view text, const std::string& file) : s_(text), file_(file) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (!eat('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        h.descr = string_literal();
        seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        seen_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        seen_shape = true;
      } else {
        fail(detail::cat("unexpected key '", key, "'"));
      }
      if (!eat(',')) {
        expect('}');
        break;
      }
    }
    if (!seen_descr || !seen_order || !seen_shape)
      fail("the header lacks one of 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(detail::cat("'", file_, "': malformed .npy header (", what, " at character ", i_,
                                      " of \"", s_, "\"); write the file with numpy.save"));
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(detail::cat("expected '", c, "'"));
  }
  std::string string_literal() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a quoted string");
    const char q = s_[i_++];
    const std::size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(i_, end - i_));
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::string_view w(word);
      if (s_.substr(i_, w.size()) == w) {
        i_ += w.size();
        return value;
      }
    }
    fail("expected True or False");
  }
  core::Shape tuple() {
    core::Shape shape;
    expect('(');
    while (!eat(')')) {
      skip_space();
      std::int64_t v = 0;
      const std::size_t start = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        if (v > (std::int64_t{1} << 50)) fail("a dimension is too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (i_ == start) fail("expected a non-negative integer in the shape");
      eat('L');  // Python 2 longs
      shape.push_back(v);
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  std::string_view s_;
  const std::string& file_;
  std::size_t i_ = 0;
};

}  // namespace

NpyHeader read_npy_header(const ReadFile& file) {
  constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
  unsigned char pre[12] = {};
  const std::uint64_t have = std::min<std::uint64_t>(file.size(), sizeof pre);
  file.read_at(pre, have, 0);
  TESSERA_CHECK(have >= 10 && std::memcmp(pre, kMagic, 6) == 0, "'", file.path(),
                "' is not an .npy file (bad magic: expected \\x93NUMPY); write it with numpy.save");
  const int major = pre[6];
  TESSERA_CHECK(major >= 1 && major <= 3, "'", file.path(), "': .npy format version ", major, ".", int(pre[7]),
                " is not supported (1.0, 2.0 and 3.0 are)");
  std::uint64_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = pre[8] | (pre[9] << 8);
    prefix = 10;
  } else {
    TESSERA_CHECK(have >= 12, "'", file.path(), "' is truncated inside its .npy header");
    header_len = pre[8] | (pre[9] << 8) | (pre[10] << 16) | (std::uint64_t{pre[11]} << 24);
    prefix = 12;
  }
  TESSERA_CHECK(header_len <= file.size() - prefix, "'", file.path(), "': the .npy header claims ", header_len,
                " bytes but the file has only ", file.size() - prefix, " after the prefix (truncated?)");
  std::string text(header_len, '\0');
  file.read_at(text.data(), header_len, prefix);
  NpyHeader h = DictParser(text, file.path()).parse();
  h.data_offset = prefix + header_len;
  return h;
}

}  // namespace tessera::data::internal
