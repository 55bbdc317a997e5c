// safetensors files (huggingface/safetensors): an 8-byte little-endian header size, a JSON header
// {"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}, then the tensors' bytes.
// The reader trusts nothing in the header: every offset, shape and size is checked before use.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/nn/weights.hpp"

namespace tessera::nn {

static_assert(std::endian::native == std::endian::little, "safetensors files are little-endian");

namespace {

using core::DType;
using nlohmann::json;

constexpr const char* kConvertHint =
    "; a PyTorch .pth/.pt file converts with tools/pth_to_safetensors.py";

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::F64:
      return "F64";
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::I64:
      return "I64";
    case DType::I32:
      return "I32";
  }
  return "?";
}

/// JSON text for a message (never throws: bytes that are not UTF-8 are replaced).
std::string text(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

bool parse_dtype(const std::string& s, DType& out) {
  for (DType t : {DType::F64, DType::F32, DType::BF16, DType::F16, DType::I64, DType::I32})
    if (s == safetensors_dtype(t)) return out = t, true;
  return false;
}

/// One tensor's header entry, checked on its own (offsets relative to the data section).
struct Entry {
  std::string name;
  DType dtype = DType::F32;
  core::Shape shape;
  std::uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& path, const std::string& name, const json& v) {
  const std::string where = "safetensors file '" + path + "', tensor '" + name + "'";
  TESSERA_CHECK(
      v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
      where, ": the header entry must be an object with dtype, shape and data_offsets; got ",
      text(v));
  Entry e;
  e.name = name;
  const json& dt = v["dtype"];
  TESSERA_CHECK(dt.is_string(), where, ": dtype ", text(dt), " is not a string");
  TESSERA_CHECK(
      parse_dtype(dt.get<std::string>(), e.dtype), where, ": dtype ", dt.get<std::string>(),
      " is not supported (tessera reads F64, F32, BF16, F16, I64 and I32); convert the tensor in "
      "PyTorch first");
  const json& sh = v["shape"];
  TESSERA_CHECK(sh.is_array(), where, ": shape ", text(sh), " is not a list");
  std::uint64_t numel = 1;
  for (const json& d : sh) {
    TESSERA_CHECK(d.is_number_unsigned() && d.get<std::uint64_t>() <= (std::uint64_t(1) << 40),
                  where, ": shape ", text(sh), " has an entry that is not a size in [0, 2^40]");
    const std::uint64_t n = d.get<std::uint64_t>();
    TESSERA_CHECK(n == 0 || numel <= std::numeric_limits<std::uint64_t>::max() / 16 / n, where,
                  ": shape ", text(sh), " has too many elements");
    numel *= n;
    e.shape.push_back(static_cast<std::int64_t>(n));
  }
  const json& off = v["data_offsets"];
  TESSERA_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                    off[1].is_number_unsigned(),
                where, ": data_offsets ", text(off),
                " must be two non-negative integers [begin, end]");
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  TESSERA_CHECK(e.begin <= e.end, where, ": data_offsets ", text(off), " end before they begin");
  const std::uint64_t bytes = numel * core::dtype_size(e.dtype);
  TESSERA_CHECK(e.end - e.begin == bytes, where, ": data_offsets ", text(off), " span ",
                e.end - e.begin, " bytes but ", dt.get<std::string>(), text(sh), " needs ", bytes);
  return e;
}

/// The header's JSON, refusing a name given twice (nlohmann would keep the last one silently).
json parse_header(const std::string& path, std::string_view text) {
  std::set<std::string> names;
  std::string duplicate;
  const json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::key && depth == 1 &&
        !names.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json j = json::parse(text.begin(), text.end(), cb, false);
  TESSERA_CHECK(!j.is_discarded() && j.is_object(), "safetensors file '", path,
                "': the header is not a JSON object (a damaged or foreign file", kConvertHint, ")");
  TESSERA_CHECK(duplicate.empty(), "safetensors file '", path, "': tensor '", duplicate,
                "' is named twice in the header");
  return j;
}

void read_metadata(const std::string& path, const json& m,
                   std::map<std::string, std::string>* out) {
  TESSERA_CHECK(m.is_object(), "safetensors file '", path,
                "': __metadata__ must be an object of strings");
  for (const auto& [k, v] : m.items()) {
    TESSERA_CHECK(v.is_string(), "safetensors file '", path, "': __metadata__ entry '", k,
                  "' is not a string");
    if (out) (*out)[k] = v.get<std::string>();
  }
}

/// Offsets sorted by begin must tile the data section exactly: from 0, no overlap, no gap, no tail.
void check_tiling(const std::string& path, std::vector<Entry>& es, std::uint64_t data_bytes) {
  std::sort(es.begin(), es.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);  // a total order
  });
  std::uint64_t at = 0;
  for (const Entry& e : es) {
    TESSERA_CHECK(e.end <= data_bytes, "safetensors file '", path, "', tensor '", e.name,
                  "': data_offsets [", e.begin, ", ", e.end, "] lie beyond the file's ", data_bytes,
                  " data bytes (a truncated download?)");
    TESSERA_CHECK(e.begin >= at, "safetensors file '", path, "', tensor '", e.name,
                  "': data_offsets [", e.begin, ", ", e.end,
                  "] overlap the previous tensor's bytes (which end at ", at, ")");
    TESSERA_CHECK(e.begin == at, "safetensors file '", path, "', tensor '", e.name,
                  "': data_offsets begin at ", e.begin, " leaving a gap after byte ", at);
    at = e.end;
  }
  TESSERA_CHECK(at == data_bytes, "safetensors file '", path, "': the tensors end at data byte ",
                at, " but the file has ", data_bytes, " (trailing bytes)");
}

}  // namespace

NamedTensors read_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata) {
  const std::string file = core::read_file(path);
  const bool zip = file.rfind("PK\x03\x04", 0) == 0, pickle = !file.empty() && file[0] == '\x80';
  TESSERA_CHECK(!zip && !pickle, "'", path, "' is a PyTorch ", zip ? "zip (.pth/.pt)" : "pickle",
                " file, not safetensors", kConvertHint);
  TESSERA_CHECK(file.size() >= 8, "safetensors file '", path, "' has ", file.size(),
                " bytes, fewer than the 8-byte header size (a truncated or empty file)");
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  TESSERA_CHECK(n <= file.size() - 8, "safetensors file '", path, "': the header size ", n,
                " exceeds the ", file.size() - 8,
                " bytes after it (a truncated download, or not a safetensors file", kConvertHint,
                ")");
  const json header = parse_header(path, std::string_view(file).substr(8, n));
  std::vector<Entry> entries;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__")
      read_metadata(path, v, metadata);
    else
      entries.push_back(parse_entry(path, name, v));
  }
  check_tiling(path, entries, file.size() - 8 - n);
  NamedTensors out;
  const char* data = file.data() + 8 + n;
  for (const Entry& e : entries) {
    core::Tensor t = core::Tensor::empty(e.shape, e.dtype, core::MemCategory::Workspace);
    if (e.end > e.begin) std::memcpy(t.raw_data(), data + e.begin, e.end - e.begin);
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, const core::Tensor*>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<core::Tensor> hosts;
  std::uint64_t at = 0;
  for (const auto& [name, t] : tensors) {
    TESSERA_CHECK(name != "__metadata__" && !header.contains(name), "writing safetensors file '",
                  path, "': tensor name '", name, "' is ",
                  name == "__metadata__" ? "reserved" : "given twice");
    TESSERA_CHECK(t && t->defined() && !t->is_meta(), "writing safetensors file '", path,
                  "': tensor '", name, "' holds no data (undefined, or another pipeline stage's)");
    hosts.push_back(t->to_host().contiguous());
    header[name] = {{"dtype", safetensors_dtype(t->dtype())},
                    {"shape", t->shape()},
                    {"data_offsets", {at, at + t->nbytes()}}};
    at += t->nbytes();
  }
  std::string head = header.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  head.append((8 - head.size() % 8) % 8, ' ');  // aligned data, as huggingface's writer does
  std::string out(8, '\0');
  const std::uint64_t n = head.size();
  std::memcpy(out.data(), &n, 8);
  out += head;
  out.reserve(out.size() + at);
  for (const core::Tensor& h : hosts)
    out.append(static_cast<const char*>(h.raw_data()), h.nbytes());
  core::write_file_atomic(path, out);
}

}  // namespace tessera::nn
