// Reading a checkpoint tag without trusting it: the manifest is checked whole before use
// (manifest.h), each rank file's size and header checksum must match the manifest before
// its header is parsed (safetensors.h), and every tensor read is checked against its own
// checksum. Any mismatch is a CheckpointError naming the file and what is wrong. No LibTorch.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/safetensors.h"

namespace zerotrain::checkpoint {

inline constexpr std::string_view kLatestName = "latest";

// The tag `<dir>/latest` names; nullopt when there is no such file (DeepSpeed then warns and
// loads nothing). CheckpointError when it is not a plain tag name.
std::optional<std::string> read_latest_tag(const std::filesystem::path& dir);
// Whether `tag` can name a directory inside a save directory: no '/', not "." or "..", not
// empty, not starting with '.' (the save's staging directories do), printable.
bool valid_tag(std::string_view tag);

// The checksum of each tensor of a rank file, kept in its header's __metadata__ under the
// tensor's name with this prefix.
inline constexpr std::string_view kTensorChecksumPrefix = "xxh3_64:";

// Checks a rank file's parsed header against the manifest: it holds exactly the tensors the
// manifest says rank `rank` saved (its fragments of every parameter's fp32 master and
// optimizer states, on rank 0 the buffers and frozen parameters, the generator state), each
// with the dtype and shape the manifest implies and a checksum in __metadata__. Throws
// CheckpointError naming `file` and the first tensor that differs. CheckpointReader runs it
// on every rank file it opens, so every loader and `checkpoint inspect` check the same.
void check_rank_header(const Manifest& manifest, int rank, const SafetensorsHeader& header, std::string_view file);

class CheckpointReader {
 public:
  // Reads and checks `<tag_dir>/manifest.json`.
  explicit CheckpointReader(std::filesystem::path tag_dir);

  const Manifest& manifest() const { return manifest_; }
  const std::filesystem::path& dir() const { return dir_; }

  // Rank `rank`'s file header, checked against the manifest on first use.
  const SafetensorsHeader& header(int rank);
  // Tensor `key` of rank `rank`'s file, whole, into `out` (exactly `nbytes`), after checking
  // its dtype and size; its checksum is checked after reading.
  void read_tensor(int rank, std::string_view key, Dtype dtype, void* out, int64_t nbytes);
  // The same tensor `piece_bytes` at a time (a multiple of the element size) through a buffer
  // of that size: `sink(byte offset, bytes, n)` gets each piece in order. The checksum is
  // checked after the last piece, so a damaged tensor has already reached the sink when the
  // CheckpointError comes: the caller's state is then partly overwritten.
  using PieceSink = std::function<void(int64_t offset, const void* data, int64_t nbytes)>;
  void read_tensor_in_pieces(int rank, std::string_view key, Dtype dtype, int64_t nbytes, int64_t piece_bytes,
                             const PieceSink& sink);
  // Every rank file, as a loader checks it and more: present, of its size, its header of the
  // safetensors format and holding exactly the tensors the manifest names with the dtypes and
  // shapes it implies (check_rank_header), and every byte matching the whole-file checksum
  // and each tensor's own. The problems found, one per file (empty when the tag is intact).
  // Reads every byte once. `zerotrain checkpoint inspect` reports this.
  std::vector<std::string> verify_files();

 private:
  struct OpenFile {
    ReadOnlyFile file;
    SafetensorsHeader header;
  };
  OpenFile& open(int rank);
  // Tensor `key` of `f`, checked to be `dtype` of `nbytes` with a checksum (into `checksum`).
  const TensorEntry& checked_entry(OpenFile& f, std::string_view key, Dtype dtype, int64_t nbytes, uint64_t& checksum);
  void verify_file(int rank);

  std::filesystem::path dir_;
  Manifest manifest_;
  std::map<int, std::unique_ptr<OpenFile>> files_;
};

}  // namespace zerotrain::checkpoint
