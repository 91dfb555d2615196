// Training configuration: text-format parsing with located errors, defaults, overrides, rules.
#include "braid/train/config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "braid/core/error.h"
#include "braid/parallel/strategy.h"
#include "braid/train/device_placement.h"
#include "braid/train/step_trace.h"

namespace braid::train {
namespace {

namespace pb = google::protobuf;
using pb::Descriptor;
using pb::FieldDescriptor;
using pb::Message;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Optimal string alignment distance: Levenshtein plus swapping two neighbours at cost 1, because
// transposed letters ("n_laeyr") are among the most common typos.
size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// Index of the candidate closest to `name`, or -1 when none is close enough to be a plausible
// typo (suggesting an unrelated name is worse than suggesting nothing).
int closest(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string key = lower(name);
  int best = -1;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const size_t d = edit_distance(key, lower(candidates[i]));
    if (d < best_distance) {
      best_distance = d;
      best = static_cast<int>(i);
    }
  }
  // One edit per three letters: "n_layr" -> "n_layer", but not "bpe" -> "byte".
  const size_t limit = std::max<size_t>(1, key.size() / 3);
  if (best_distance <= limit) return best;
  // A clipped name ("vocab", "warmup") is a prefix of the one meant.
  if (key.size() >= 3) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (lower(candidates[i]).rfind(key, 0) == 0) return static_cast<int>(i);
    }
  }
  return -1;
}

// A field name to suggest for unknown `name` inside `desc`; "" when nothing fits. A name that
// is not a field of `desc` but is close to a field one section down ("lr" at the top level)
// gets that field's path, because the usual mistake is writing it outside its section.
std::string suggest_field(const Descriptor* desc, const std::string& name) {
  std::vector<std::string> names;
  for (int i = 0; i < desc->field_count(); ++i) names.push_back(desc->field(i)->name());
  if (int i = closest(name, names); i >= 0) return names[i];
  std::vector<std::string> leaves, paths;
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* section = desc->field(i);
    if (section->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const Descriptor* sub = section->message_type();
    for (int j = 0; j < sub->field_count(); ++j) {
      leaves.push_back(sub->field(j)->name());
      paths.push_back(section->name() + "." + sub->field(j)->name());
    }
  }
  if (int i = closest(name, leaves); i >= 0) return paths[i];
  return "";
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string field_names(const Descriptor* desc) {
  std::vector<std::string> names;
  for (int i = 0; i < desc->field_count(); ++i) names.push_back(desc->field(i)->name());
  return join(names, ", ");
}

// Resolves "model.n_layer" to its chain of field descriptors from the root message. `context`
// prefixes error messages (the flag that named the path).
std::vector<const FieldDescriptor*> resolve_path(const std::string& path,
                                                 const std::string& context) {
  std::vector<const FieldDescriptor*> chain;
  const Descriptor* desc = proto::TrainConfig::descriptor();
  std::string prefix;
  for (const std::string& part : split(path, '.')) {
    BRAID_CHECK(!part.empty(),
                "{}: field path \"{}\" has an empty part; expected e.g. model.n_layer", context,
                path);
    BRAID_CHECK(desc != nullptr, "{}: {} is a value, not a section, so it has no field \"{}\"",
                context, prefix, part);
    const FieldDescriptor* field = desc->FindFieldByName(part);
    if (field == nullptr) {
      const std::string suggestion = suggest_field(desc, part);
      const std::string help = suggestion.empty()
                                   ? "; its fields are: " + field_names(desc)
                                   : fmt::format(" (did you mean \"{}{}\"?)",
                                                 prefix.empty() ? "" : prefix + ".", suggestion);
      BRAID_FAIL("{}: unknown field \"{}\" in {}{}", context, part, desc->full_name(), help);
    }
    chain.push_back(field);
    prefix = prefix.empty() ? part : prefix + "." + part;
    desc = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE ? field->message_type() : nullptr;
  }
  return chain;
}

// The message that directly holds the last field of `chain`, created on the way if absent.
Message* mutable_parent(Message* root, const std::vector<const FieldDescriptor*>& chain) {
  Message* msg = root;
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    msg = msg->GetReflection()->MutableMessage(msg, chain[i]);
  }
  return msg;
}

const Message* parent(const Message* root, const std::vector<const FieldDescriptor*>& chain) {
  const Message* msg = root;
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    msg = &msg->GetReflection()->GetMessage(*msg, chain[i]);
  }
  return msg;
}

template <typename T>
bool parse_integer(const std::string& text, T* out) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;  // from_chars rejects '+', people write it
  auto [ptr, ec] = std::from_chars(begin, end, *out);
  return begin != end && ec == std::errc() && ptr == end;
}

bool parse_real(const std::string& text, double* out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  errno = 0;
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && errno != ERANGE;
}

// Parses `value` for `field`'s type and stores it; the error names the type that was expected.
void assign(Message* msg, const FieldDescriptor* field, const std::string& path,
            const std::string& value, const std::string& context) {
  const pb::Reflection* r = msg->GetReflection();
  auto bad = [&](const std::string& expected) {
    BRAID_FAIL("{}: {} expects {} ({}), got \"{}\"", context, path, expected, field->type_name(),
               value);
  };
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v = 0;
      if (!parse_integer(value, &v)) bad("a whole number in [-2147483648, 2147483647]");
      r->SetInt32(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v = 0;
      if (!parse_integer(value, &v)) bad("a whole number such as 1000");
      r->SetInt64(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v = 0;
      if (!parse_integer(value, &v)) bad("a non-negative whole number below 2^32");
      r->SetUInt32(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v = 0;
      if (!parse_integer(value, &v)) bad("a non-negative whole number such as 1337");
      r->SetUInt64(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double v = 0;
      if (!parse_real(value, &v)) bad("a number such as 3e-4");
      r->SetFloat(msg, field, static_cast<float>(v));
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v = 0;
      if (!parse_real(value, &v)) bad("a number such as 3e-4");
      r->SetDouble(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const std::string v = lower(value);
      if (v == "true" || v == "1") {
        r->SetBool(msg, field, true);
      } else if (v == "false" || v == "0") {
        r->SetBool(msg, field, false);
      } else {
        bad("true or false");
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string v = value;
      // Shells keep quotes written as --set 'data.tokenizer="byte"'; the quotes are not meant.
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
        v = v.substr(1, v.size() - 2);
      }
      r->SetString(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const pb::EnumDescriptor* type = field->enum_type();
      const pb::EnumValueDescriptor* v = type->FindValueByName(value);
      int number = 0;
      if (v == nullptr && parse_integer(value, &number)) v = type->FindValueByNumber(number);
      if (v == nullptr) {
        std::vector<std::string> names;
        for (int i = 0; i < type->value_count(); ++i) names.push_back(type->value(i)->name());
        bad("one of " + join(names, ", "));
      }
      r->SetEnum(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      BRAID_FAIL("{}: {} is a section, not a value; set one of its fields, e.g. {}.{}", context,
                 path, path, field->message_type()->field(0)->name());
  }
}

// Clears a field so apply_defaults fills it again from the current values of the others.
void clear_path(proto::TrainConfig& cfg, const std::string& path) {
  const auto chain = resolve_path(path, "clearing a default");
  Message* msg = mutable_parent(&cfg, chain);
  msg->GetReflection()->ClearField(msg, chain.back());
}

// Recomputes every default after an override, so derived defaults (seq_len = block_size,
// min_lr = lr / 10) follow the overridden value instead of keeping the file's.
void rederive_defaults(TrainConfig& cfg) {
  const std::set<std::string> previous = std::move(cfg.defaulted);
  cfg.defaulted.clear();
  for (const std::string& path : previous) clear_path(cfg.proto, path);
  apply_defaults(cfg);
}

// Keeps the first error only: after one, the tokenizer reports follow-on noise for the same spot.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}

  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// Text between the n-th pair of double quotes in `s` (n from 0), "" when absent.
std::string quoted(const std::string& s, int n) {
  size_t pos = 0;
  for (int i = 0; i <= n; ++i) {
    const size_t open = s.find('"', pos);
    if (open == std::string::npos) return "";
    const size_t close = s.find('"', open + 1);
    if (close == std::string::npos) return "";
    if (i == n) return s.substr(open + 1, close - open - 1);
    pos = close + 1;
  }
  return "";
}

// Column (0-based) of the identifier `name` on `line_text` at or before `column`. The parser
// reports the token after a bad field name; pointing at the name itself is what an editor needs.
int locate_name(const std::string& line_text, const std::string& name, int column) {
  if (name.empty()) return column;
  size_t from = std::min<size_t>(static_cast<size_t>(std::max(column, 0)), line_text.size());
  for (size_t pos = line_text.rfind(name, from); pos != std::string::npos;
       pos = pos == 0 ? std::string::npos : line_text.rfind(name, pos - 1)) {
    auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    const bool starts = pos == 0 || !ident(line_text[pos - 1]);
    const bool ends = pos + name.size() >= line_text.size() || !ident(line_text[pos + name.size()]);
    if (starts && ends) return static_cast<int>(pos);
  }
  return column;
}

std::string describe_parse_error(const FirstErrorCollector& e, const std::string& text,
                                 const std::string& source) {
  if (!e.has_error_) return fmt::format("{}: could not parse the config", source);
  const std::vector<std::string> lines = split(text, '\n');
  const std::string line_text = e.line_ >= 0 && static_cast<size_t>(e.line_) < lines.size()
                                    ? lines[static_cast<size_t>(e.line_)]
                                    : std::string();
  int column = e.column_;
  std::string message = e.message_;
  if (message.rfind("Message type \"", 0) == 0 &&
      message.find("has no field named") != std::string::npos) {
    // protobuf: Message type "braid.proto.ModelConfig" has no field named "n_layr".
    const std::string type = quoted(message, 0);
    const std::string name = quoted(message, 1);
    column = locate_name(line_text, name, column);
    message = fmt::format("unknown field \"{}\" in {}", name, type);
    if (const Descriptor* desc =
            pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type)) {
      const std::string suggestion = suggest_field(desc, name);
      if (!suggestion.empty()) message += fmt::format(" (did you mean \"{}\"?)", suggestion);
    }
  } else if (message.find("is specified multiple times") != std::string::npos) {
    const std::string name = quoted(message, 0);
    column = locate_name(line_text, name, column);
    message = fmt::format("field \"{}\" is set a second time; each field may be set once", name);
  } else if (message == "Expected identifier, got: " || message == "Unexpected end of string.") {
    message = "unexpected end of file; is a closing \"}\" missing?";
  }
  return fmt::format("{}:{}:{}: {}", source, e.line_ + 1, column + 1, message);
}

// Field path -> 1-based line of every field the parser saw, so validation can point at it.
void record_lines(const pb::TextFormat::ParseInfoTree* tree, const Descriptor* desc,
                  const std::string& prefix, std::map<std::string, int>& out) {
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* field = desc->field(i);
    if (field->is_repeated()) continue;  // a list has no single line to point at
    const auto location = tree->GetLocation(field, -1);
    if (location.line < 0) continue;
    const std::string path = prefix.empty() ? field->name() : prefix + "." + field->name();
    out[path] = location.line + 1;
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (const auto* nested = tree->GetTreeForNested(field, -1)) {
        record_lines(nested, field->message_type(), path, out);
      }
    }
  }
}

// The divisors of n nearest below and above k, as "4 or 8": the values a user most likely meant.
std::string nearest_divisors(int64_t n, int64_t k) {
  std::vector<std::string> found;
  for (int64_t d = std::min(k - 1, n); d >= 1; --d) {
    if (n % d == 0) {
      found.push_back(std::to_string(d));
      break;
    }
  }
  for (int64_t d = std::max<int64_t>(k + 1, 1); d <= n; ++d) {
    if (n % d == 0) {
      found.push_back(std::to_string(d));
      break;
    }
  }
  return join(found, " or ");
}

// Collects rule violations; each message starts with where the offending value came from.
class Checker {
 public:
  explicit Checker(const TrainConfig& cfg) : cfg_(cfg) {}

  // "model.n_head = 5", or "... (default)" when the value was not written anywhere.
  std::string value(const std::string& path) const {
    const auto chain = resolve_path(path, "validate");
    const Message* msg = parent(&cfg_.proto, chain);
    if (!msg->GetReflection()->HasField(*msg, chain.back())) return path + " (not set)";
    std::string text;
    pb::TextFormat::PrintFieldValueToString(*msg, chain.back(), -1, &text);
    return fmt::format("{} = {}{}", path, text, cfg_.defaulted.count(path) ? " (default)" : "");
  }

  // A second field a rule mentions, with where it came from: "model.block_size = 128 (line 6)".
  std::string ref(const std::string& path) const {
    if (auto it = cfg_.overrides.find(path); it != cfg_.overrides.end()) {
      return fmt::format("{} (from {})", value(path), it->second);
    }
    if (auto it = cfg_.field_lines.find(path); it != cfg_.field_lines.end()) {
      return fmt::format("{} (line {})", value(path), it->second);
    }
    return value(path);
  }

  void expect(bool ok, const std::string& path, const std::string& rule) {
    if (ok) return;
    const std::string where = cfg_.origin(path);
    problems_.push_back(
        fmt::format("{}{} {}", where.empty() ? "" : where + ": ", value(path), rule));
  }

  // A problem whose message names its field itself (a map field has no single value to print).
  void add(const std::string& message) { problems_.push_back(message); }

  // A string field restricted to a few names; suggests the closest for a typo.
  void expect_one_of(const std::string& path, const std::string& actual,
                     const std::vector<std::string>& allowed) {
    if (std::find(allowed.begin(), allowed.end(), actual) != allowed.end()) return;
    std::vector<std::string> shown;
    for (const auto& a : allowed) shown.push_back("\"" + a + "\"");
    const int guess = closest(actual, allowed);
    expect(false, path,
           fmt::format("must be one of {}{}", join(shown, ", "),
                       guess >= 0 ? fmt::format(" (did you mean \"{}\"?)", allowed[guess]) : ""));
  }

  std::vector<std::string> problems_;

 private:
  const TrainConfig& cfg_;
};

}  // namespace

std::string TrainConfig::origin(const std::string& field_path) const {
  if (auto it = overrides.find(field_path); it != overrides.end()) return it->second;
  if (auto it = field_lines.find(field_path); it != field_lines.end()) {
    return fmt::format("{}:{}", source, it->second);
  }
  return "";
}

TrainConfig load_config(const std::string& path) {
  std::error_code ec;
  BRAID_CHECK(std::filesystem::exists(path, ec),
              "config file not found: {} (relative paths start at {}); pass the path of a "
              ".textproto file, e.g. examples/gpt/configs/tiny.textproto",
              path, std::filesystem::current_path(ec).string());
  BRAID_CHECK(!std::filesystem::is_directory(path, ec),
              "config path {} is a folder; expected a .textproto file", path);
  std::ifstream in(path, std::ios::binary);
  BRAID_CHECK(in.good(), "cannot open config file {}: {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  BRAID_CHECK(!in.bad(), "error reading config file {}: {}", path, std::strerror(errno));
  return parse_config(text.str(), path);
}

TrainConfig parse_config(const std::string& text, const std::string& source_name) {
  TrainConfig cfg;
  cfg.source = source_name;
  FirstErrorCollector errors;
  pb::TextFormat::ParseInfoTree tree;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(text, &cfg.proto)) {
    BRAID_FAIL("{}", describe_parse_error(errors, text, source_name));
  }
  record_lines(&tree, proto::TrainConfig::descriptor(), "", cfg.field_lines);
  apply_defaults(cfg);
  return cfg;
}

void apply_defaults(TrainConfig& cfg) {
  // Fills one field when unset and remembers that it holds a default, not a written value.
  auto fill = [&](const char* path, bool present, auto&& set) {
    if (present) return;
    set();
    cfg.defaulted.insert(path);
  };
  // Defaults below must match the comments in src/proto/train_config.proto.
  auto* m = cfg.proto.mutable_model();
  fill("model.vocab_size", m->has_vocab_size(), [&] { m->set_vocab_size(50257); });
  fill("model.n_layer", m->has_n_layer(), [&] { m->set_n_layer(12); });
  fill("model.n_head", m->has_n_head(), [&] { m->set_n_head(12); });
  fill("model.n_embd", m->has_n_embd(), [&] { m->set_n_embd(768); });
  fill("model.block_size", m->has_block_size(), [&] { m->set_block_size(1024); });
  fill("model.padded_vocab_multiple", m->has_padded_vocab_multiple(),
       [&] { m->set_padded_vocab_multiple(64); });
  fill("model.tie_embeddings", m->has_tie_embeddings(), [&] { m->set_tie_embeddings(true); });
  fill("model.recompute", m->has_recompute(), [&] { m->set_recompute(false); });
  fill("model.init_from", m->has_init_from(), [&] { m->set_init_from(""); });

  auto* d = cfg.proto.mutable_data();
  fill("data.val_pattern", d->has_val_pattern(), [&] { d->set_val_pattern(""); });
  fill("data.tokenizer", d->has_tokenizer(), [&] { d->set_tokenizer("gpt2"); });
  fill("data.vocab_dir", d->has_vocab_dir(), [&] { d->set_vocab_dir(""); });

  auto* o = cfg.proto.mutable_optimizer();
  fill("optimizer.name", o->has_name(), [&] { o->set_name("adamw"); });
  fill("optimizer.lr", o->has_lr(), [&] { o->set_lr(6e-4); });
  fill("optimizer.min_lr", o->has_min_lr(), [&] { o->set_min_lr(o->lr() / 10); });
  fill("optimizer.weight_decay", o->has_weight_decay(), [&] { o->set_weight_decay(0.0); });
  fill("optimizer.beta1", o->has_beta1(), [&] { o->set_beta1(0.9); });
  fill("optimizer.beta2", o->has_beta2(), [&] { o->set_beta2(0.95); });
  fill("optimizer.eps", o->has_eps(), [&] { o->set_eps(1e-8); });
  fill("optimizer.momentum", o->has_momentum(), [&] { o->set_momentum(0.0); });
  fill("optimizer.grad_clip", o->has_grad_clip(), [&] { o->set_grad_clip(1.0); });
  fill("optimizer.warmup_steps", o->has_warmup_steps(), [&] { o->set_warmup_steps(0); });
  fill("optimizer.schedule", o->has_schedule(), [&] { o->set_schedule("cosine"); });

  auto* t = cfg.proto.mutable_training();
  fill("training.batch_size", t->has_batch_size(), [&] { t->set_batch_size(8); });
  fill("training.seq_len", t->has_seq_len(), [&] { t->set_seq_len(m->block_size()); });
  fill("training.grad_accum_steps", t->has_grad_accum_steps(), [&] { t->set_grad_accum_steps(1); });
  fill("training.seed", t->has_seed(), [&] { t->set_seed(1337); });
  fill("training.val_every", t->has_val_every(), [&] { t->set_val_every(0); });
  fill("training.val_steps", t->has_val_steps(), [&] { t->set_val_steps(20); });
  fill("training.log_every", t->has_log_every(), [&] { t->set_log_every(1); });
  fill("training.skip_nonfinite_steps", t->has_skip_nonfinite_steps(),
       [&] { t->set_skip_nonfinite_steps(false); });
  fill("training.threads", t->has_threads(), [&] { t->set_threads(0); });
  fill("training.peak_flops", t->has_peak_flops(), [&] { t->set_peak_flops(0.0); });
  fill("training.device", t->has_device(), [&] { t->set_device("cpu"); });
  fill("training.run_dir", t->has_run_dir(), [&] { t->set_run_dir(""); });
  fill("training.trace_steps", t->has_trace_steps(), [&] { t->set_trace_steps(""); });

  auto* s = cfg.proto.mutable_sample();
  fill("sample.every", s->has_every(), [&] { s->set_every(0); });
  fill("sample.tokens", s->has_tokens(), [&] { s->set_tokens(0); });
  fill("sample.temperature", s->has_temperature(), [&] { s->set_temperature(1.0); });
  fill("sample.top_k", s->has_top_k(), [&] { s->set_top_k(0); });
  fill("sample.prompt", s->has_prompt(), [&] { s->set_prompt(""); });

  auto* p = cfg.proto.mutable_parallel();
  fill("parallel.tp", p->has_tp(), [&] { p->set_tp(1); });
  fill("parallel.pp", p->has_pp(), [&] { p->set_pp(1); });
  fill("parallel.dp", p->has_dp(), [&] { p->set_dp(1); });
  fill("parallel.strategy", p->has_strategy(), [&] { p->set_strategy("auto"); });
  fill("parallel.sequence_parallel", p->has_sequence_parallel(),
       [&] { p->set_sequence_parallel(false); });
  fill("parallel.virtual_stages", p->has_virtual_stages(), [&] { p->set_virtual_stages(1); });
  fill("parallel.micro_batches", p->has_micro_batches(), [&] { p->set_micro_batches(0); });
  fill("parallel.schedule", p->has_schedule(), [&] { p->set_schedule("auto"); });
  fill("parallel.pipeline_trace", p->has_pipeline_trace(), [&] { p->set_pipeline_trace(""); });

  auto* k = cfg.proto.mutable_checkpoint();
  fill("checkpoint.dir", k->has_dir(), [&] { k->set_dir(""); });
  fill("checkpoint.every_steps", k->has_every_steps(), [&] { k->set_every_steps(0); });
  fill("checkpoint.mode", k->has_mode(), [&] { k->set_mode("async"); });
  fill("checkpoint.keep", k->has_keep(), [&] { k->set_keep(3); });
  fill("checkpoint.reshard", k->has_reshard(), [&] { k->set_reshard(true); });
  fill("checkpoint.fallback", k->has_fallback(), [&] { k->set_fallback(true); });
  fill("checkpoint.window", k->has_window(), [&] { k->set_window(7); });
  fill("resume", cfg.proto.has_resume(), [&] { cfg.proto.set_resume(""); });
}

std::vector<std::string> find_problems(const TrainConfig& cfg) {
  Checker c(cfg);
  const auto& m = cfg.model();
  const auto& d = cfg.data();
  const auto& o = cfg.optimizer();
  const auto& t = cfg.training();
  const auto& s = cfg.sample();
  const auto& p = cfg.parallel();

  c.expect(m.vocab_size() > 0, "model.vocab_size", "must be > 0");
  c.expect(m.n_layer() > 0, "model.n_layer", "must be > 0 (number of transformer blocks)");
  c.expect(m.n_head() > 0, "model.n_head", "must be > 0 (attention heads per block)");
  c.expect(m.n_embd() > 0, "model.n_embd", "must be > 0 (model width)");
  c.expect(m.block_size() > 0, "model.block_size", "must be > 0 (context length)");
  c.expect(m.padded_vocab_multiple() > 0, "model.padded_vocab_multiple",
           "must be > 0 (use 1 for no padding)");
  if (m.n_head() > 0 && m.n_embd() > 0) {
    c.expect(m.n_embd() % m.n_head() == 0, "model.n_head",
             fmt::format("does not divide {} (each head gets n_embd / n_head channels); head "
                         "counts that divide it: {}",
                         c.ref("model.n_embd"), nearest_divisors(m.n_embd(), m.n_head())));
  }

  c.expect(!d.train_pattern().empty(), "data.train_pattern",
           "must name the training shards, e.g. train_pattern: \"data/kjv/kjv_train_*.bin\"");
  c.expect_one_of("data.tokenizer", d.tokenizer(), {"gpt2", "byte"});
  if (m.vocab_size() > 0 && d.tokenizer() == "byte") {
    c.expect(m.vocab_size() >= 257, "model.vocab_size",
             fmt::format("is too small for the byte tokenizer ({}), which needs >= 257 "
                         "(256 byte values + end-of-text)",
                         c.ref("data.tokenizer")));
  }
  if (m.vocab_size() > 0 && d.tokenizer() == "gpt2") {
    c.expect(m.vocab_size() >= 50257, "model.vocab_size",
             fmt::format("is too small for the gpt2 tokenizer ({}), which needs >= 50257",
                         c.ref("data.tokenizer")));
  }

  c.expect_one_of("optimizer.name", o.name(), {"adamw", "sgd"});
  c.expect(o.lr() > 0 && std::isfinite(o.lr()), "optimizer.lr", "must be > 0 and finite");
  c.expect(o.min_lr() >= 0 && o.min_lr() <= o.lr(), "optimizer.min_lr",
           fmt::format("must be in [0, {}]", c.ref("optimizer.lr")));
  c.expect(o.weight_decay() >= 0 && std::isfinite(o.weight_decay()), "optimizer.weight_decay",
           "must be >= 0 and finite");
  c.expect(o.beta1() >= 0 && o.beta1() < 1, "optimizer.beta1", "must be in [0, 1)");
  c.expect(o.beta2() >= 0 && o.beta2() < 1, "optimizer.beta2", "must be in [0, 1)");
  c.expect(o.eps() > 0 && std::isfinite(o.eps()), "optimizer.eps", "must be > 0 and finite");
  c.expect(o.momentum() >= 0 && o.momentum() < 1, "optimizer.momentum", "must be in [0, 1)");
  c.expect(o.grad_clip() >= 0 && std::isfinite(o.grad_clip()), "optimizer.grad_clip",
           "must be >= 0 (0 turns clipping off)");
  c.expect(o.warmup_steps() >= 0, "optimizer.warmup_steps", "must be >= 0");
  if (o.warmup_steps() > 0 && t.steps() > 0) {
    c.expect(o.warmup_steps() <= t.steps(), "optimizer.warmup_steps",
             fmt::format("exceeds {}; warmup must end by the last step", c.ref("training.steps")));
  }
  c.expect_one_of("optimizer.schedule", o.schedule(), {"cosine", "constant"});

  c.expect(t.steps() > 0, "training.steps", "must be > 0 (optimizer steps to run)");
  c.expect(t.batch_size() > 0, "training.batch_size", "must be > 0 (sequences per micro-step)");
  c.expect(t.seq_len() > 0, "training.seq_len", "must be > 0 (tokens per sequence)");
  if (t.seq_len() > 0 && m.block_size() > 0) {
    c.expect(t.seq_len() <= m.block_size(), "training.seq_len",
             fmt::format("exceeds {}: the context is longer than the positions the model has; "
                         "lower seq_len or raise block_size",
                         c.ref("model.block_size")));
  }
  c.expect(t.grad_accum_steps() >= 1, "training.grad_accum_steps",
           "must be >= 1 (1 = no accumulation)");
  c.expect(t.val_every() >= 0, "training.val_every", "must be >= 0 (0 = only at the end)");
  c.expect(t.val_steps() > 0, "training.val_steps", "must be > 0 (batches per validation pass)");
  c.expect(t.log_every() > 0, "training.log_every", "must be > 0");
  c.expect(t.threads() >= 0, "training.threads", "must be >= 0 (0 = automatic)");
  c.expect(t.peak_flops() >= 0 && std::isfinite(t.peak_flops()), "training.peak_flops",
           "must be >= 0 and finite (FLOP/s of one rank, e.g. 1.5e11; 0 = measure it)");
  const std::string device_wrong = device_problem(t.device());
  c.expect(device_wrong.empty(), "training.device", device_wrong);
  std::optional<TraceSteps> traced;
  bool trace_steps_ok = true;
  try {
    traced = parse_trace_steps(t.trace_steps());
  } catch (const Error&) {
    trace_steps_ok = false;
  }
  c.expect(trace_steps_ok, "training.trace_steps",
           "is not \"A:B\" with 1 <= A <= B (the first and last step to trace, 1-based, "
           "inclusive; e.g. \"2:3\")");
  if (traced) {
    c.expect(
        !t.run_dir().empty(), "training.trace_steps",
        fmt::format("needs a folder for the trace files; {} is empty", c.ref("training.run_dir")));
    if (t.steps() > 0)
      c.expect(traced->last <= t.steps(), "training.trace_steps",
               fmt::format("ends after the run's last step, {}", c.ref("training.steps")));
  }
  c.expect(p.pipeline_trace().empty(), "parallel.pipeline_trace",
           "is replaced by training.trace_steps: set training.trace_steps: \"2:2\" and "
           "training.run_dir; <run_dir>/trace.json then holds every stage's pipeline actions "
           "with the rest of the step (docs/tracing.md)");

  c.expect(s.every() >= 0, "sample.every", "must be >= 0 (0 = only at the end)");
  c.expect(s.tokens() >= 0, "sample.tokens", "must be >= 0 (0 = no sampling)");
  c.expect(s.temperature() > 0 && std::isfinite(s.temperature()), "sample.temperature",
           "must be > 0 and finite (lower is greedier)");
  c.expect(s.top_k() >= 0, "sample.top_k", "must be >= 0 (0 = no top-k filter)");
  if (m.vocab_size() > 0) {
    c.expect(s.top_k() <= m.vocab_size(), "sample.top_k",
             fmt::format("exceeds {}", c.ref("model.vocab_size")));
  }

  c.expect(p.tp() >= 1, "parallel.tp", "must be >= 1 (1 = no tensor parallelism)");
  c.expect(p.pp() >= 1, "parallel.pp", "must be >= 1 (1 = no pipeline parallelism)");
  c.expect(p.dp() >= 1, "parallel.dp", "must be >= 1 (1 = no data parallelism)");
  // The strategy by name, then with its options, made as the Trainer will make it, so a typo in
  // either is reported here rather than after the model is built.
  std::vector<std::string> strategies = {"auto"};
  for (const std::string& name : parallel::registered_strategies()) strategies.push_back(name);
  c.expect_one_of("parallel.strategy", p.strategy(), strategies);
  if (std::find(strategies.begin(), strategies.end(), p.strategy()) != strategies.end()) {
    // "auto" as the Trainer resolves it.
    const std::string name = p.strategy() == "auto" ? (p.dp() > 1 ? "ddp" : "none") : p.strategy();
    try {
      parallel::make_strategy(name, parallel::StrategyOptions(p.strategy_options().begin(),
                                                              p.strategy_options().end()));
    } catch (const Error& e) {
      std::string why = e.what();
      // Drop the "(file:line)" braid::Error ends with: it points into the strategy, not the
      // config.
      if (const size_t at = why.rfind(" ("); at != std::string::npos && why.back() == ')')
        why.resize(at);
      c.add(fmt::format("parallel.strategy_options (for {}): {}", c.ref("parallel.strategy"), why));
    }
  }
  if (p.tp() >= 1 && m.n_head() > 0) {
    c.expect(m.n_head() % p.tp() == 0, "parallel.tp",
             fmt::format("does not divide {} (each tensor-parallel rank owns whole heads); "
                         "nearest valid tp: {}",
                         c.ref("model.n_head"), nearest_divisors(m.n_head(), p.tp())));
  }
  if (p.sequence_parallel() && p.tp() > 1 && t.seq_len() > 0) {
    c.expect(t.seq_len() % p.tp() == 0, "training.seq_len",
             fmt::format("is not divisible by parallel.tp = {}, which sequence parallelism "
                         "needs; use a multiple of {} or turn parallel.sequence_parallel off",
                         p.tp(), p.tp()));
  }
  if (p.pp() >= 1 && m.n_layer() > 0) {
    const int v = std::max(p.virtual_stages(), 1);
    c.expect(p.virtual_stages() >= 1, "parallel.virtual_stages",
             "must be >= 1 (model chunks per stage)");
    c.expect(p.virtual_stages() == 1 || p.pp() > 1, "parallel.virtual_stages",
             "needs pipeline parallelism (parallel.pp > 1)");
    if (p.stage_layers_size() == 0) {
      const int64_t pieces = static_cast<int64_t>(p.pp()) * v;
      c.expect(
          m.n_layer() % pieces == 0, "parallel.pp",
          fmt::format("x parallel.virtual_stages = {} gives {} virtual stages, which do not "
                      "divide {} (each owns whole blocks); nearest valid pp x "
                      "virtual_stages: {}, or list the blocks per virtual stage in "
                      "parallel.stage_layers",
                      v, pieces, c.ref("model.n_layer"), nearest_divisors(m.n_layer(), pieces)));
    } else {
      int64_t sum = 0;
      bool non_negative = true;
      for (int32_t layers : p.stage_layers()) {
        sum += layers;
        non_negative = non_negative && layers >= 0;
      }
      c.expect(p.stage_layers_size() == p.pp() * v && sum == m.n_layer() && non_negative,
               "parallel.pp",
               fmt::format("x parallel.virtual_stages = {} gives {} virtual stages, but "
                           "parallel.stage_layers lists {} counts summing to {}; it needs {} "
                           "counts >= 0 that sum to {}",
                           v, p.pp() * v, p.stage_layers_size(), sum, p.pp() * v,
                           c.ref("model.n_layer")));
    }
  }
  c.expect(p.micro_batches() >= 0, "parallel.micro_batches", "must be >= 0 (0 = pp)");
  c.expect_one_of("parallel.schedule", p.schedule(), {"auto", "1f1b", "gpipe", "interleaved_1f1b"});
  if (p.pp() > 1) {
    const int micro = p.micro_batches() > 0 ? p.micro_batches() : p.pp();
    c.expect(t.batch_size() % micro == 0, "training.batch_size",
             fmt::format("does not split into {} micro-batches (parallel.micro_batches; 0 means "
                         "pp); use a multiple of {}",
                         micro, micro));
    c.expect(t.grad_accum_steps() == 1, "training.grad_accum_steps",
             "must be 1 with pipeline parallelism: the pipeline accumulates over "
             "parallel.micro_batches instead");
    c.expect(p.schedule() != "1f1b" || p.virtual_stages() == 1, "parallel.schedule",
             fmt::format("runs one model chunk per stage, but {}; use interleaved_1f1b (or "
                         "gpipe)",
                         c.ref("parallel.virtual_stages")));
    c.expect(p.schedule() != "interleaved_1f1b" || p.virtual_stages() > 1, "parallel.schedule",
             fmt::format("interleaves model chunks, so it needs parallel.virtual_stages > 1, but "
                         "{}; set virtual_stages to 2 or more, or use 1f1b",
                         c.ref("parallel.virtual_stages")));
    const bool interleaved =
        p.schedule() == "interleaved_1f1b" || (p.schedule() == "auto" && p.virtual_stages() > 1);
    c.expect(!interleaved || micro >= p.pp(), "parallel.micro_batches",
             fmt::format("is fewer than the {} pipeline stages, which interleaved_1f1b needs; "
                         "use at least {}",
                         p.pp(), p.pp()));
  }
  const auto& k = cfg.proto.checkpoint();
  c.expect_one_of("checkpoint.mode", k.mode(), {"sync", "async", "overlapped"});
  c.expect(k.window() >= 1, "checkpoint.window", "must be >= 1 (steps the copy is spread over)");
  c.expect(k.mode() != "overlapped" || cfg.optimizer().name() == "adamw", "checkpoint.mode",
           "replays AdamW updates; with optimizer.name sgd use async");
  c.expect(k.every_steps() >= 0, "checkpoint.every_steps", "must be >= 0 (0 = only at the end)");
  c.expect(k.keep() >= 0, "checkpoint.keep", "must be >= 0 (0 keeps all)");
  c.expect(k.every_steps() == 0 || !k.dir().empty(), "checkpoint.every_steps",
           "needs checkpoint.dir (where to write them)");
  c.expect(cfg.proto.resume() != "latest" || !k.dir().empty(), "resume",
           "needs checkpoint.dir (where to look for the latest checkpoint)");
  if (!cfg.proto.resume().empty() && cfg.proto.resume() != "latest") {
    std::error_code ec;
    c.expect(std::filesystem::exists(cfg.proto.resume(), ec), "resume",
             fmt::format("does not exist (relative paths start at {}); name a checkpoint "
                         "(step_<N>/), a checkpoint folder, or \"latest\"",
                         std::filesystem::current_path(ec).string()));
  }
  if (!m.init_from().empty()) {
    std::error_code ec;
    c.expect(std::filesystem::is_regular_file(m.init_from(), ec), "model.init_from",
             fmt::format("is not a file (relative paths start at {}); name a safetensors file "
                         "with Hugging Face GPT-2 names, or \"\" for a random init",
                         std::filesystem::current_path(ec).string()));
  }
  return c.problems_;
}

std::string world_size_problem(const TrainConfig& cfg, int world_size) {
  const auto& p = cfg.parallel();
  const int64_t ranks = static_cast<int64_t>(p.tp()) * p.pp() * p.dp();
  if (ranks == world_size) return "";
  const Checker c(cfg);
  const int64_t model_ranks = static_cast<int64_t>(p.tp()) * p.pp();
  const std::string fix =
      model_ranks > 0 && world_size % model_ranks == 0
          ? fmt::format(
                "with tp and pp as they are, dp={} would fit (--set parallel.dp={}), or "
                "start {} ranks",
                world_size / model_ranks, world_size / model_ranks, ranks)
          : fmt::format(
                "no dp fits, as tp x pp = {} does not divide {}; start {} ranks (or "
                "another multiple of {}, with dp to match)",
                model_ranks, world_size, ranks, model_ranks);
  return fmt::format("{} x {} x {} is {} ranks, but the job has {}; {}", c.ref("parallel.tp"),
                     c.ref("parallel.pp"), c.ref("parallel.dp"), ranks, world_size, fix);
}

void validate(const TrainConfig& cfg) {
  const std::vector<std::string> problems = find_problems(cfg);
  if (problems.empty()) return;
  if (problems.size() == 1) BRAID_FAIL("invalid config: {}", problems[0]);
  BRAID_FAIL("invalid config, {} problems: {}", problems.size(), join(problems, "; "));
}

void set_field(TrainConfig& cfg, const std::string& path, const std::string& value,
               const std::string& origin) {
  const std::string context = origin.empty() ? fmt::format("--set {}={}", path, value) : origin;
  // The one map field: strategy options are free-form keys read by the chosen strategy.
  const std::string options_prefix = "parallel.strategy_options.";
  if (path.rfind(options_prefix, 0) == 0 && path.size() > options_prefix.size()) {
    (*cfg.proto.mutable_parallel()
          ->mutable_strategy_options())[path.substr(options_prefix.size())] = value;
    cfg.overrides[path] = context;
    return;
  }
  const auto chain = resolve_path(path, context);
  const FieldDescriptor* field = chain.back();
  BRAID_CHECK(!field->is_repeated(), "{}: {} is a list; --set takes single values", context, path);
  assign(mutable_parent(&cfg.proto, chain), field, path, value, context);
  cfg.field_lines.erase(path);
  cfg.defaulted.erase(path);
  cfg.overrides[path] = context;
  rederive_defaults(cfg);
}

std::vector<std::string> apply_overrides(TrainConfig& cfg, const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {  // the conventional end of options: everything after is the binary's
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    // Reads "--flag value" or "--flag=value"; false when `arg` is not this flag.
    auto flag_value = [&](const std::string& flag, const char* example, std::string* out) {
      if (arg == flag) {
        BRAID_CHECK(i + 1 < args.size(), "{} needs a value, e.g. {} {}", flag, flag, example);
        *out = args[++i];
        return true;
      }
      if (arg.rfind(flag + "=", 0) == 0) {
        *out = arg.substr(flag.size() + 1);
        return true;
      }
      return false;
    };
    std::string value;
    if (flag_value("--set", "model.n_layer=2", &value)) {
      const size_t eq = value.find('=');
      BRAID_CHECK(eq != std::string::npos && eq > 0,
                  "--set expects <field.path>=<value>, got \"{}\"; e.g. --set model.n_layer=2",
                  value);
      set_field(cfg, value.substr(0, eq), value.substr(eq + 1), "--set " + value);
    } else if (flag_value("--steps", "1000", &value)) {
      set_field(cfg, "training.steps", value, "--steps " + value);
    } else {
      rest.push_back(arg);
    }
  }
  return rest;
}

TrainConfig config_from_args(const std::vector<std::string>& args, std::vector<std::string>* rest) {
  std::string path;
  std::vector<std::string> others;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      others.insert(others.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (arg == "--config") {
      BRAID_CHECK(i + 1 < args.size(),
                  "--config needs a path, e.g. --config examples/gpt/configs/tiny.textproto");
      path = args[++i];
    } else if (arg.rfind("--config=", 0) == 0) {
      path = arg.substr(9);
    } else {
      others.push_back(arg);
    }
  }
  BRAID_CHECK(
      !path.empty(),
      "missing --config <file.textproto>, e.g. --config examples/gpt/configs/tiny.textproto");
  TrainConfig cfg = load_config(path);
  std::vector<std::string> left = apply_overrides(cfg, others);
  validate(cfg);
  if (rest != nullptr) *rest = std::move(left);
  return cfg;
}

std::string to_text(const TrainConfig& cfg) {
  std::string text;
  pb::TextFormat::Printer printer;
  BRAID_CHECK(printer.PrintToString(cfg.proto, &text), "could not print the config of {}",
              cfg.source);
  return text;
}

}  // namespace braid::train
