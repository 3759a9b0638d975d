#include "zerotrain/checkpoint/reader.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>
#include <tuple>

#include "zerotrain/core/error.h"
#include "zerotrain/core/text_file.h"

namespace zerotrain::checkpoint {
namespace {

// verify_files() reads this much at a time.
constexpr int64_t kVerifyBlockBytes = 4 << 20;

// A tensor the manifest says a rank file holds, and which part of the model it is.
struct ExpectedTensor {
  Dtype dtype;
  std::vector<int64_t> shape;
  bool any_shape = false;   // the generator state: its length is the generator's
  std::string what;         // "parameter \"fc.weight\"", for messages
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Every tensor rank `rank`'s file holds according to `m`, in the manifest's order, by key:
// its fragments of every parameter's fp32 master and optimizer states (1-D fp32), on rank 0
// the buffers and frozen parameters whole, and the generator state where it was saved.
struct ExpectedTensors {
  std::vector<std::pair<std::string, ExpectedTensor>> in_order;
  std::set<std::string, std::less<>> keys;
  void emplace(std::string key, ExpectedTensor t) {
    if (keys.insert(key).second) in_order.emplace_back(std::move(key), std::move(t));
  }
  bool contains(std::string_view key) const { return keys.contains(key); }
};

ExpectedTensors expected_tensors(const Manifest& m, int rank) {
  ExpectedTensors out;
  for (const ParamRecord& p : m.params) {
    for (const Fragment& f : p.fragments) {
      if (f.rank != rank) continue;
      out.emplace(fragment_key("fp32", p.name, f), ExpectedTensor{Dtype::kF32, {f.numel()}, false, "parameter \"" + p.name + "\""});
      for (const std::string& state : m.optimizer_states) {
        out.emplace(fragment_key(state, p.name, f),
                    ExpectedTensor{Dtype::kF32, {f.numel()}, false, state + " of parameter \"" + p.name + "\""});
      }
    }
  }
  if (rank == 0) {
    for (const auto& [prefix, list, what] : {std::tuple{"buffer/", &m.buffers, "buffer"}, std::tuple{"frozen/", &m.frozen, "frozen parameter"}}) {
      for (const WholeTensor& t : *list) {
        // manifest_from_json refused unknown dtype tags.
        out.emplace(prefix + t.name, ExpectedTensor{*dtype_from_tag(t.dtype), t.shape, false, std::string(what) + " \"" + t.name + "\""});
      }
    }
  }
  if (m.rng_saved) out.emplace("rng/cpu", ExpectedTensor{Dtype::kU8, {}, true, "the generator state"});
  for (const RankTensor& t : m.rank_tensors) {
    out.emplace(t.name, ExpectedTensor{*dtype_from_tag(t.dtype), {}, true, "\"" + t.name + "\""});
  }
  return out;
}

}  // namespace

void check_rank_header(const Manifest& m, int rank, const SafetensorsHeader& header, std::string_view file) {
  const auto expected = expected_tensors(m, rank);
  for (const auto& [key, want] : expected.in_order) {
    const TensorEntry* t = header.find(key);
    ZT_CHECK(t != nullptr, CheckpointError, file, ": has no tensor \"", key, "\" of ", want.what,
             " although the manifest names it (damaged, or a file from another save)");
    ZT_CHECK(t->dtype == want.dtype && (want.any_shape ? t->shape.size() == 1 : t->shape == want.shape), CheckpointError,
             file, ": tensor \"", key, "\" is ", dtype_tag(t->dtype), " of shape ", shape_text(t->shape),
             "; the manifest implies ", dtype_tag(want.dtype), " of shape ",
             want.any_shape ? std::string("[n]") : shape_text(want.shape), " (damaged, or a file from another save)");
  }
  for (const TensorEntry& t : header.tensors) {
    ZT_CHECK(expected.contains(t.name), CheckpointError, file, ": holds tensor \"", t.name,
             "\", which the manifest does not name (damaged, or a file from another save)");
    const auto sum = header.metadata.find(std::string(kTensorChecksumPrefix) + t.name);
    uint64_t value = 0;
    ZT_CHECK(sum != header.metadata.end() && from_hex(sum->second, value), CheckpointError, file, ": tensor \"",
             t.name, "\" has no checksum in the header (damaged, or not written by zerotrain)");
  }
}

bool valid_tag(std::string_view tag) {
  if (tag.empty() || tag.size() > 200 || tag.front() == '.') return false;
  for (unsigned char c : tag) {
    if (c == '/' || c == '\\' || !std::isprint(c)) return false;
  }
  return true;
}

std::optional<std::string> read_latest_tag(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kLatestName;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return std::nullopt;
  const files::TextFile f = files::read_text_file(path, {.what = "checkpoint 'latest' file", .max_bytes = 4096});
  ZT_CHECK(f.text.has_value(), CheckpointError, path.string(), ": ", f.problem);
  std::string tag = *f.text;
  while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
  ZT_CHECK(valid_tag(tag), CheckpointError, path.string(), ": does not hold a tag name (got \"",
           tag.substr(0, 80), "\"); write the name of a tag directory into it, or pass the tag explicitly");
  return tag;
}

CheckpointReader::CheckpointReader(std::filesystem::path tag_dir) : dir_(std::move(tag_dir)) {
  std::error_code ec;
  ZT_CHECK(std::filesystem::is_directory(dir_, ec), CheckpointError, dir_.string(),
           ": no such checkpoint directory");
  const std::filesystem::path path = dir_ / kManifestName;
  const files::TextFile f = files::read_text_file(path, {.what = "checkpoint manifest", .max_bytes = kMaxManifestBytes});
  ZT_CHECK(f.text.has_value(), CheckpointError, path.string(), ": ", f.problem,
           " (a tag without a manifest is a save that did not finish; load an earlier tag)");
  manifest_ = manifest_from_json(*f.text, path.string());
}

CheckpointReader::OpenFile& CheckpointReader::open(int rank) {
  ZT_INTERNAL_ASSERT(rank >= 0 && rank < manifest_.world_size, "rank file out of range");
  auto it = files_.find(rank);
  if (it != files_.end()) return *it->second;
  const FileRecord& rec = manifest_.files[static_cast<size_t>(rank)];
  const std::filesystem::path path = dir_ / rec.name;
  std::error_code ec;
  ZT_CHECK(std::filesystem::exists(path, ec), CheckpointError, path.string(), ": missing (the checkpoint was saved by ",
           manifest_.world_size, " ranks and rank ", rank,
           "'s file is not here; with node-local storage, copy every node's tag directory together)");
  ReadOnlyFile file(path);
  const std::string name = path.string();
  ZT_CHECK(file.size() == rec.bytes, CheckpointError, name, ": is ", file.size(), " bytes but the manifest says ",
           rec.bytes, " (truncated or overwritten)");
  unsigned char len[8] = {};
  if (file.size() >= 8) file.read_at(0, len, 8);
  const int64_t n = safetensors_header_length(len, file.size(), name);
  std::string header(8 + n, '\0');
  file.read_at(0, header.data(), static_cast<int64_t>(header.size()));
  ZT_CHECK(checksum_of(header.data(), static_cast<int64_t>(header.size())) == rec.header_checksum, CheckpointError,
           name, ": its header does not match the manifest's checksum (damaged, or a file from another save)");
  SafetensorsHeader parsed = parse_safetensors_header(std::string_view(header).substr(8), file.size(), name);
  check_rank_header(manifest_, rank, parsed, name);
  auto opened = std::make_unique<OpenFile>(OpenFile{std::move(file), std::move(parsed)});
  return *files_.emplace(rank, std::move(opened)).first->second;
}

const SafetensorsHeader& CheckpointReader::header(int rank) { return open(rank).header; }

const TensorEntry& CheckpointReader::checked_entry(OpenFile& f, std::string_view key, Dtype dtype, int64_t nbytes,
                                                   uint64_t& checksum) {
  const std::string name = f.file.path().string();
  const TensorEntry* t = f.header.find(key);
  ZT_CHECK(t != nullptr, CheckpointError, name, ": has no tensor \"", key, "\" although the manifest names it");
  ZT_CHECK(t->dtype == dtype && t->nbytes() == nbytes, CheckpointError, name, ": tensor \"", key, "\" is ",
           dtype_tag(t->dtype), " of ", t->nbytes(), " bytes; expected ", dtype_tag(dtype), " of ", nbytes);
  const auto sum = f.header.metadata.find(std::string(kTensorChecksumPrefix) + std::string(key));
  ZT_CHECK(sum != f.header.metadata.end() && from_hex(sum->second, checksum), CheckpointError, name,
           ": tensor \"", key, "\" has no checksum in the header");
  return *t;
}

void CheckpointReader::read_tensor(int rank, std::string_view key, Dtype dtype, void* out, int64_t nbytes) {
  OpenFile& f = open(rank);
  uint64_t expected = 0;
  const TensorEntry& t = checked_entry(f, key, dtype, nbytes, expected);
  f.file.read_at(f.header.data_offset + t.begin, out, nbytes);
  ZT_CHECK(checksum_of(out, nbytes) == expected, CheckpointError, f.file.path().string(), ": tensor \"", key,
           "\" does not match its checksum (the file is damaged)");
}

void CheckpointReader::read_tensor_in_pieces(int rank, std::string_view key, Dtype dtype, int64_t nbytes,
                                             int64_t piece_bytes, const PieceSink& sink) {
  OpenFile& f = open(rank);
  uint64_t expected = 0;
  const TensorEntry& t = checked_entry(f, key, dtype, nbytes, expected);
  ZT_INTERNAL_ASSERT(piece_bytes > 0 && piece_bytes % dtype_size(dtype) == 0, "pieces of whole elements");
  std::vector<char> piece(static_cast<size_t>(std::min(piece_bytes, std::max<int64_t>(nbytes, 1))));
  Checksum sum;
  for (int64_t offset = 0; offset < nbytes; offset += piece_bytes) {
    const int64_t n = std::min(piece_bytes, nbytes - offset);
    f.file.read_at(f.header.data_offset + t.begin + offset, piece.data(), n);
    sum.update(piece.data(), n);
    sink(offset, piece.data(), n);
  }
  ZT_CHECK(sum.digest() == expected, CheckpointError, f.file.path().string(), ": tensor \"", key,
           "\" does not match its checksum (the file is damaged)");
}

std::vector<std::string> CheckpointReader::verify_files() {
  std::vector<std::string> problems;
  for (const FileRecord& rec : manifest_.files) {
    try {
      verify_file(rec.rank);
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  return problems;
}

void CheckpointReader::verify_file(int rank) {
  // The checks every load runs first (size, header checksum, the header's format, and that it
  // holds what the manifest says), then every byte once: the whole-file checksum and each
  // tensor's own, as read_tensor() checks it when a loader reads the tensor.
  OpenFile& f = open(rank);
  const std::string name = f.file.path().string();
  Checksum whole;
  int64_t largest = 1;
  for (const TensorEntry& t : f.header.tensors) largest = std::max(largest, t.nbytes());
  std::vector<char> buffer(static_cast<size_t>(std::min(kVerifyBlockBytes, largest)));
  std::string head(static_cast<size_t>(f.header.data_offset), '\0');
  f.file.read_at(0, head.data(), f.header.data_offset);
  whole.update(head.data(), f.header.data_offset);
  std::vector<std::pair<const TensorEntry*, uint64_t>> sums;
  sums.reserve(f.header.tensors.size());
  for (const TensorEntry& t : f.header.tensors) {   // in data order, tiling the data section
    Checksum own;
    for (int64_t at = t.begin; at < t.end;) {
      const int64_t n = std::min(static_cast<int64_t>(buffer.size()), t.end - at);
      f.file.read_at(f.header.data_offset + at, buffer.data(), n);
      own.update(buffer.data(), n);
      whole.update(buffer.data(), n);
      at += n;
    }
    sums.emplace_back(&t, own.digest());
  }
  const FileRecord& rec = manifest_.files[static_cast<size_t>(rank)];
  ZT_CHECK(whole.digest() == rec.checksum, CheckpointError, name, ": its checksum does not match the manifest (damaged)");
  for (const auto& [t, sum] : sums) {
    uint64_t expected = 0;
    from_hex(f.header.metadata.at(std::string(kTensorChecksumPrefix) + t->name), expected);   // checked by open()
    ZT_CHECK(sum == expected, CheckpointError, name, ": tensor \"", t->name,
             "\" does not match its checksum (the file is damaged)");
  }
  files_.erase(rank);   // one file open at a time, whatever the world size
}

}  // namespace zerotrain::checkpoint
