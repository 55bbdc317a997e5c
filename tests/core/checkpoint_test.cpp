// Checkpoint files: bit-exact round trips, and every truncated, corrupted or foreign file refused.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "support/test_utils.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/nn/checkpoint.hpp"

using namespace tessera;
using Catch::Matchers::Contains;
using core::DType;
using core::Tensor;
using test::error_of;
namespace fs = std::filesystem;

namespace {

/// A scratch folder for one test's checkpoint files.
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tessera_ckpt") {}
};

/// The bytes of a tensor's elements in row-major order.
Tensor iota(const core::Shape& shape, DType dtype, std::int64_t start) {
  Tensor t = Tensor::empty(shape, dtype, core::MemCategory::Workspace);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::I32) t.data<std::int32_t>()[i] = static_cast<std::int32_t>(start + i * 7);
    if (dtype == DType::I64) t.data<std::int64_t>()[i] = start + i * 1'000'000'007LL;
  }
  return t;
}

/// A small checkpoint of two tensors, for the corruption sweeps.
std::string small_checkpoint(const TempDir& dir) {
  const std::string path = dir.file("small.ckpt");
  const Tensor a = test::random_tensor({2, 3}, DType::F32, 5);
  const Tensor b = iota({4}, DType::I64, -2);
  nn::save_checkpoint(path, {{"model", "tiny"}, {"step", "3"}}, {{"a", &a}, {"b", &b}});
  return core::read_file(path);
}

}  // namespace

TEST_CASE("checkpoint round trip is bit-exact for every dtype, view and metadata", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("model.ckpt");
  Tensor f32 = test::random_tensor({3, 4, 5}, DType::F32, 1);
  f32.data<float>()[0] = -0.0f;
  f32.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  f32.data<float>()[2] = std::numeric_limits<float>::infinity();
  f32.data<float>()[3] = std::numeric_limits<float>::denorm_min();
  const Tensor big = test::random_tensor({4, 6, 8}, DType::F64, 2);
  const Tensor strided = big.narrow(2, 1, 5).narrow(0, 1, 2);  // (2,6,5), not contiguous
  REQUIRE_FALSE(strided.is_contiguous());
  const Tensor i32 = iota({7}, DType::I32, -3);
  const Tensor i64 = iota({2, 2}, DType::I64, 1LL << 40);
  const Tensor empty = Tensor::empty({0, 3}, DType::F32);
  const Tensor scalar = test::random_tensor({}, DType::F64, 3);
  const std::map<std::string, std::string> meta = {
      {"model", "{\"name\": \"convnext\"}"}, {"step", "12"}, {"empty", ""}, {"binary", std::string("a\0b", 3)}};

  nn::save_checkpoint(path, meta,
                      {{"f32", &f32}, {"strided", &strided}, {"i32", &i32}, {"i64", &i64}, {"empty", &empty},
                       {"scalar", &scalar}});
  const nn::CheckpointData data = nn::load_checkpoint(path);

  REQUIRE(data.meta == meta);
  const std::vector<std::pair<std::string, const Tensor*>> expect = {
      {"f32", &f32}, {"strided", &strided}, {"i32", &i32}, {"i64", &i64}, {"empty", &empty}, {"scalar", &scalar}};
  REQUIRE(data.tensors.size() == expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) {
    INFO("tensor " << expect[i].first);
    const Tensor& got = data.tensors[i].second;
    REQUIRE(data.tensors[i].first == expect[i].first);
    REQUIRE(got.dtype() == expect[i].second->dtype());
    REQUIRE(got.shape() == expect[i].second->shape());
    REQUIRE(got.is_contiguous());
    REQUIRE(test::bytes_of(got) == test::bytes_of(*expect[i].second));
    if (got.numel() > 0) REQUIRE(reinterpret_cast<std::uintptr_t>(got.raw_data()) % 64 == 0);
  }

  SECTION("restore copies into targets, including strided ones") {
    Tensor f32_t = Tensor::zeros({3, 4, 5});
    Tensor host = Tensor::zeros({4, 6, 8}, DType::F64);
    Tensor strided_t = host.narrow(2, 1, 5).narrow(0, 1, 2);
    Tensor i32_t = Tensor::zeros({7}, DType::I32), i64_t = Tensor::zeros({2, 2}, DType::I64);
    Tensor empty_t = Tensor::zeros({0, 3}), scalar_t = Tensor::zeros({}, DType::F64);
    nn::restore_tensors(data, {{"scalar", &scalar_t}, {"f32", &f32_t}, {"strided", &strided_t}, {"i32", &i32_t},
                               {"i64", &i64_t}, {"empty", &empty_t}});
    REQUIRE(test::bytes_of(f32_t) == test::bytes_of(f32));
    REQUIRE(test::bytes_of(strided_t) == test::bytes_of(strided));
    REQUIRE(test::bytes_of(i32_t) == test::bytes_of(i32));
    REQUIRE(test::bytes_of(i64_t) == test::bytes_of(i64));
    REQUIRE(test::bytes_of(scalar_t) == test::bytes_of(scalar));
    REQUIRE(host.at<double>({0, 0, 0}) == 0.0);  // outside the view: untouched
  }
  SECTION("saving again over the file replaces it") {
    nn::save_checkpoint(path, {{"step", "13"}}, {{"i32", &i32}});
    const nn::CheckpointData again = nn::load_checkpoint(path);
    REQUIRE(again.meta.at("step") == "13");
    REQUIRE(again.tensors.size() == 1);
  }
}

TEST_CASE("checkpoint: every truncation is refused and named", "[checkpoint]") {
  TempDir dir;
  const std::string full = small_checkpoint(dir);
  REQUIRE(full.size() > 100);
  const std::string path = dir.file("cut.ckpt");
  for (std::size_t len = 0; len < full.size(); ++len) {
    INFO("prefix of " << len << " of " << full.size() << " bytes");
    test::write_file(path, full.substr(0, len));
    const std::string msg = error_of([&] { nn::load_checkpoint(path); });
    REQUIRE_THAT(msg, Contains("truncated after " + std::to_string(len) + " of"));
    REQUIRE_THAT(msg, Contains(path));
    if (len >= 32) REQUIRE_THAT(msg, Contains("of " + std::to_string(full.size()) + " bytes"));
  }
  test::write_file(path, full + "x");
  REQUIRE_THAT(error_of([&] { nn::load_checkpoint(path); }), Contains("1 bytes after its end"));
  test::write_file(path, full);
  REQUIRE(nn::load_checkpoint(path).tensors.size() == 2);
}

TEST_CASE("checkpoint: a changed byte anywhere is refused", "[checkpoint]") {
  TempDir dir;
  const std::string full = small_checkpoint(dir);
  const std::string path = dir.file("flip.ckpt");
  const unsigned char mask = GENERATE(0x01, 0xff);
  for (std::size_t at = 0; at < full.size(); ++at) {
    INFO("byte " << at << " of " << full.size() << " xor " << int(mask));
    std::string bad = full;
    bad[at] = static_cast<char>(bad[at] ^ mask);
    test::write_file(path, bad);
    const std::string msg = error_of([&] { nn::load_checkpoint(path); });
    REQUIRE(msg != "<no exception>");
    REQUIRE_THAT(msg, Contains(path));
    if (at >= 32) REQUIRE_THAT(msg, Contains("checksum mismatch: the file is corrupted"));
  }
}

TEST_CASE("checkpoint: an empty tensor whose other sizes overflow the strides is refused", "[checkpoint]") {
  // fuzz_checkpoint: shape (0, 2^40, 2^40) holds 0 bytes, so the size check passed, but the view's
  // strides multiplied 2^40 by 2^40 (signed overflow).
  TempDir dir;
  const std::string path = dir.file("zero.ckpt");
  const Tensor z = Tensor::empty({0, 3, 5}, DType::F32, core::MemCategory::Workspace);
  nn::save_checkpoint(path, {}, {{"z", &z}});
  std::string bytes = core::read_file(path);
  const std::int64_t from[3] = {0, 3, 5}, to[3] = {0, std::int64_t{1} << 40, std::int64_t{1} << 40};
  const auto at = bytes.find(std::string(reinterpret_cast<const char*>(from), sizeof from));
  REQUIRE(at != std::string::npos);
  bytes.replace(at, sizeof to, std::string(reinterpret_cast<const char*>(to), sizeof to));
  const std::uint64_t sum = core::fnv1a64({bytes.data(), bytes.size() - 8});
  std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
  test::write_file(path, bytes);
  REQUIRE_THAT(error_of([&] { nn::load_checkpoint(path); }),
               Contains("tensor 'z' of shape [0,1099511627776,1099511627776] and dtype f32 claims 0 bytes"));
}

TEST_CASE("checkpoint: foreign files, newer versions and a missing file", "[checkpoint]") {
  TempDir dir;
  const std::string full = small_checkpoint(dir);
  const std::string path = dir.file("other.ckpt");
  SECTION("bad magic") {
    test::write_file(path, "PK\x03\x04 this is a zip file, not a checkpoint");
    REQUIRE_THAT(error_of([&] { nn::load_checkpoint(path); }), Contains("not a tessera checkpoint (bad magic)"));
  }
  SECTION("newer format version") {
    std::string newer = full;
    newer[8] = 7;
    test::write_file(path, newer);
    REQUIRE_THAT(error_of([&] { nn::load_checkpoint(path); }),
                 Contains("format version 7 is newer than this tessera (1)"));
  }
  SECTION("missing file") {
    REQUIRE_THAT(error_of([&] { nn::load_checkpoint(dir.file("absent.ckpt")); }), Contains("cannot open"));
  }
}

TEST_CASE("checkpoint: restore into another model is refused and changes nothing", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("m.ckpt");
  const Tensor w = test::random_tensor({4, 3}, DType::F32, 7), b = test::random_tensor({4}, DType::F32, 8);
  nn::save_checkpoint(path, {}, {{"fc.weight", &w}, {"fc.bias", &b}});
  const nn::CheckpointData data = nn::load_checkpoint(path);
  Tensor tw = Tensor::zeros({4, 3}), tb = Tensor::zeros({4}), tx = Tensor::zeros({2});
  Tensor tw_wide = Tensor::zeros({4, 5}), tb_f64 = Tensor::zeros({4}, DType::F64);
  using Targets = std::vector<std::pair<std::string, Tensor*>>;
  const std::vector<std::pair<Targets, std::string>> cases = {
      {{{"fc.weight", &tw_wide}, {"fc.bias", &tb}},
       "tensor 'fc.weight' is f32[4,3] in the checkpoint but f32[4,5] in this model"},
      {{{"fc.weight", &tw}, {"fc.bias", &tb_f64}}, "tensor 'fc.bias' is f32[4] in the checkpoint but f64[4] in this model"},
      {{{"fc.weight", &tw}, {"fc.bias", &tb}, {"extra", &tx}}, "has no tensor 'extra' (f32[2]) that this model needs"},
      {{{"fc.weight", &tw}}, "holds tensor 'fc.bias' (f32[4]) that this model does not have"},
  };
  for (const auto& [targets, expected] : cases) {
    INFO("expecting: " << expected);
    const std::string msg = error_of([&] { nn::restore_tensors(data, targets); });
    REQUIRE_THAT(msg, Contains(expected));
    REQUIRE_THAT(msg, Contains("written for another model"));
    for (const Tensor* t : {&tw, &tb, &tx, &tw_wide})
      REQUIRE(test::to_doubles(*t) == std::vector<double>(static_cast<std::size_t>(t->numel()), 0.0));
    REQUIRE(test::to_doubles(tb_f64) == std::vector<double>(4, 0.0));
  }
  nn::restore_tensors(data, {{"fc.bias", &tb}, {"fc.weight", &tw}});
  REQUIRE(test::to_doubles(tw) == test::to_doubles(w));
  REQUIRE(test::to_doubles(tb) == test::to_doubles(b));
}

TEST_CASE("checkpoint: failed saves leave the old file, meta and odd tensors refused", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("keep.ckpt");
  const Tensor w = test::random_tensor({3}, DType::F32, 9);
  nn::save_checkpoint(path, {{"step", "1"}}, {{"w", &w}});
  const std::string before = core::read_file(path);

  SECTION("into a folder that does not exist") {
    const std::string nowhere = dir.file("no/such/folder/x.ckpt");
    REQUIRE_THAT(error_of([&] { nn::save_checkpoint(nowhere, {}, {{"w", &w}}); }), Contains("no/such/folder"));
    REQUIRE_FALSE(fs::exists(nowhere));
  }
  SECTION("a meta tensor") {
    auto meta_alloc = std::make_shared<core::Allocator>("meta", true);
    const Tensor m = Tensor::empty({2, 2}, DType::F32, core::MemCategory::Parameter, meta_alloc);
    REQUIRE(m.is_meta());
    REQUIRE_THAT(error_of([&] { nn::save_checkpoint(path, {}, {{"w", &w}, {"m", &m}}); }),
                 Contains("'m' (f32[2,2]) is a meta tensor"));
  }
  SECTION("bf16, duplicate names and undefined tensors") {
    const Tensor h = Tensor::zeros({2}, DType::BF16), undefined;
    REQUIRE_THAT(error_of([&] { nn::save_checkpoint(path, {}, {{"h", &h}}); }), Contains("f32, f64, i32 and i64"));
    REQUIRE_THAT(error_of([&] { nn::save_checkpoint(path, {}, {{"w", &w}, {"w", &w}}); }), Contains("appears twice"));
    REQUIRE_THAT(error_of([&] { nn::save_checkpoint(path, {}, {{"u", &undefined}}); }), Contains("undefined"));
  }
  REQUIRE(core::read_file(path) == before);
  for (const auto& e : fs::directory_iterator(dir.path))
    REQUIRE(e.path().filename() == "keep.ckpt");  // no temporary left behind
}
