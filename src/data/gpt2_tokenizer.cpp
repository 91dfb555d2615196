// GPT-2 byte-level BPE: the split pattern by hand, merges on integer ids, and a piece cache.
//
// OpenAI's encoder works on strings of "byte symbols" (each byte mapped to a printable code
// point so the BPE files are text). Here the symbols are translated to raw bytes once at load
// time and every merge becomes (left id, right id) -> (rank, merged id), so encoding never
// builds symbol strings. The result is id-for-id what OpenAI's encoder.py produces.
#include "braid/data/gpt2_tokenizer.h"

#include <array>
#include <climits>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "braid/core/error.h"
#include "braid/data/unicode.h"

namespace braid::data {
namespace {

// Above this many cached pieces the cache starts over, which bounds its memory on
// adversarial input (every piece distinct) while English text stays far below it.
constexpr size_t kMaxCacheEntries = size_t{1} << 20;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves; the other 68 bytes
// (controls, space, soft hyphen, ...) get code points 256, 257, ... in byte order.
std::array<char32_t, 256> make_byte_symbols() {
  std::array<char32_t, 256> symbols{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    symbols[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return symbols;
}

// The length of a contraction ('s 't 're 've 'm 'll 'd) starting at `pos`, or 0.
size_t contraction_length(std::string_view text, size_t pos) {
  if (pos + 1 >= text.size() || text[pos] != '\'') return 0;
  const char a = text[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= text.size()) return 0;
  const char b = text[pos + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

std::string read_file(const std::filesystem::path& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  BRAID_CHECK(in.good(),
              "cannot open GPT-2 {} '{}' (expected the file from OpenAI's GPT-2 release; "
              "scripts/fetch_gpt2_vocab.sh downloads it into data/gpt2/)",
              what, path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

bool Gpt2Pretokenizer::next(std::string_view& piece) {
  const size_t n = text_.size();
  const size_t start = pos_;
  if (start >= n) return false;

  // The alternatives are tried in the pattern's order; the first that matches wins.
  if (const size_t len = contraction_length(text_, start); len > 0) {
    pos_ = start + len;
    piece = text_.substr(start, len);
    return true;
  }

  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional single space (U+0020 only), then
  // a run of one class. The space is taken only when a non-space follows it.
  const Utf8Char first = decode_utf8(text_, start);
  CharClass run_class = char_class(first.cp);
  size_t run_start = start;
  if (first.cp == U' ' && start + 1 < n) {
    const CharClass after = char_class(decode_utf8(text_, start + 1).cp);
    if (after != CharClass::kSpace) {
      run_class = after;
      run_start = start + 1;
    }
  }
  size_t end = run_start;
  if (run_class != CharClass::kSpace) {
    while (end < n) {
      const Utf8Char c = decode_utf8(text_, end);
      if (char_class(c.cp) != run_class) break;
      end += c.len;
    }
  } else {
    // `\s+(?!\S)` then `\s+`: a whitespace run; when a non-space follows, the run gives up its
    // last character (if it has two or more) so that " word" keeps its leading space.
    size_t last = start;
    while (end < n) {
      const Utf8Char c = decode_utf8(text_, end);
      if (char_class(c.cp) != CharClass::kSpace) break;
      last = end;
      end += c.len;
    }
    if (end < n && last > start) end = last;
  }
  pos_ = end;
  piece = text_.substr(start, end - start);
  return true;
}

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  Gpt2Pretokenizer splitter(text);
  std::string_view piece;
  while (splitter.next(piece)) pieces.push_back(piece);
  return pieces;
}

struct Gpt2Tokenizer::Impl {
  struct Merge {
    int32_t rank;
    int32_t merged;
  };

  std::vector<std::string> token_bytes;   // id -> raw bytes
  std::array<int32_t, 256> byte_token{};  // byte -> id of its one-byte token
  std::unordered_map<uint64_t, Merge> merges;
  int32_t eot = -1;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  // Byte pair encoding of one piece: repeatedly merge every occurrence (left to right) of the
  // adjacent pair with the lowest rank, until no adjacent pair has a rank.
  void bpe(std::string_view piece, std::vector<int32_t>& out) const {
    {
      std::lock_guard lock(cache_mutex);
      if (auto it = cache.find(std::string(piece)); it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> word(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) word[i] = byte_token[static_cast<uint8_t>(piece[i])];
    while (word.size() > 1) {
      int32_t best_rank = INT32_MAX;
      int32_t left = 0, right = 0, merged = 0;
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        const auto it = merges.find(pair_key(word[i], word[i + 1]));
        if (it != merges.end() && it->second.rank < best_rank) {
          best_rank = it->second.rank;
          left = word[i];
          right = word[i + 1];
          merged = it->second.merged;
        }
      }
      if (best_rank == INT32_MAX) break;
      size_t kept = 0;
      for (size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
          word[kept++] = merged;
          i += 2;
        } else {
          word[kept++] = word[i++];
        }
      }
      word.resize(kept);
    }
    out.insert(out.end(), word.begin(), word.end());
    std::lock_guard lock(cache_mutex);
    if (cache.size() >= kMaxCacheEntries) cache.clear();
    cache.emplace(std::string(piece), std::move(word));
  }
};

Gpt2Tokenizer::Gpt2Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer& Gpt2Tokenizer::operator=(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer::~Gpt2Tokenizer() = default;

Gpt2Tokenizer Gpt2Tokenizer::load_dir(const std::filesystem::path& dir) {
  return load(dir / "encoder.json", dir / "vocab.bpe");
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::filesystem::path& encoder_json,
                                  const std::filesystem::path& vocab_bpe) {
  auto impl = std::make_unique<Impl>();

  std::array<int, 0x200> symbol_to_byte;  // every byte symbol is below U+0200
  symbol_to_byte.fill(-1);
  const std::array<char32_t, 256> byte_symbols = make_byte_symbols();
  for (int b = 0; b < 256; ++b) symbol_to_byte[byte_symbols[b]] = b;

  // A token in the files' byte-symbol spelling -> raw bytes; `where` names it for errors.
  auto to_bytes = [&](std::string_view symbols, const std::string& where) {
    std::string bytes;
    for (size_t pos = 0; pos < symbols.size();) {
      const Utf8Char c = decode_utf8(symbols, pos);
      const bool known = c.cp < symbol_to_byte.size() && symbol_to_byte[c.cp] >= 0;
      BRAID_CHECK(known,
                  "{}: token '{}' contains code point U+{:04X}, which is not one of GPT-2's 256 "
                  "byte symbols (expected OpenAI's byte-level encoder.json / vocab.bpe)",
                  where, symbols, static_cast<uint32_t>(c.cp));
      bytes.push_back(static_cast<char>(symbol_to_byte[c.cp]));
      pos += c.len;
    }
    return bytes;
  };

  // encoder.json: {"symbols": id, ...} with ids 0..n-1, each once.
  const std::string encoder_text = read_file(encoder_json, "vocabulary encoder.json");
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(encoder_text);
  } catch (const nlohmann::json::exception& e) {
    BRAID_FAIL("'{}' is not valid JSON ({}); expected GPT-2's encoder.json", encoder_json.string(),
               e.what());
  }
  BRAID_CHECK(encoder.is_object() && !encoder.empty(),
              "'{}' should be a JSON object mapping tokens to ids (GPT-2's encoder.json)",
              encoder_json.string());
  const size_t vocab = encoder.size();
  impl->token_bytes.assign(vocab, std::string());
  std::vector<bool> seen(vocab, false);
  std::unordered_map<std::string, int32_t> bytes_to_id;
  bytes_to_id.reserve(vocab * 2);
  for (const auto& [symbols, value] : encoder.items()) {
    BRAID_CHECK(value.is_number_integer(), "'{}': the id of token '{}' is {}, expected an integer",
                encoder_json.string(), symbols, value.dump());
    const int64_t id = value.get<int64_t>();
    BRAID_CHECK(id >= 0 && id < static_cast<int64_t>(vocab) && !seen[id],
                "'{}': token '{}' has id {}, but the {} ids should be 0..{}, each used once",
                encoder_json.string(), symbols, id, vocab, vocab - 1);
    seen[id] = true;
    std::string bytes = to_bytes(symbols, encoder_json.string());
    if (symbols == "<|endoftext|>") impl->eot = static_cast<int32_t>(id);
    // Only the byte spelling of ordinary tokens takes part in merges; "<|endoftext|>" is
    // special and must not shadow a (hypothetical) ordinary token with the same bytes.
    if (symbols != "<|endoftext|>") bytes_to_id.emplace(bytes, static_cast<int32_t>(id));
    impl->token_bytes[id] = std::move(bytes);
  }
  BRAID_CHECK(impl->eot >= 0,
              "'{}' has no \"<|endoftext|>\" token (GPT-2's encoder.json has it at {})",
              encoder_json.string(), kEndOfText);
  for (int b = 0; b < 256; ++b) {
    const auto it = bytes_to_id.find(std::string(1, static_cast<char>(b)));
    BRAID_CHECK(it != bytes_to_id.end(),
                "'{}' has no token for byte 0x{:02X}; a byte-level BPE vocabulary needs all 256",
                encoder_json.string(), b);
    impl->byte_token[b] = it->second;
  }

  // vocab.bpe: "#version: 0.2", then one merge "left right" per line, best (rank 0) first.
  const std::string merges_text = read_file(vocab_bpe, "merges vocab.bpe");
  std::istringstream lines(merges_text);
  std::string line;
  int line_number = 0;
  int32_t rank = 0;
  impl->merges.reserve(vocab * 2);
  while (std::getline(lines, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ');
    BRAID_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                    line.find(' ', space + 1) == std::string::npos,
                "line {} of '{}' is '{}', expected two tokens separated by one space", line_number,
                vocab_bpe.string(), line);
    const std::string where = fmt::format("line {} of '{}'", line_number, vocab_bpe.string());
    const std::string left = to_bytes(std::string_view(line).substr(0, space), where);
    const std::string right = to_bytes(std::string_view(line).substr(space + 1), where);
    const auto find = [&](const std::string& bytes, std::string_view role) {
      const auto it = bytes_to_id.find(bytes);
      BRAID_CHECK(it != bytes_to_id.end(),
                  "{}: the merge '{}' needs its {} in '{}', but it is missing; are the two files "
                  "from the same release?",
                  where, line, role, encoder_json.string());
      return it->second;
    };
    const int32_t left_id = find(left, "left part");
    const int32_t right_id = find(right, "right part");
    const int32_t merged_id = find(left + right, "result");
    // Like encoder.py's dict(zip(merges, range(...))): a repeated pair keeps its last rank.
    impl->merges.insert_or_assign(pair_key(left_id, right_id), Impl::Merge{rank, merged_id});
    ++rank;
  }
  BRAID_CHECK(rank > 0, "'{}' holds no merges (expected GPT-2's vocab.bpe, 50000 lines)",
              vocab_bpe.string());
  return Gpt2Tokenizer(std::move(impl));
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  Gpt2Pretokenizer splitter(text);
  std::string_view piece;
  while (splitter.next(piece)) impl_->bpe(piece, ids);
  return ids;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  const auto& table = impl_->token_bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    BRAID_CHECK(ids[i] >= 0 && static_cast<size_t>(ids[i]) < table.size(),
                "cannot decode token id {} at position {}: GPT-2 ids are 0..{}", ids[i], i,
                table.size() - 1);
    text += table[ids[i]];
  }
  return text;
}

int64_t Gpt2Tokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->token_bytes.size());
}

int32_t Gpt2Tokenizer::eot_token() const {
  return impl_->eot;
}

const std::string& Gpt2Tokenizer::token_bytes(int32_t id) const {
  BRAID_CHECK(id >= 0 && static_cast<size_t>(id) < impl_->token_bytes.size(),
              "token id {} is outside the GPT-2 vocabulary [0, {})", id, impl_->token_bytes.size());
  return impl_->token_bytes[id];
}

}  // namespace braid::data
