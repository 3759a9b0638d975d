// Writing one safetensors file whole or not at all (file_io.h's AtomicFile), with each
// tensor's checksum in its header, and checking beforehand that the disk has room for it.
// No LibTorch: tensors are (dtype, shape, bytes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/checkpoint/safetensors.h"

namespace zerotrain::checkpoint {

struct TensorSource {
  // Copies bytes [offset, offset + nbytes) of the tensor into dst: for bytes that are not in
  // memory (optimizer states offloaded to a disk), read a piece at a time as they are written.
  using Read = std::function<void(int64_t offset, int64_t nbytes, void* dst)>;

  std::string key;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;   // shape's numel elements, contiguous; or null, and read is set
  Read read;
  bool is_read() const { return data == nullptr && static_cast<bool>(read); }
  int64_t nbytes() const {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    return numel * dtype_size(dtype);
  }
};

// The source's bytes in order, as (pointer, bytes) pieces: its data at once, or read through
// one buffer of at most kReadPieceBytes.
constexpr int64_t kReadPieceBytes = 8 << 20;
void for_each_piece(const TensorSource& source, const std::function<void(const void*, int64_t)>& f);

struct WrittenFile {
  int64_t bytes = 0;
  uint64_t checksum = 0;          // of the whole file
  uint64_t header_checksum = 0;   // of its first 8 + N bytes
};

// Per-tensor checksums in the header's __metadata__: none, computed now, or a placeholder
// of the same width now and the values later (fill_tensor_checksums), so that the file's
// size is known before its data is read (an asynchronous save sizes the file, checks the
// room, and leaves the reading to its background writer).
enum class TensorChecksums { kNone, kNow, kLater };

// The header a file of `tensors` gets (tensors reordered widest dtype first). With kNow or
// kNone, `tensors`' data must be readable now; with kLater, by fill_tensor_checksums.
struct PreparedFile {
  std::string header;
  std::vector<TensorSource> tensors;   // in data order
  std::map<std::string, std::string> metadata;
  bool checksums_pending = false;
  int64_t bytes() const;
};
PreparedFile prepare_safetensors(std::vector<TensorSource> tensors, std::map<std::string, std::string> metadata,
                                 TensorChecksums checksums);
// The checksums a kLater file left out, into its header (whose size does not change).
void fill_tensor_checksums(PreparedFile& file);

// Writes `file` (its checksums filled in) to `path` atomically. IoError on failure; nothing
// is left at `path` then.
WrittenFile write_safetensors(const std::filesystem::path& path, const PreparedFile& file);

// Throws IoError when `bytes` more cannot be written into `dir`: less free space on its file
// system, or a file-size limit (ulimit -f) below `largest_file`. Says how much is missing;
// `what` names what is being written ("the checkpoint", "the consolidated model"), and
// `untouched` what the failure leaves as it was ("" for nothing).
// A byte count for people: "812 B", "1.5 GiB" (powers of 1024).
std::string format_bytes(int64_t bytes);

struct RoomFor {
  std::string_view what = "the checkpoint";
  std::string_view untouched = "the previous checkpoint is untouched";
};
void check_room(const std::filesystem::path& dir, int64_t bytes, int64_t largest_file, const RoomFor& room = {});

}  // namespace zerotrain::checkpoint
