#include "zerotrain/checkpoint/reader.h"

#include <cctype>

#include "zerotrain/core/error.h"
#include "zerotrain/core/text_file.h"

namespace zerotrain::checkpoint {

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
  unsigned char len[8];
  file.read_at(0, len, 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  ZT_CHECK(n <= static_cast<uint64_t>(kMaxHeaderBytes) && static_cast<int64_t>(n) <= file.size() - 8, CheckpointError,
           name, ": its header length (", n, " bytes) does not fit the file");
  std::string header(8 + n, '\0');
  file.read_at(0, header.data(), static_cast<int64_t>(header.size()));
  ZT_CHECK(checksum_of(header.data(), static_cast<int64_t>(header.size())) == rec.header_checksum, CheckpointError,
           name, ": its header does not match the manifest's checksum (damaged, or a file from another save)");
  SafetensorsHeader parsed = parse_safetensors_header(std::string_view(header).substr(8), file.size(), name);
  auto opened = std::make_unique<OpenFile>(OpenFile{std::move(file), std::move(parsed)});
  return *files_.emplace(rank, std::move(opened)).first->second;
}

const SafetensorsHeader& CheckpointReader::header(int rank) { return open(rank).header; }

void CheckpointReader::read_tensor(int rank, std::string_view key, Dtype dtype, void* out, int64_t nbytes) {
  OpenFile& f = open(rank);
  const std::string name = f.file.path().string();
  const TensorEntry* t = f.header.find(key);
  ZT_CHECK(t != nullptr, CheckpointError, name, ": has no tensor \"", key, "\" although the manifest names it");
  ZT_CHECK(t->dtype == dtype && t->nbytes() == nbytes, CheckpointError, name, ": tensor \"", key, "\" is ",
           dtype_tag(t->dtype), " of ", t->nbytes(), " bytes; expected ", dtype_tag(dtype), " of ", nbytes);
  const auto sum = f.header.metadata.find(std::string(kTensorChecksumPrefix) + std::string(key));
  uint64_t expected = 0;
  ZT_CHECK(sum != f.header.metadata.end() && from_hex(sum->second, expected), CheckpointError, name,
           ": tensor \"", key, "\" has no checksum in the header");
  f.file.read_at(f.header.data_offset + t->begin, out, nbytes);
  ZT_CHECK(checksum_of(out, nbytes) == expected, CheckpointError, name, ": tensor \"", key,
           "\" does not match its checksum (the file is damaged)");
}

std::vector<std::string> CheckpointReader::verify_files() {
  std::vector<std::string> problems;
  for (const FileRecord& rec : manifest_.files) {
    const std::filesystem::path path = dir_ / rec.name;
    try {
      ReadOnlyFile file(path);
      if (file.size() != rec.bytes) {
        problems.push_back(path.string() + ": " + std::to_string(file.size()) + " bytes, the manifest says " +
                           std::to_string(rec.bytes));
      } else if (file.checksum() != rec.checksum) {
        problems.push_back(path.string() + ": its checksum does not match the manifest (damaged)");
      }
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  return problems;
}

}  // namespace zerotrain::checkpoint
