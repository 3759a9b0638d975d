#include "zerotrain/checkpoint/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "zerotrain/core/error.h"
#include "zerotrain/core/json_reader.h"

namespace zerotrain::checkpoint {
namespace {

struct DtypeInfo {
  Dtype dtype;
  std::string_view tag;
  int64_t size;
};
constexpr std::array<DtypeInfo, 10> kDtypes{{{Dtype::kBool, "BOOL", 1},
                                             {Dtype::kU8, "U8", 1},
                                             {Dtype::kI8, "I8", 1},
                                             {Dtype::kI16, "I16", 2},
                                             {Dtype::kI32, "I32", 4},
                                             {Dtype::kI64, "I64", 8},
                                             {Dtype::kF16, "F16", 2},
                                             {Dtype::kBF16, "BF16", 2},
                                             {Dtype::kF32, "F32", 4},
                                             {Dtype::kF64, "F64", 8}}};

// Nesting deeper than this is no safetensors header (entries are two levels deep); refusing
// it while parsing keeps a hostile file from exhausting the stack.
constexpr size_t kMaxDepth = 8;

using Json = json::Json;

[[noreturn]] void bad(std::string_view file, const std::string& what) {
  throw CheckpointError(std::string(file) + ": not a valid safetensors file: " + what);
}

int64_t checked_int(const Json& v, std::string_view file, const std::string& what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    bad(file, what + " must be a non-negative integer, got " + v.dump());
  }
  const uint64_t u = v.get<uint64_t>();
  if (u > static_cast<uint64_t>(INT64_MAX)) bad(file, what + " is out of range: " + v.dump());
  return static_cast<int64_t>(u);
}

TensorEntry parse_entry(const std::string& name, const Json& v, std::string_view file) {
  const std::string where = "tensor \"" + name + "\"";
  if (!v.is_object()) bad(file, where + " is not an object");
  TensorEntry t;
  t.name = name;
  for (const auto& [key, value] : v.items()) {
    if (key == "dtype") {
      if (!value.is_string()) bad(file, where + ": dtype is not a string");
      const auto d = dtype_from_tag(value.get<std::string>());
      if (!d) bad(file, where + ": unknown dtype " + value.dump());
      t.dtype = *d;
    } else if (key == "shape") {
      if (!value.is_array()) bad(file, where + ": shape is not an array");
      for (const auto& dim : value) t.shape.push_back(checked_int(dim, file, where + ": a shape dimension"));
    } else if (key == "data_offsets") {
      if (!value.is_array() || value.size() != 2) bad(file, where + ": data_offsets is not [begin, end]");
      t.begin = checked_int(value[0], file, where + ": data_offsets[0]");
      t.end = checked_int(value[1], file, where + ": data_offsets[1]");
    } else {
      bad(file, where + ": unknown field \"" + key + "\"");
    }
  }
  for (const char* required : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(required)) bad(file, where + " has no " + required);
  }
  if (t.end < t.begin) bad(file, where + ": data_offsets end before they begin");
  int64_t bytes = dtype_size(t.dtype);
  for (int64_t dim : t.shape) {
    if (__builtin_mul_overflow(bytes, dim, &bytes)) bad(file, where + ": its shape's byte size overflows");
  }
  if (bytes != t.end - t.begin) {
    bad(file, where + ": shape and dtype make " + std::to_string(bytes) + " bytes but data_offsets span " +
                  std::to_string(t.end - t.begin));
  }
  return t;
}

}  // namespace

std::string_view dtype_tag(Dtype dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.tag;
  }
  ZT_INTERNAL_ASSERT(false, "a dtype without a tag");
  return {};
}

std::optional<Dtype> dtype_from_tag(std::string_view tag) {
  for (const auto& d : kDtypes) {
    if (d.tag == tag) return d.dtype;
  }
  return std::nullopt;
}

int64_t dtype_size(Dtype dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.size;
  }
  return 1;
}

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const TensorEntry* SafetensorsHeader::find(std::string_view name) const {
  const auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

int64_t safetensors_header_length(const unsigned char (&prefix)[8], int64_t file_size, std::string_view file) {
  ZT_CHECK(file_size >= 8, CheckpointError, file, ": ", file_size, " bytes, too short for a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  ZT_CHECK(n <= static_cast<uint64_t>(kMaxHeaderBytes) && static_cast<int64_t>(n) <= file_size - 8, CheckpointError,
           file, ": its header length (", n, " bytes) does not fit the file; is it a safetensors file?");
  return static_cast<int64_t>(n);
}

SafetensorsHeader parse_safetensors_header(std::string_view header_json, int64_t file_size, std::string_view file) {
  const auto n = static_cast<int64_t>(header_json.size());
  if (n > kMaxHeaderBytes) bad(file, "its header is " + std::to_string(n) + " bytes, more than the format's limit");
  if (8 + n > file_size) bad(file, "its header runs past the end of the file");
  if (header_json.empty() || header_json.front() != '{') bad(file, "its header does not start with '{'");

  // The one JSON reader (core/json_reader.h): a tensor or a field named twice, nesting and
  // overflowing numbers are refused as in every JSON file zerotrain reads. Other readers keep
  // the first or the last of two entries, so a file read either way would be two files.
  json::ReadResult read = json::read_json_text(
      header_json, {.max_bytes = kMaxHeaderBytes, .max_depth = kMaxDepth, .what = "a safetensors header"});
  if (!read.ok()) bad(file, "its header is not JSON we read (" + read.problem + ")");
  const Json& json = read.value;
  if (!json.is_object()) bad(file, "its header is not a JSON object");

  SafetensorsHeader h;
  h.data_offset = 8 + n;
  for (const auto& [key, value] : json.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad(file, "__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) bad(file, "__metadata__ value of \"" + mk + "\" is not a string");
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(key, value, file));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  const int64_t data_bytes = file_size - h.data_offset;
  int64_t covered = 0;
  for (const auto& t : h.tensors) {
    if (t.begin != covered) {
      bad(file, t.begin > covered ? "bytes " + std::to_string(covered) + ".." + std::to_string(t.begin) +
                                        " of its data belong to no tensor"
                                  : "tensor \"" + t.name + "\" overlaps the one before it");
    }
    covered = t.end;
    if (covered > data_bytes) bad(file, "tensor \"" + t.name + "\" runs past the end of the file (truncated?)");
  }
  if (covered != data_bytes) {
    bad(file, "its data section is " + std::to_string(data_bytes) + " bytes but its tensors cover " +
                  std::to_string(covered));
  }
  for (size_t i = 0; i < h.tensors.size(); ++i) h.index.emplace(h.tensors[i].name, i);
  return h;
}

std::string encode_safetensors_header(std::vector<TensorEntry>& tensors, const std::map<std::string, std::string>& metadata) {
  Json json = Json::object();
  if (!metadata.empty()) json["__metadata__"] = metadata;
  int64_t offset = 0;
  for (auto& t : tensors) {
    // A repeated name would replace the earlier entry and leave its bytes uncovered.
    ZT_INTERNAL_ASSERT(t.name != "__metadata__" && !json.contains(t.name), "safetensors: tensor name \"", t.name,
                       "\" is reserved or repeated");
    t.begin = offset;
    t.end = offset + t.numel() * dtype_size(t.dtype);
    offset = t.end;
    json[t.name] = {{"dtype", dtype_tag(t.dtype)}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  std::string text = json.dump();
  text.append((8 - (text.size() % 8)) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace zerotrain::checkpoint
