// safetensors I/O: bit-exact round trips for every dtype, hand-made files, corruption errors.
#include "braid/core/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "braid/core/error.h"

#ifndef BRAID_FIXTURE_DIR
#define BRAID_FIXTURE_DIR "tests/reference"
#endif

namespace braid {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test so parallel ctest runs never share files.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           fmt::format("braid_safetensors_{}_{}", ::getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // Writes a file byte by byte, so tests can build headers the writer would never produce.
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data,
                        int64_t header_len = -1) const {
    const std::string path = file(name);
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << header << data;
    return path;
  }

  fs::path dir_;
};

// Runs `fn`, expecting a braid::Error whose message holds every one of `parts`.
void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks '" << p << "': " << msg;
    return;
  }
  ADD_FAILURE() << "expected braid::Error";
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor d = t.is_contiguous() ? t : t.clone();
  const auto* p = static_cast<const uint8_t*>(d.data_ptr());
  return std::vector<uint8_t>(p, p + d.nbytes());
}

// A tensor whose bytes are a distinct pattern, so any misplaced byte shows.
Tensor patterned(const Shape& shape, DType dtype, uint8_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(seed + 37 * i + (i >> 8));
  return t;
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

TEST_F(SafetensorsTest, RoundTripsEveryDTypeBitExactInOrder) {
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"z.f32", patterned({3, 5}, DType::f32, 1)},    {"a.bf16", patterned({7}, DType::bf16, 2)},
      {"m.f16", patterned({2, 2, 3}, DType::f16, 3)}, {"b.i32", patterned({4, 1}, DType::i32, 4)},
      {"y.i64", patterned({3}, DType::i64, 5)},       {"c.u8", patterned({9}, DType::u8, 6)},
  };
  const std::map<std::string, std::string> meta = {{"step", "12"}, {"note", "\"quoted\" \n"}};
  const std::string path = file("all.safetensors");
  save_safetensors(path, tensors, meta);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.names().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, want] = tensors[i];
    EXPECT_EQ(f.names()[i], name) << "names must come back in save order";
    EXPECT_TRUE(f.contains(name));
    Tensor got = f.get(name);
    EXPECT_EQ(got.dtype(), want.dtype()) << name;
    EXPECT_EQ(got.shape(), want.shape()) << name;
    EXPECT_EQ(bytes_of(got), bytes_of(want)) << name;
  }
}

TEST_F(SafetensorsTest, DataSectionIsEightByteAligned) {
  save_safetensors(file("a.safetensors"), {{"x", patterned({3}, DType::u8, 0)}});
  std::ifstream in(file("a.safetensors"), std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST_F(SafetensorsTest, NonContiguousTensorIsWrittenDensely) {
  Tensor base = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor transposed = base.alias({3, 2}, {1, 3}, 0);  // base^T, a strided view
  ASSERT_FALSE(transposed.is_contiguous());
  save_safetensors(file("t.safetensors"), {{"t", transposed}});
  Tensor got = load_safetensors(file("t.safetensors")).get("t");
  EXPECT_EQ(got.shape(), (Shape{3, 2}));
  EXPECT_EQ(got.to_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST_F(SafetensorsTest, ScalarsAndEmptyTensorsRoundTrip) {
  save_safetensors(file("e.safetensors"), {{"scalar", Tensor::full({}, 2.5f)},
                                           {"empty", Tensor::empty({0, 4}, DType::i64)},
                                           {"empty2", Tensor::empty({0}, DType::f32)},
                                           {"after", Tensor::full({2}, -1.0f)}});
  SafetensorsFile f = load_safetensors(file("e.safetensors"));
  EXPECT_EQ(f.names(), (std::vector<std::string>{"scalar", "empty", "empty2", "after"}));
  EXPECT_EQ(f.get("scalar").shape(), Shape{});
  EXPECT_EQ(f.get("scalar").item(), 2.5f);
  EXPECT_EQ(f.get("empty").shape(), (Shape{0, 4}));
  EXPECT_EQ(f.get("after").to_vector(), (std::vector<float>{-1, -1}));
  EXPECT_TRUE(f.metadata().empty());
}

TEST_F(SafetensorsTest, OverwritesAtomically) {
  const std::string path = file("w.safetensors");
  save_safetensors(path, {{"v", Tensor::full({2}, 1.0f)}});
  SafetensorsFile old_view = load_safetensors(path);
  save_safetensors(path, {{"v", Tensor::full({3}, 2.0f)}});
  // The open file keeps reading the version it opened; a new load sees the new one.
  EXPECT_EQ(old_view.get("v").to_vector(), (std::vector<float>{1, 1}));
  EXPECT_EQ(load_safetensors(path).get("v").to_vector(), (std::vector<float>{2, 2, 2}));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST_F(SafetensorsTest, ReadsF64AsF32) {
  const double v[3] = {1.0 / 3.0, -2.5, 1e10};
  std::string data(sizeof v, '\0');
  std::memcpy(data.data(), v, sizeof v);
  const std::string path = write_raw(
      "f64.safetensors", R"({"d":{"dtype":"F64","shape":[3],"data_offsets":[0,24]}})", data);
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.entry("d").file_dtype, "F64");
  Tensor t = f.get("d");
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{static_cast<float>(v[0]), -2.5f, 1e10f}));
}

TEST_F(SafetensorsTest, ReadsHeaderPaddedWithSpaces) {
  const std::string path = write_raw("pad.safetensors",
                                     R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("__metadata__":{"k":"v"}}   )",
                                     f32_bytes({1, 2}));
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.get("x").to_vector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(f.metadata().at("k"), "v");
}

TEST_F(SafetensorsTest, MissingTensorNamesFileAndNearbyNames) {
  save_safetensors(file("m.safetensors"), {{"blocks.0.attn.qkv.weight", Tensor::zeros({1})},
                                           {"blocks.0.attn.qkv.bias", Tensor::zeros({1})},
                                           {"wte.weight", Tensor::zeros({1})}});
  SafetensorsFile f = load_safetensors(file("m.safetensors"));
  expect_error(
      [&] { f.get("blocks.0.attn.qkv.weigth"); },
      {"m.safetensors", "'blocks.0.attn.qkv.weigth'", "'blocks.0.attn.qkv.weight'", "3 in all"});
}

TEST_F(SafetensorsTest, WriterRejectsBadNames) {
  expect_error(
      [&] {
        save_safetensors(file("d"), {{"a", Tensor::zeros({1})}, {"a", Tensor::zeros({1})}});
      },
      {"'a'", "twice"});
  expect_error(
      [&] {
        save_safetensors(file("d"), {{"__metadata__", Tensor::zeros({1})}});
      },
      {"reserved"});
  expect_error([&] { save_safetensors(file("d"), {{"", Tensor::zeros({1})}}); }, {"empty name"});
  expect_error([&] { save_safetensors(file("d"), {{"u", Tensor()}}); }, {"'u'", "undefined"});
  EXPECT_FALSE(fs::exists(file("d")));
  EXPECT_FALSE(fs::exists(file("d.tmp")));
}

TEST_F(SafetensorsTest, WriterReportsUnwritableDirectory) {
  expect_error([&] { save_safetensors(file("no/such/dir/x.safetensors"), {}); },
               {"cannot create", "x.safetensors.tmp"});
}

// ---- corruption: each case names the file and, where there is one, the tensor -------------

TEST_F(SafetensorsTest, RejectsMissingAndTooShortFiles) {
  expect_error([&] { load_safetensors(file("absent.safetensors")); },
               {"cannot open", "absent.safetensors"});
  { std::ofstream(file("short.safetensors"), std::ios::binary) << "abc"; }
  expect_error([&] { load_safetensors(file("short.safetensors")); },
               {"short.safetensors", "3 bytes", "too short"});
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBeyondFile) {
  const std::string header = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const std::string path = write_raw("long.safetensors", header, f32_bytes({1}), 1000);
  expect_error([&] { load_safetensors(path); }, {"long.safetensors", "header length 1000"});
  const std::string huge = write_raw("huge.safetensors", header, "", int64_t{1} << 62);
  expect_error([&] { load_safetensors(huge); }, {"huge.safetensors", "runs past the end"});
}

TEST_F(SafetensorsTest, RejectsBadJson) {
  expect_error(
      [&] { load_safetensors(write_raw("j.safetensors", R"({"x": {"dtype": "F32",)", "")); },
      {"j.safetensors", "not valid JSON"});
  expect_error([&] { load_safetensors(write_raw("n.safetensors", "[1, 2]", "")); },
               {"n.safetensors", "must start with"});
  expect_error([&] { load_safetensors(write_raw("s.safetensors", R"({"x": 3})", "")); },
               {"s.safetensors", "'x'", "must map to an object"});
}

TEST_F(SafetensorsTest, RejectsMalformedEntries) {
  auto load = [&](const std::string& entry, const std::string& data = "") {
    load_safetensors(write_raw("e.safetensors", "{\"w\":" + entry + "}", data));
  };
  expect_error([&] { load(R"({"dtype":"F32","shape":[1]})"); }, {"'w'", "lacks \"data_offsets\""});
  expect_error([&] { load(R"({"dtype":"C64","shape":[1],"data_offsets":[0,8]})", "12345678"); },
               {"e.safetensors", "'w'", "'C64'"});
  expect_error([&] { load(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,0]})"); },
               {"'w'", "non-negative"});
  expect_error([&] { load(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})", "1234"); },
               {"'w'", "data_offsets [0]"});
  expect_error([&] { load(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})", "1234"); },
               {"'w'", "begin after end"});
  expect_error(
      [&] { load(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1})", "1234"); },
      {"'w'", "unknown field \"extra\""});
  expect_error(
      [&] { load_safetensors(write_raw("md.safetensors", R"({"__metadata__":{"k":1}})", "")); },
      {"md.safetensors", "'k'", "must be a string"});
}

TEST_F(SafetensorsTest, RejectsOffsetsOutOfRange) {
  const std::string path = write_raw(
      "r.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234");
  expect_error([&] { load_safetensors(path); },
               {"r.safetensors", "'w'", "beyond the 4-byte data section"});
}

TEST_F(SafetensorsTest, RejectsSizeMismatch) {
  const std::string path =
      write_raw("z.safetensors", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                std::string(20, 'x'));
  expect_error([&] { load_safetensors(path); },
               {"z.safetensors", "'w'", "24 bytes", "span 20 bytes"});
}

TEST_F(SafetensorsTest, RejectsOverlappingTensors) {
  const std::string path = write_raw("o.safetensors",
                                     R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                     std::string(12, 'x'));
  expect_error([&] { load_safetensors(path); }, {"o.safetensors", "'b'", "overlaps", "'a'"});
}

TEST_F(SafetensorsTest, RejectsHolesAndTrailingBytes) {
  const std::string gap = write_raw("g.safetensors",
                                    R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                    std::string(12, 'x'));
  expect_error([&] { load_safetensors(gap); }, {"g.safetensors", "'b'", "belong to no tensor"});
  const std::string tail =
      write_raw("t.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                std::string(9, 'x'));
  expect_error([&] { load_safetensors(tail); }, {"t.safetensors", "cover 4 bytes", "holds 9"});
}

// The PyTorch fixture is written by hand in Python; reading it proves both writers agree.
TEST_F(SafetensorsTest, ReadsThePyTorchGptFixture) {
  const std::string path = std::string(BRAID_FIXTURE_DIR) + "/gpt_tiny.safetensors";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata().at("vocab_size"), "97");
  EXPECT_EQ(f.metadata().at("padded_vocab_size"), "128");
  EXPECT_EQ(f.get("wte.weight").shape(), (Shape{128, 32}));
  EXPECT_EQ(f.get("blocks.1.attn.qkv.weight").shape(), (Shape{96, 32}));
  EXPECT_EQ(f.get("logits").shape(), (Shape{2, 16, 128}));
  EXPECT_EQ(f.get("input_ids").dtype(), DType::i32);
  EXPECT_EQ(f.get("adamw_losses").shape(), Shape{10});
  EXPECT_TRUE(f.contains("grad.ln_f.bias"));
  EXPECT_TRUE(f.contains("adamw_final.blocks.0.mlp.proj.weight"));
  // Padding rows of the tied embedding are zero.
  std::vector<float> wte = f.get("wte.weight").to_vector();
  for (size_t i = 97 * 32; i < wte.size(); ++i) ASSERT_EQ(wte[i], 0.0f) << i;
}

}  // namespace
}  // namespace braid
