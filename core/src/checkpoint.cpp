// Checkpoint files: a versioned binary format with a header checksum, 64-byte aligned tensor
// records and a trailing FNV-1a checksum; reads check every length before using it.
//
// Layout (all integers little-endian):
//   [0,8)    magic "\x89TSRCKP\n"
//   [8,12)   u32 format version (kFormatVersion)
//   [12,16)  u32 flags (0: no optional features yet)
//   [16,24)  u64 total file size in bytes
//   [24,32)  u64 FNV-1a of bytes [0,24)  (so a damaged size field is reported as corruption)
//   u64 meta count, then per entry: u64 key length, key, u64 value length, value
//   u64 tensor count, then per tensor: u64 name length, name, u32 dtype code, u32 ndim,
//       ndim × i64 sizes, u64 data bytes, zero padding to a multiple of 64, data (C-order)
//   u64 FNV-1a of every byte before it
//
// FNV-1a is kept (rather than a CRC or a cryptographic hash) because it is already core's file
// checksum and it provably detects every single-byte change of a fixed-length file: each step
// h ← (h ⊕ b)·p is a bijection of h for odd p. It guards against accidents, not against forgery:
// the parser therefore never trusts a length, checksum or not.
#include "tessera/nn/checkpoint.hpp"

#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>

#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"

namespace tessera::nn {

static_assert(std::endian::native == std::endian::little, "checkpoints are written little-endian");

namespace {

using core::DType;
using core::Tensor;

constexpr char kMagic[8] = {'\x89', 'T', 'S', 'R', 'C', 'K', 'P', '\n'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kHeaderBytes = 32;
constexpr std::size_t kDataAlign = 64;
constexpr std::uint32_t kMaxDims = 16;

// dtype codes stored in files: independent of the in-memory enum's numbering.
std::uint32_t dtype_code(DType t) {
  switch (t) {
    case DType::F32: return 1;
    case DType::F64: return 2;
    case DType::I32: return 3;
    case DType::I64: return 4;
    default: return 0;
  }
}

bool dtype_from_code(std::uint32_t code, DType& out) {
  constexpr DType kTypes[] = {DType::F32, DType::F64, DType::I32, DType::I64};
  if (code < 1 || code > 4) return false;
  out = kTypes[code - 1];
  return true;
}

std::size_t pad_to_align(std::size_t offset) { return (kDataAlign - offset % kDataAlign) % kDataAlign; }

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_string(std::string& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  out += s;
}

// Bounds-checked cursor over the verified file image.
class Reader {
 public:
  Reader(const char* data, std::size_t end, std::size_t pos, const std::string& path)
      : data_(data), end_(end), pos_(pos), path_(path) {}
  std::size_t pos() const noexcept { return pos_; }
  std::size_t left() const noexcept { return end_ - pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(detail::cat("checkpoint '", path_, "': ", what, " at byte ", pos_,
                                      "; the file is corrupted or was not written by tessera"));
  }
  void need(std::uint64_t n, const char* what) const {
    if (n > left()) fail(detail::cat(what, " needs ", n, " bytes but only ", left(), " remain"));
  }
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string get_string(const char* what) {
    const auto n = get<std::uint64_t>(what);
    need(n, what);
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }
  const char* skip(std::uint64_t n, const char* what) {
    need(n, what);
    const char* p = data_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  const char* data_;
  std::size_t end_;
  std::size_t pos_;
  const std::string& path_;
};

// The whole file in a 64-byte aligned block, so tensors can view it without copying.
std::shared_ptr<char> read_aligned(const std::string& path, std::size_t& size) {
  std::error_code ec;
  TESSERA_CHECK(std::filesystem::is_regular_file(path, ec), "cannot open checkpoint '", path,
                "': no such file (or not a regular file)");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  TESSERA_CHECK(in.good(), "cannot open checkpoint '", path, "': ", std::strerror(errno));
  const std::streamoff n = in.tellg();
  TESSERA_CHECK(n >= 0, "cannot read the size of checkpoint '", path, "'");
  size = static_cast<std::size_t>(n);
  const std::size_t rounded = (size / kDataAlign + 1) * kDataAlign;
  std::shared_ptr<char> buf(static_cast<char*>(std::aligned_alloc(kDataAlign, rounded)), std::free);
  if (!buf) throw OutOfMemory(detail::cat("no memory to read checkpoint '", path, "' (", size, " bytes)"));
  in.seekg(0);
  in.read(buf.get(), n);
  TESSERA_CHECK(in.gcount() == n, "reading checkpoint '", path, "' failed after ", in.gcount(), " of ", n, " bytes");
  return buf;
}

std::uint64_t load_u64(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Magic, version, header checksum, size and trailing checksum; returns the checksummed length.
std::size_t verify_envelope(const std::string& path, const char* d, std::size_t size) {
  const std::size_t magic_seen = std::min(size, sizeof kMagic);
  TESSERA_CHECK(std::memcmp(d, kMagic, magic_seen) == 0, "checkpoint '", path,
                "' is not a tessera checkpoint (bad magic)");
  TESSERA_CHECK(size >= 12, "checkpoint '", path, "' is truncated after ", size, " of at least ",
                kHeaderBytes, " bytes (the header)");
  std::uint32_t version;
  std::memcpy(&version, d + 8, 4);
  TESSERA_CHECK(version <= kFormatVersion, "checkpoint '", path, "': format version ", version,
                " is newer than this tessera (", kFormatVersion, "); read it with a newer tessera");
  TESSERA_CHECK(version >= 1, "checkpoint '", path, "': format version 0 does not exist; the file is corrupted");
  TESSERA_CHECK(size >= kHeaderBytes, "checkpoint '", path, "' is truncated after ", size, " of at least ",
                kHeaderBytes, " bytes (the header)");
  TESSERA_CHECK(core::fnv1a64({d, 24}) == load_u64(d + 24), "checkpoint '", path,
                "': header checksum mismatch: the file is corrupted");
  std::uint32_t flags;
  std::memcpy(&flags, d + 12, 4);
  TESSERA_CHECK(flags == 0, "checkpoint '", path, "' uses optional features (flags 0x", std::hex, flags,
                ") that this tessera does not know; read it with a newer tessera");
  const std::uint64_t total = load_u64(d + 16);
  TESSERA_CHECK(size >= total, "checkpoint '", path, "' is truncated after ", size, " of ", total,
                " bytes (an interrupted copy or a full disk?)");
  TESSERA_CHECK(size == total, "checkpoint '", path, "' has ", size - total, " bytes after its end (",
                total, " bytes); the file is corrupted");
  TESSERA_CHECK(total >= kHeaderBytes + 24, "checkpoint '", path, "': its header gives a size of ", total,
                " bytes, too small for a checkpoint; the file is corrupted");
  const std::size_t body = total - 8;
  TESSERA_CHECK(core::fnv1a64({d, body}) == load_u64(d + body), "checkpoint '", path,
                "': checksum mismatch: the file is corrupted");
  return body;
}

// Elements of a shape, or false when the product overflows the bytes a file could hold. Zeros
// count as ones in that check: a tensor's strides multiply the other sizes even when one is 0
// (found by fuzz_checkpoint: a 0 beside sizes near 2^47 and 2^61 overflowed the strides).
bool checked_numel(const core::Shape& shape, std::uint64_t& out) {
  std::uint64_t n = 1, span = 1;
  for (auto d : shape) {
    if (d < 0) return false;
    const auto u = static_cast<std::uint64_t>(d == 0 ? 1 : d);
    if (span > std::numeric_limits<std::uint64_t>::max() / 8 / u) return false;
    span *= u;
    n *= static_cast<std::uint64_t>(d);
  }
  out = n;
  return true;
}

}  // namespace

void save_checkpoint(const std::string& path, const std::map<std::string, std::string>& meta,
                     const std::vector<std::pair<std::string, const core::Tensor*>>& tensors) {
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    TESSERA_CHECK(!name.empty(), "save_checkpoint '", path, "': a tensor has an empty name");
    TESSERA_CHECK(names.insert(name).second, "save_checkpoint '", path, "': tensor name '", name,
                  "' appears twice; names must be unique");
    TESSERA_CHECK(t != nullptr && t->defined(), "save_checkpoint '", path, "': tensor '", name,
                  "' is undefined (null or never allocated)");
    TESSERA_CHECK(!t->is_meta(), "save_checkpoint '", path, "': tensor '", name, "' (", t->describe(),
                  ") is a meta tensor with a shape but no data; a run on a meta allocator cannot save "
                  "checkpoints: use a real allocator");
    TESSERA_CHECK(dtype_code(t->dtype()) != 0, "save_checkpoint '", path, "': tensor '", name, "' is ",
                  t->describe(), "; checkpoints hold f32, f64, i32 and i64 tensors only");
    TESSERA_CHECK(t->ndim() <= static_cast<int>(kMaxDims), "save_checkpoint '", path, "': tensor '", name,
                  "' has ", t->ndim(), " dimensions; at most ", kMaxDims, " are supported");
  }
  std::size_t estimate = kHeaderBytes + 24;
  for (const auto& [k, v] : meta) estimate += 16 + k.size() + v.size();
  for (const auto& [name, t] : tensors) estimate += 24 + name.size() + 8 * t->ndim() + kDataAlign + t->nbytes();
  std::string out;
  out.reserve(estimate);
  out.assign(kHeaderBytes, '\0');
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  std::memcpy(out.data() + 8, &kFormatVersion, 4);
  put<std::uint64_t>(out, meta.size());
  for (const auto& [k, v] : meta) {
    put_string(out, k);
    put_string(out, v);
  }
  put<std::uint64_t>(out, tensors.size());
  for (const auto& [name, t] : tensors) {
    put_string(out, name);
    put<std::uint32_t>(out, dtype_code(t->dtype()));
    put<std::uint32_t>(out, static_cast<std::uint32_t>(t->ndim()));
    for (auto d : t->shape()) put<std::int64_t>(out, d);
    put<std::uint64_t>(out, t->nbytes());
    out.append(pad_to_align(out.size()), '\0');
    const std::size_t at = out.size();
    out.resize(at + t->nbytes());
    // A contiguous C-order copy of any strided view, written straight into the file image.
    if (t->numel() > 0) Tensor::from_blob(out.data() + at, t->shape(), t->dtype(), nullptr).copy_from(*t);
  }
  const std::uint64_t total = out.size() + 8;
  std::memcpy(out.data() + 16, &total, 8);
  const std::uint64_t header_sum = core::fnv1a64({out.data(), 24});
  std::memcpy(out.data() + 24, &header_sum, 8);
  put<std::uint64_t>(out, core::fnv1a64(out));
  core::write_file_atomic(path, out);
}

CheckpointData load_checkpoint(const std::string& path) {
  std::size_t size = 0;
  std::shared_ptr<char> buf = read_aligned(path, size);
  const std::size_t body = verify_envelope(path, buf.get(), size);
  Reader r(buf.get(), body, kHeaderBytes, path);
  CheckpointData data;
  const auto num_meta = r.get<std::uint64_t>("the metadata count");
  if (num_meta > r.left() / 16) r.fail(detail::cat("a metadata count of ", num_meta, " does not fit in the file"));
  for (std::uint64_t i = 0; i < num_meta; ++i) {
    std::string key = r.get_string("a metadata key");
    std::string value = r.get_string("a metadata value");
    if (!data.meta.emplace(std::move(key), std::move(value)).second) r.fail("a repeated metadata key");
  }
  const auto num_tensors = r.get<std::uint64_t>("the tensor count");
  if (num_tensors > r.left() / 24) r.fail(detail::cat("a tensor count of ", num_tensors, " does not fit in the file"));
  std::set<std::string> names;
  for (std::uint64_t i = 0; i < num_tensors; ++i) {
    std::string name = r.get_string("a tensor name");
    if (name.empty() || !names.insert(name).second) r.fail(detail::cat("an empty or repeated tensor name '", name, "'"));
    DType dtype;
    if (!dtype_from_code(r.get<std::uint32_t>("a dtype"), dtype)) r.fail(detail::cat("tensor '", name, "' has an unknown dtype"));
    const auto ndim = r.get<std::uint32_t>("a rank");
    if (ndim > kMaxDims) r.fail(detail::cat("tensor '", name, "' claims ", ndim, " dimensions"));
    core::Shape shape(ndim);
    for (auto& d : shape) d = r.get<std::int64_t>("a tensor size");
    const auto bytes = r.get<std::uint64_t>("a data length");
    std::uint64_t numel = 0;
    if (!checked_numel(shape, numel) || bytes != numel * core::dtype_size(dtype))
      r.fail(detail::cat("tensor '", name, "' of shape ", core::shape_str(shape), " and dtype ",
                         core::dtype_name(dtype), " claims ", bytes, " bytes of data"));
    r.skip(pad_to_align(r.pos()), "alignment padding");
    char* at = const_cast<char*>(r.skip(bytes, "tensor data"));
    // A view into the file image (64-byte aligned); the image lives as long as any tensor does.
    data.tensors.emplace_back(std::move(name), Tensor::from_blob(at, std::move(shape), dtype, buf));
  }
  if (r.left() != 0) r.fail(detail::cat(r.left(), " unexpected bytes after the last tensor"));
  return data;
}

void restore_tensors(const CheckpointData& data,
                     const std::vector<std::pair<std::string, core::Tensor*>>& targets) {
  const char* kOther = "; the checkpoint was written for another model (or another model configuration)";
  std::map<std::string, const Tensor*> saved;
  for (const auto& [name, t] : data.tensors) saved.emplace(name, &t);
  std::set<std::string> wanted;
  for (const auto& [name, t] : targets) {
    TESSERA_CHECK(t != nullptr && t->defined(), "restore_tensors: target '", name, "' is undefined");
    TESSERA_CHECK(wanted.insert(name).second, "restore_tensors: target '", name, "' is named twice");
    auto it = saved.find(name);
    TESSERA_CHECK(it != saved.end(), "restore_tensors: the checkpoint has no tensor '", name, "' (",
                  t->describe(), ") that this model needs", kOther);
    TESSERA_CHECK(it->second->dtype() == t->dtype() && it->second->shape() == t->shape(),
                  "restore_tensors: tensor '", name, "' is ", it->second->describe(),
                  " in the checkpoint but ", t->describe(), " in this model", kOther);
  }
  for (const auto& [name, t] : data.tensors)
    TESSERA_CHECK(wanted.count(name) != 0, "restore_tensors: the checkpoint holds tensor '", name, "' (",
                  t.describe(), ") that this model does not have", kOther);
  for (const auto& [name, t] : targets) t->copy_from(*saved.at(name));
}

CheckpointData load_checkpoint_stages(const std::string& path) {
  CheckpointData data = load_checkpoint(path);
  const auto it = data.meta.find("pipeline_stages");
  if (it == data.meta.end()) return data;
  const int stages = std::stoi(it->second);
  for (int k = 1; k < stages; ++k) {
    const std::string f = path + ".stage" + std::to_string(k);
    CheckpointData part = load_checkpoint(f);
    TESSERA_CHECK(
        part.meta["step"] == data.meta["step"] && part.meta["pipeline_stage"] == std::to_string(k),
        "checkpoint '", f, "' (stage ", k, " of ", stages, ") holds step ", part.meta["step"],
        " but '", path, "' holds step ", data.meta["step"],
        ": a save was interrupted between the stages' files; "
        "resume from an earlier complete checkpoint");
    for (auto& t : part.tensors) data.tensors.push_back(std::move(t));
  }
  return data;
}

}  // namespace tessera::nn
