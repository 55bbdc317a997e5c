// safetensors files: the round trip of every dtype tessera reads, files written by hand as
// huggingface's format allows them (unaligned data, any entry order), and every fault the reader
// refuses with a message naming the file, the tensor and what is wrong.
#include <cstring>

#include "support/test_utils.hpp"
#include "tessera/nn/weights.hpp"

namespace tessera::test {
namespace {

using core::DType;

/// A safetensors file: the 8-byte little-endian header size, the header, the data.
std::string st_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

/// The message read_safetensors gives for a file of `bytes`.
std::string read_error(const TempDir& tmp, const std::string& bytes) {
  write_file(tmp.file("bad.safetensors"), bytes);
  return error_of([&] { nn::read_safetensors(tmp.file("bad.safetensors")); });
}

const std::string kTwo = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";

}  // namespace

TEST_CASE("safetensors round trip keeps names, dtypes, shapes, bytes and metadata",
          "[safetensors]") {
  TempDir tmp("safetensors");
  std::vector<core::Tensor> ts;
  std::vector<std::pair<std::string, const core::Tensor*>> named;
  int k = 0;
  for (DType d : {DType::F64, DType::F32, DType::BF16, DType::F16})
    ts.push_back(random_tensor({2, 3}, d, ++k));
  ts.push_back(
      random_tensor({4, 5}, DType::F32, 9).narrow(1, 1, 3));  // strided: written contiguous
  core::Tensor i64 = core::Tensor::zeros(core::Shape{}, DType::I64),
               i32 = core::Tensor::zeros({0, 2}, DType::I32);
  i64.data<std::int64_t>()[0] = -123456789012345;
  ts.push_back(i64);
  ts.push_back(i32);
  for (std::size_t i = 0; i < ts.size(); ++i) named.emplace_back("t" + std::to_string(i), &ts[i]);
  nn::write_safetensors(tmp.file("w.safetensors"), named, {{"format", "pt"}, {"note", "é"}});
  std::map<std::string, std::string> meta;
  const nn::NamedTensors back = nn::read_safetensors(tmp.file("w.safetensors"), &meta);
  CHECK(meta == std::map<std::string, std::string>{{"format", "pt"}, {"note", "é"}});
  REQUIRE(back.size() == ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    INFO("tensor " << i);
    CHECK(back[i].first == named[i].first);  // the order of the offsets
    CHECK(back[i].second.dtype() == ts[i].dtype());
    CHECK(back[i].second.shape() == ts[i].shape());
    CHECK(bytes_of(back[i].second) == bytes_of(ts[i]));
  }
  const std::string e = error_of([&] {
    nn::write_safetensors(tmp.file("dup.safetensors"), {{"x", &ts[0]}, {"x", &ts[1]}});
  });
  CHECK(e.find("tensor name 'x' is given twice") != std::string::npos);
}

TEST_CASE("safetensors files need no alignment and may list tensors in any order",
          "[safetensors]") {
  TempDir tmp("safetensors");
  // A 49-byte header (data not 8-byte aligned), "b" listed first though its bytes come second.
  const std::string header = R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  write_file(tmp.file("ok.safetensors"), st_file(header, f32_bytes({1.5f, -2.f, 3.25f})));
  const nn::NamedTensors ts = nn::read_safetensors(tmp.file("ok.safetensors"));
  REQUIRE(ts.size() == 2);
  CHECK(ts[0].first == "a");
  CHECK(to_doubles(ts[0].second) == std::vector<double>{1.5, -2.0});
  CHECK(ts[1].first == "b");
  CHECK(to_doubles(ts[1].second) == std::vector<double>{3.25});
}

TEST_CASE("damaged safetensors files are refused saying what is wrong", "[safetensors]") {
  TempDir tmp("safetensors");
  const std::string good = st_file(kTwo, f32_bytes({1, 2, 3}));
  struct Case {
    const char* what;
    std::string bytes, message;
  };
  const std::vector<Case> cases = {
      {"truncated data", good.substr(0, good.size() - 1),
       "tensor 'b': data_offsets [8, 12] lie beyond the file's 11"},
      {"truncated header", good.substr(0, 20),
       "exceeds the 12 bytes after it (a truncated download"},
      {"under 8 bytes", "abc", "fewer than the 8-byte header size"},
      {"trailing bytes", good + "x", "the tensors end at data byte 12 but the file has 13"},
      {"bad JSON", st_file(R"({"a":{"dtype":"F32",)", ""), "the header is not a JSON object"},
      {"unknown dtype", st_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "abcd"),
       "tensor 'a': dtype U8 is not supported"},
      {"overlap",
       st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               f32_bytes({1, 2})),
       "tensor 'b': data_offsets [4, 8] overlap the previous tensor's bytes"},
      {"gap",
       st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32_bytes({1, 2})),
       "tensor 'a': data_offsets begin at 4 leaving a gap"},
      {"size mismatch",
       st_file(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", f32_bytes({1, 2})),
       "span 8 bytes but F64[2] needs 16"},
      {"bad shape",
       st_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", f32_bytes({1})),
       "tensor 'a': shape [-1] has an entry that is not a size"},
      {"offsets reversed",
       st_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", f32_bytes({1})),
       "end before they begin"},
      {"duplicate",
       st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
               f32_bytes({1})),
       "tensor 'a' is named twice"},
      {"pytorch zip", std::string("PK\x03\x04", 4) + std::string(60, '\0'),
       "tools/pth_to_safetensors.py"},
      {"pickle", std::string("\x80\x02}q\x00.", 6), "is a PyTorch pickle file, not safetensors"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string e = read_error(tmp, c.bytes);
    INFO(e);
    CHECK(e.find(c.message) != std::string::npos);
    CHECK(e.find(tmp.file("bad.safetensors")) != std::string::npos);  // names the file
  }
  CHECK(error_of([&] {
          nn::read_safetensors(tmp.file("absent.safetensors"));
        }).find("cannot open") != std::string::npos);
}

}  // namespace tessera::test
