// The safetensors file format (huggingface/safetensors, "Format"): an 8-byte little-endian
// header length N, N bytes of JSON naming every tensor's dtype, shape and byte range, then
// the tensors' bytes back to back. Every rank file of a checkpoint is one, and so is what
// `zerotrain zero-to-fp32` writes. No LibTorch: bytes and numbers only, so the checkpoint
// reader can be fuzzed without it (fuzz/).
//
// Reading is for untrusted files: every length, offset, shape and dtype is checked against
// the format's rules and the file's size before anything is used (docs/checkpoints.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zerotrain::checkpoint {

enum class Dtype { kBool, kU8, kI8, kI16, kI32, kI64, kF16, kBF16, kF32, kF64 };

std::string_view dtype_tag(Dtype dtype);                 // "F32", "BF16", ...
std::optional<Dtype> dtype_from_tag(std::string_view tag);
int64_t dtype_size(Dtype dtype);                         // bytes per element

struct TensorEntry {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  int64_t begin = 0;   // byte range in the data section (after the header)
  int64_t end = 0;
  int64_t numel() const;
  int64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<TensorEntry> tensors;            // in data order
  std::map<std::string, std::string> metadata;  // "__metadata__"
  int64_t data_offset = 0;                      // 8 + N: where the data section starts in the file
  std::map<std::string, size_t, std::less<>> index;   // name -> position in `tensors`
  const TensorEntry* find(std::string_view name) const;
};

// The most header bytes accepted (the reference implementation's limit).
inline constexpr int64_t kMaxHeaderBytes = 100'000'000;

// N from a file's first 8 bytes (little-endian), checked against the file's size and
// kMaxHeaderBytes. Throws CheckpointError naming `file`, including for a file shorter than 8
// bytes (`prefix` is then not read).
int64_t safetensors_header_length(const unsigned char (&prefix)[8], int64_t file_size, std::string_view file);

// Checks `header_json` (the N bytes after the length) of a file of `file_size` bytes and
// returns its entries sorted by offset. Throws CheckpointError naming `file` and the first
// problem: malformed JSON, an unknown dtype, a shape that does not match the byte range, a
// range outside the file, overlapping ranges, bytes no tensor covers, a duplicate name.
SafetensorsHeader parse_safetensors_header(std::string_view header_json, int64_t file_size, std::string_view file);

// A header for `tensors` whose shapes and dtypes are set: assigns their byte ranges back to
// back in the order given (callers put the widest dtypes first, so every tensor is aligned
// to its element size) and returns the 8-byte length plus the JSON, padded with spaces to a
// multiple of 8 bytes.
std::string encode_safetensors_header(std::vector<TensorEntry>& tensors,
                                      const std::map<std::string, std::string>& metadata = {});

}  // namespace zerotrain::checkpoint
