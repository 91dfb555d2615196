// Reading and writing the safetensors format: how fixtures, exports and weights leave braid.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>"}}
// then the tensors' raw little-endian bytes; offsets are relative to the end of the header and
// the tensors tile the data section exactly (no gaps, no overlaps), as the format requires.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "braid/core/tensor.h"

namespace braid {

// Writes `tensors` (in the given order) and `metadata` to `path` atomically: the bytes go to
// `path.tmp`, are fsync'ed, then renamed over `path`, so a reader never sees a half-written
// file. Tensors must live on the host; non-contiguous ones are written densely. Names must be
// unique, non-empty and not "__metadata__". dtypes map F32, BF16, F16, I32, I64, U8.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// What the header says about one stored tensor.
struct SafetensorsEntry {
  std::string name;
  std::string file_dtype;  // as written in the file: "F32", "F64", ...
  DType dtype;             // what get() returns (F64 is read as f32)
  Shape shape;
  uint64_t begin = 0;  // byte range within the data section
  uint64_t end = 0;
};

// An opened, fully validated safetensors file. The header is parsed once; tensor data is read
// on demand by get() (with pread, so threads may call it at once) from the file as it was when
// opened: the descriptor stays open, so a later atomic replacement of `path` never mixes two
// versions. Copies share the descriptor.
class SafetensorsFile {
 public:
  const std::string& path() const { return path_; }
  // Tensor names in the order their data appears in the file (the order they were saved in).
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Header information for `name`; throws naming the file and a few available names.
  const SafetensorsEntry& entry(const std::string& name) const;
  // A new dense host tensor holding `name`'s data; F64 data is converted to f32.
  Tensor get(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  friend SafetensorsFile load_safetensors(const std::string& path);
  struct Fd;  // closes the descriptor when the last copy goes away

  std::string path_;
  std::shared_ptr<Fd> fd_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<std::string> names_;
  std::vector<SafetensorsEntry> entries_;  // same order as names_
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Opens and validates `path`: file too short, header length beyond the file, malformed JSON,
// unknown dtypes, offsets out of range, overlapping or leaving holes, and byte ranges that do
// not match shape x dtype size all throw braid::Error naming the file (and the tensor).
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace braid
