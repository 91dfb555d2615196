// Tests for the tokenizers: byte round trips, the GPT-2 split pattern, and GPT-2 ids vs node's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/core/error.h"
#include "braid/data/gpt2_tokenizer.h"
#include "braid/data/tokenizer.h"
#include "braid/data/unicode.h"
#include "support/test_util.h"

namespace braid::data {
namespace {

namespace fs = std::filesystem;

using braid::testing::contains;
using braid::testing::error_of;

// Where scripts/fetch_gpt2_vocab.sh puts encoder.json and vocab.bpe.
fs::path gpt2_vocab_dir() {
  const char* data_dir = std::getenv("BRAID_DATA_DIR");
  const fs::path root = data_dir && *data_dir ? fs::path(data_dir)
                                              : fs::path(BRAID_FIXTURE_DIR) / ".." / ".." / "data";
  return root / "gpt2";
}

std::string random_bytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> pieces;
  for (std::string_view piece : gpt2_pretokenize(text)) pieces.emplace_back(piece);
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(ByteTokenizer, RoundTripsEveryByte) {
  const ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.vocab_size(), 257);
  EXPECT_EQ(tokenizer.eot_token(), 256);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<int32_t> ids = tokenizer.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) ASSERT_EQ(ids[b], b);
  EXPECT_EQ(tokenizer.decode(ids), all);
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("naïve café\n")), "naïve café\n");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{104, 105, 256}), "hi<|endoftext|>");
  EXPECT_TRUE(contains(error_of([&] {
                         tokenizer.decode(std::vector<int32_t>{1, 300});
                       }),
                       "token id 300 at position 1"));
}

TEST(MakeTokenizer, ByNameAndUnknownName) {
  EXPECT_EQ(make_tokenizer("byte")->name(), "byte");
  EXPECT_TRUE(contains(error_of([] { make_tokenizer("sentencepiece"); }),
                       "unknown tokenizer 'sentencepiece'"));
  EXPECT_TRUE(contains(error_of([] { make_tokenizer("gpt2"); }), "encoder.json"));
}

TEST(Unicode, ClassesAndDecoding) {
  EXPECT_EQ(char_class(U'a'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'é'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'ß'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'Ж'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'日'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'7'), CharClass::kNumber);
  EXPECT_EQ(char_class(U'٣'), CharClass::kNumber);  // Arabic-Indic digit (Nd)
  EXPECT_EQ(char_class(U'½'), CharClass::kNumber);  // No
  EXPECT_EQ(char_class(U'Ⅻ'), CharClass::kNumber);  // Nl
  EXPECT_EQ(char_class(U'\t'), CharClass::kSpace);
  EXPECT_EQ(char_class(U'\u00A0'), CharClass::kSpace);
  EXPECT_EQ(char_class(U'\u3000'), CharClass::kSpace);
  EXPECT_EQ(char_class(U'\u0301'), CharClass::kOther);  // combining mark: not a letter
  EXPECT_EQ(char_class(U'🍕'), CharClass::kOther);
  EXPECT_EQ(char_class(U'—'), CharClass::kOther);

  EXPECT_EQ(decode_utf8("é", 0).cp, U'é');
  EXPECT_EQ(decode_utf8("é", 0).len, 2u);
  EXPECT_EQ(decode_utf8("🍕", 0).len, 4u);
  for (const char* bad : {"\x80", "\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF"}) {
    const Utf8Char c = decode_utf8(bad, 0);
    EXPECT_EQ(c.cp, kInvalidCodepoint) << "input byte 0x" << std::hex << (+bad[0] & 0xFF);
    EXPECT_EQ(c.len, 1u);
  }
}

TEST(Gpt2Pretokenizer, FollowsTheSplitPattern) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("I'm they'll it's DON'T"),
            (Pieces{"I", "'m", " they", "'ll", " it", "'s", " DON", "'", "T"}));
  EXPECT_EQ(split("abc123 45,6"), (Pieces{"abc", "123", " 45", ",", "6"}));
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(split("x\n\ny"), (Pieces{"x", "\n", "\n", "y"}));
  EXPECT_EQ(split("x \n y"), (Pieces{"x", " \n", " y"}));
  EXPECT_EQ(split("x\ty"), (Pieces{"x", "\t", "y"}));
  EXPECT_EQ(split("?! 's ...x"), (Pieces{"?!", " '", "s", " ...", "x"}));
  EXPECT_EQ(split(" café"), (Pieces{" café"}));
  EXPECT_EQ(split("cafe\u0301s"), (Pieces{"cafe", "\u0301", "s"}));
  EXPECT_EQ(split("日本語 テキスト"), (Pieces{"日本語", " テキスト"}));
  EXPECT_EQ(split(""), Pieces{});
}

TEST(Gpt2Pretokenizer, PiecesCoverArbitraryBytes) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    const std::string text = random_bytes(rng, 1 + rng() % 64);
    std::string joined;
    for (std::string_view piece : gpt2_pretokenize(text)) {
      ASSERT_FALSE(piece.empty());
      joined += piece;
    }
    ASSERT_EQ(joined, text);
  }
}

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = gpt2_vocab_dir();
    if (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe")) {
      tokenizer_ = new Gpt2Tokenizer(Gpt2Tokenizer::load_dir(dir));
    }
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) {
      GTEST_SKIP() << "GPT-2 vocabulary not found in " << gpt2_vocab_dir()
                   << " (run scripts/fetch_gpt2_vocab.sh, or set BRAID_DATA_DIR)";
    }
  }
  static Gpt2Tokenizer* tokenizer_;
};
Gpt2Tokenizer* Gpt2TokenizerTest::tokenizer_ = nullptr;

TEST_F(Gpt2TokenizerTest, MatchesTheReferenceEncoder) {
  const fs::path fixture = fs::path(BRAID_FIXTURE_DIR) / "tokenizer" / "gpt2_ids.json";
  std::ifstream in(fixture);
  ASSERT_TRUE(in.good()) << "missing fixture " << fixture
                         << " (tests/reference/tokenizer/make_fixture.js writes it)";
  const nlohmann::json json = nlohmann::json::parse(in);
  ASSERT_GE(json.at("cases").size(), 15u);
  for (const auto& item : json.at("cases")) {
    const std::string text = item.at("text").get<std::string>();
    const std::vector<int32_t> expected = item.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer_->encode(text), expected) << "text: " << text;
    EXPECT_EQ(tokenizer_->decode(expected), text);
  }
}

TEST_F(Gpt2TokenizerTest, VocabularyAndSpecialToken) {
  EXPECT_EQ(tokenizer_->vocab_size(), 50257);
  EXPECT_EQ(tokenizer_->eot_token(), 50256);
  EXPECT_EQ(tokenizer_->token_bytes(50256), "<|endoftext|>");
  EXPECT_EQ(tokenizer_->token_bytes(220), " ");
  EXPECT_EQ(tokenizer_->token_bytes(198), "\n");
  EXPECT_EQ(tokenizer_->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_TRUE(contains(error_of([&] {
                         tokenizer_->decode(std::vector<int32_t>{15496, 50257});
                       }),
                       "token id 50257 at position 1"));
}

TEST_F(Gpt2TokenizerTest, RoundTripsArbitraryBytesAndIsRepeatable) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 100; ++trial) {
    const std::string text = random_bytes(rng, 1 + rng() % 80);
    const std::vector<int32_t> ids = tokenizer_->encode(text);
    ASSERT_EQ(tokenizer_->decode(ids), text);
    ASSERT_EQ(tokenizer_->encode(text), ids) << "the piece cache changed the result";
  }
}

// A toy vocabulary in GPT-2's file format: the 256 byte tokens (id = byte), then merges, so
// the BPE rules can be checked without downloading the real files.
class ToyBpeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("braid_toy_bpe_" + std::to_string(::getpid()) + "_" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // GPT-2's byte -> symbol map, spelled as UTF-8.
  static std::string symbol(unsigned char b) {
    char32_t cp = b;
    const auto printable = [](int x) {
      return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
    };
    if (!printable(b)) {
      cp = 256;
      for (int x = 0; x < b; ++x) cp += printable(x) ? 0 : 1;
    }
    std::string out;
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    return out;
  }

  // `merges` are "left right" lines in byte spelling (space written as symbol(' ')).
  Gpt2Tokenizer load(const std::vector<std::pair<std::string, std::string>>& merges) {
    nlohmann::json encoder = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) encoder[symbol(static_cast<unsigned char>(b))] = b;
    std::ofstream bpe(dir_ / "vocab.bpe");
    bpe << "#version: 0.2\n";
    int next_id = 256;
    for (const auto& [left, right] : merges) {
      bpe << left << ' ' << right << '\n';
      if (!encoder.contains(left + right)) encoder[left + right] = next_id++;
    }
    encoder["<|endoftext|>"] = next_id;
    bpe.close();
    std::ofstream(dir_ / "encoder.json") << encoder.dump();
    return Gpt2Tokenizer::load_dir(dir_);
  }

  fs::path dir_;
};

TEST_F(ToyBpeTest, MergesByRankLeftToRight) {
  const std::string g = symbol(' ');  // "Ġ"
  const Gpt2Tokenizer tokenizer =
      load({{"a", "a"}, {"b", "c"}, {"a", "bc"}, {g, "a"}, {"aa", "aa"}});
  // ids: aa 256, bc 257, abc 258, " a" 259, aaaa 260, EOT 261
  EXPECT_EQ(tokenizer.vocab_size(), 262);
  EXPECT_EQ(tokenizer.eot_token(), 261);
  // Every occurrence of the best pair merges, left to right, without overlap.
  EXPECT_EQ(tokenizer.encode("aaa"), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(tokenizer.encode("aaaa"), (std::vector<int32_t>{260}));
  // The lowest rank wins even when a higher-ranked pair comes first: (b,c) before (Ġ,a).
  EXPECT_EQ(tokenizer.encode(" abc"), (std::vector<int32_t>{' ', 258}));
  EXPECT_EQ(tokenizer.encode(" ab"), (std::vector<int32_t>{259, 'b'}));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(" abc aaaa\n")), " abc aaaa\n");
}

TEST_F(ToyBpeTest, MalformedFilesAreRejectedWithTheirLine) {
  load({{"a", "b"}});
  std::ofstream(dir_ / "vocab.bpe") << "#version: 0.2\na b\nx y\n";
  std::string message = error_of([&] { Gpt2Tokenizer::load_dir(dir_); });
  EXPECT_TRUE(contains(message, "line 3"));
  EXPECT_TRUE(contains(message, "result"));

  std::ofstream(dir_ / "vocab.bpe") << "#version: 0.2\na b c\n";
  message = error_of([&] { Gpt2Tokenizer::load_dir(dir_); });
  EXPECT_TRUE(contains(message, "line 2"));
  EXPECT_TRUE(contains(message, "two tokens"));

  std::ofstream(dir_ / "encoder.json") << "{\"a\": 0,";
  message = error_of([&] { Gpt2Tokenizer::load_dir(dir_); });
  EXPECT_TRUE(contains(message, (dir_ / "encoder.json").string()));
  EXPECT_TRUE(contains(message, "not valid JSON"));
}

TEST(Gpt2TokenizerLoad, MissingFilesNameThePath) {
  const fs::path dir = fs::temp_directory_path() / "braid_no_such_vocab_dir";
  const std::string message = error_of([&] { Gpt2Tokenizer::load_dir(dir); });
  EXPECT_TRUE(contains(message, (dir / "encoder.json").string()));
  EXPECT_TRUE(contains(message, "fetch_gpt2_vocab.sh"));
}

}  // namespace
}  // namespace braid::data
