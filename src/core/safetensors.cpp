// safetensors reader and atomic writer, validating every header field before touching data.
#include "braid/core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "braid/core/error.h"

namespace braid {

// The data section is copied byte for byte into tensors, which assumes the host's byte order
// matches the format's.
static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; big-endian hosts need a byte swap");

namespace {

using Json = nlohmann::ordered_json;  // keeps the header's key order for ties between empties

// Larger headers are certainly corrupt (the reference implementation uses the same bound), and
// refusing them avoids a huge allocation driven by eight garbage bytes.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct FileDType {
  const char* name;
  size_t size;
  DType dtype;  // in memory
};

// F64 is readable only: braid has no f64, so it is converted to f32 on load.
constexpr FileDType kFileDTypes[] = {
    {"F32", 4, DType::f32}, {"BF16", 2, DType::bf16}, {"F16", 2, DType::f16},
    {"I32", 4, DType::i32}, {"I64", 8, DType::i64},   {"U8", 1, DType::u8},
    {"F64", 8, DType::f32},
};

const FileDType* find_file_dtype(const std::string& name) {
  for (const auto& d : kFileDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

const char* file_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::u8:
      return "U8";
  }
  BRAID_FAIL("dtype {} has no safetensors name", static_cast<int>(t));
}

std::string errno_text() {
  return std::strerror(errno);
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<size_t>(n, 1ull << 30));
    if (w < 0 && errno == EINTR) continue;
    BRAID_CHECK(w > 0, "writing safetensors file {} failed: {}", path, errno_text());
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_all_at(int fd, void* data, size_t n, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min<size_t>(n, 1ull << 30), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    BRAID_CHECK(r >= 0, "reading safetensors file {} failed: {}", path, errno_text());
    BRAID_CHECK(r > 0, "safetensors file {} ended early (truncated while open?)", path);
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

// Makes the rename itself durable; a crash right after save_safetensors returns must not
// bring the old file back.
void fsync_parent_dir(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // some filesystems refuse directory descriptors; the data is synced
  ::fsync(fd);
  ::close(fd);
}

// Up to five stored names, those sharing the longest prefix with `wanted` first, so a typo in a
// deep dotted name shows its intended neighbours.
std::string suggest_names(const std::vector<std::string>& names, const std::string& wanted) {
  if (names.empty()) return "the file holds no tensors";
  auto common = [&](const std::string& n) {
    size_t i = 0;
    while (i < n.size() && i < wanted.size() && n[i] == wanted[i]) ++i;
    return i;
  };
  std::vector<size_t> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return common(names[a]) > common(names[b]); });
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min<size_t>(5, order.size()); ++i)
    shown.push_back("'" + names[order[i]] + "'");
  return fmt::format("available ({} in all): {}{}", names.size(), fmt::join(shown, ", "),
                     names.size() > shown.size() ? ", ..." : "");
}

uint64_t read_u64_le(const unsigned char* b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

// Parses and checks one tensor's header entry; the byte range is checked against the data
// section here, overlaps between tensors later.
SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const Json& info,
                             uint64_t data_size) {
  BRAID_CHECK(!name.empty(), "safetensors file {}: a tensor has an empty name", path);
  BRAID_CHECK(info.is_object(),
              "safetensors file {}: tensor '{}' must map to an object with dtype, shape and "
              "data_offsets, got {}",
              path, name, info.dump());
  for (const char* key : {"dtype", "shape", "data_offsets"})
    BRAID_CHECK(info.contains(key), "safetensors file {}: tensor '{}' lacks \"{}\"", path, name,
                key);
  for (const auto& [key, value] : info.items())
    BRAID_CHECK(key == "dtype" || key == "shape" || key == "data_offsets",
                "safetensors file {}: tensor '{}' has unknown field \"{}\" (expected dtype, shape, "
                "data_offsets)",
                path, name, key);

  SafetensorsEntry e;
  e.name = name;
  const Json& dt = info["dtype"];
  BRAID_CHECK(dt.is_string(), "safetensors file {}: tensor '{}' has a non-string dtype {}", path,
              name, dt.dump());
  e.file_dtype = dt.get<std::string>();
  const FileDType* fdt = find_file_dtype(e.file_dtype);
  BRAID_CHECK(fdt != nullptr,
              "safetensors file {}: tensor '{}' has dtype '{}'; braid reads F32, BF16, F16, I32, "
              "I64, U8 and F64 (as f32)",
              path, name, e.file_dtype);
  e.dtype = fdt->dtype;

  const Json& shape = info["shape"];
  BRAID_CHECK(shape.is_array(), "safetensors file {}: tensor '{}' has shape {}, expected an array",
              path, name, shape.dump());
  uint64_t numel = 1;
  for (const Json& d : shape) {
    BRAID_CHECK(d.is_number_unsigned(),
                "safetensors file {}: tensor '{}' has shape {}; dimensions must be non-negative "
                "integers",
                path, name, shape.dump());
    const uint64_t v = d.get<uint64_t>();
    BRAID_CHECK(v <= static_cast<uint64_t>(INT64_MAX) && !__builtin_mul_overflow(numel, v, &numel),
                "safetensors file {}: tensor '{}' has shape {} whose size overflows", path, name,
                shape.dump());
    e.shape.push_back(static_cast<int64_t>(v));
  }
  uint64_t bytes = 0;
  BRAID_CHECK(!__builtin_mul_overflow(numel, fdt->size, &bytes),
              "safetensors file {}: tensor '{}' has shape {} whose byte size overflows", path, name,
              shape.dump());

  const Json& off = info["data_offsets"];
  BRAID_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                  off[1].is_number_unsigned(),
              "safetensors file {}: tensor '{}' has data_offsets {}, expected [begin, end] with "
              "non-negative integers",
              path, name, off.dump());
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  BRAID_CHECK(e.begin <= e.end,
              "safetensors file {}: tensor '{}' has data_offsets [{}, {}] with "
              "begin after end",
              path, name, e.begin, e.end);
  BRAID_CHECK(e.end <= data_size,
              "safetensors file {}: tensor '{}' has data_offsets [{}, {}] beyond the {}-byte data "
              "section (file truncated?)",
              path, name, e.begin, e.end, data_size);
  BRAID_CHECK(e.end - e.begin == bytes,
              "safetensors file {}: tensor '{}' is {} {} = {} bytes but data_offsets [{}, {}] span "
              "{} bytes",
              path, name, e.file_dtype, shape.dump(), bytes, e.begin, e.end, e.end - e.begin);
  return e;
}

}  // namespace

// ---- writing ---------------------------------------------------------------------------------

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  std::vector<Tensor> dense;
  dense.reserve(tensors.size());
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    BRAID_CHECK(!name.empty(), "save_safetensors({}): a tensor has an empty name", path);
    BRAID_CHECK(name != "__metadata__",
                "save_safetensors({}): '__metadata__' is reserved and cannot name a tensor", path);
    BRAID_CHECK(seen.insert(name).second, "save_safetensors({}): tensor name '{}' appears twice",
                path, name);
    BRAID_CHECK(t.defined(), "save_safetensors({}): tensor '{}' is undefined", path, name);
    BRAID_CHECK(t.device().is_cpu(),
                "save_safetensors({}): tensor '{}' is on {}; copy it to the host first", path, name,
                t.device().str());
    // The format has no strides: a view must be written as the dense tensor it denotes.
    Tensor d = t.is_contiguous() ? t : t.clone();
    const uint64_t bytes = d.nbytes();
    header[name] = {{"dtype", file_dtype_name(d.dtype())},
                    {"shape", d.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    dense.push_back(std::move(d));
  }
  std::string text = header.dump();
  // Space padding (allowed by the format) keeps the data section 8-byte aligned, so a reader
  // that maps the file can view i64/f64 data in place.
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(text.size() >> (8 * i));

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  BRAID_CHECK(fd >= 0, "save_safetensors: cannot create {}: {}", tmp, errno_text());
  try {
    write_all(fd, len, 8, tmp);
    write_all(fd, text.data(), text.size(), tmp);
    for (const Tensor& d : dense)
      if (d.nbytes() > 0) write_all(fd, d.data_ptr(), d.nbytes(), tmp);
    BRAID_CHECK(::fsync(fd) == 0, "save_safetensors: fsync of {} failed: {}", tmp, errno_text());
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // close() can report a deferred write error (NFS); the descriptor is gone either way.
  if (::close(fd) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    BRAID_FAIL("save_safetensors: closing {} failed: {}", tmp, why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    BRAID_FAIL("save_safetensors: renaming {} to {} failed: {}", tmp, path, why);
  }
  fsync_parent_dir(path);
}

// ---- reading ---------------------------------------------------------------------------------

struct SafetensorsFile::Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

SafetensorsFile load_safetensors(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BRAID_CHECK(fd >= 0, "cannot open safetensors file {}: {}", path, errno_text());
  f.fd_ = std::make_shared<SafetensorsFile::Fd>(fd);

  struct stat st {};
  BRAID_CHECK(::fstat(fd, &st) == 0, "cannot stat safetensors file {}: {}", path, errno_text());
  BRAID_CHECK(S_ISREG(st.st_mode), "safetensors path {} is not a regular file", path);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  BRAID_CHECK(file_size >= 8,
              "safetensors file {} is {} bytes, too short for the 8-byte header length", path,
              file_size);

  unsigned char len_bytes[8];
  read_all_at(fd, len_bytes, 8, 0, path);
  const uint64_t header_len = read_u64_le(len_bytes);
  BRAID_CHECK(header_len <= file_size - 8,
              "safetensors file {}: header length {} runs past the end of the {}-byte file "
              "(truncated, or not a safetensors file)",
              path, header_len, file_size);
  BRAID_CHECK(header_len <= kMaxHeaderBytes,
              "safetensors file {}: header length {} exceeds the {}-byte limit (corrupt file?)",
              path, header_len, kMaxHeaderBytes);
  BRAID_CHECK(header_len >= 2, "safetensors file {}: header length {} cannot hold a JSON object",
              path, header_len);
  std::string text(header_len, '\0');
  read_all_at(fd, text.data(), header_len, 8, path);
  BRAID_CHECK(text[0] == '{',
              "safetensors file {}: header must start with '{{', found byte 0x{:02x} (not a "
              "safetensors file?)",
              path, static_cast<unsigned char>(text[0]));

  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {
    BRAID_FAIL("safetensors file {}: header is not valid JSON: {}", path, e.what());
  }
  BRAID_CHECK(header.is_object(), "safetensors file {}: header must be a JSON object", path);

  f.data_start_ = 8 + header_len;
  const uint64_t data_size = file_size - f.data_start_;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      BRAID_CHECK(value.is_object(), "safetensors file {}: __metadata__ must be an object, got {}",
                  path, value.dump());
      for (const auto& [mk, mv] : value.items()) {
        BRAID_CHECK(mv.is_string(),
                    "safetensors file {}: __metadata__ value for '{}' must be a string, got {}",
                    path, mk, mv.dump());
        f.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    f.entries_.push_back(parse_entry(path, key, value, data_size));
  }

  // Data order = save order (see the header comment); stable so consecutive empty tensors
  // keep their header order.
  std::stable_sort(f.entries_.begin(), f.entries_.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  uint64_t covered = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const auto& e : f.entries_) {
    BRAID_CHECK(e.begin >= covered,
                "safetensors file {}: tensor '{}' (bytes [{}, {})) overlaps tensor '{}' (bytes "
                "[{}, {}))",
                path, e.name, e.begin, e.end, prev ? prev->name : "", prev ? prev->begin : 0,
                prev ? prev->end : 0);
    BRAID_CHECK(e.begin == covered,
                "safetensors file {}: bytes [{}, {}) before tensor '{}' belong to no tensor; the "
                "format requires the tensors to tile the data section",
                path, covered, e.begin, e.name);
    covered = e.end;
    prev = &e;
  }
  BRAID_CHECK(covered == data_size,
              "safetensors file {}: the tensors cover {} bytes of data but the file holds {} "
              "(trailing garbage, or a header that lost entries)",
              path, covered, data_size);

  for (size_t i = 0; i < f.entries_.size(); ++i) {
    f.names_.push_back(f.entries_[i].name);
    f.index_.emplace(f.entries_[i].name, i);
  }
  return f;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  BRAID_CHECK(it != index_.end(), "safetensors file {} has no tensor '{}'; {}", path_, name,
              suggest_names(names_, name));
  return entries_[it->second];
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const uint64_t bytes = e.end - e.begin;
  Tensor t = Tensor::empty(e.shape, e.dtype);
  if (bytes == 0) return t;
  if (e.file_dtype == "F64") {
    std::vector<double> wide(bytes / 8);
    read_all_at(fd_->fd, wide.data(), bytes, data_start_ + e.begin, path_);
    float* out = t.data<float>();
    for (size_t i = 0; i < wide.size(); ++i) out[i] = static_cast<float>(wide[i]);
  } else {
    read_all_at(fd_->fd, t.data_ptr(), bytes, data_start_ + e.begin, path_);
  }
  return t;
}

}  // namespace braid
