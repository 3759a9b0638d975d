// A model written as Hugging Face's safetensors layout, one tensor at a time: one
// `model.safetensors`, or shards `model-00001-of-0000N.safetensors` with
// `model.safetensors.index.json` past a shard size (huggingface_hub's split). Used by
// `zerotrain zero-to-fp32` (consolidate.h) and the engine's save_16bit_model.
//
// Two steps: plan_shards() places every tensor from its (name, dtype, shape) alone, so every
// header, and the room the files need, is known before any data exists; a ShardedWriter then
// takes each tensor's bytes in the plan's order (in pieces if the caller likes), so the
// caller holds no more than the tensor it is writing. Every file is written whole or not at
// all (AtomicFile), the index last. No LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/checkpoint/safetensors.h"
#include "zerotrain/checkpoint/writer.h"

namespace zerotrain::checkpoint {

class AtomicFile;

inline constexpr std::string_view kModelFileName = "model.safetensors";
// DeepSpeed's zero_to_fp32.py and save_16bit_model default, as huggingface_hub counts it.
inline constexpr int64_t kDefaultMaxShardBytes = 5'000'000'000;

struct OutputTensor {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  int64_t numel() const;
  int64_t nbytes() const { return numel() * dtype_size(dtype); }
};

struct OutputShard {
  std::string file;              // a plain name in the output directory
  std::vector<size_t> tensors;   // into ShardPlan::tensors, in data order
  int64_t tensor_bytes = 0;
  std::string header;            // the file's first bytes: length and JSON, offsets assigned
  int64_t file_bytes() const { return static_cast<int64_t>(header.size()) + tensor_bytes; }
};

struct ShardPlan {
  std::string file_name;              // the one file's name; shard names and the index derive from it
  std::vector<OutputTensor> tensors;  // as given
  std::vector<OutputShard> shards;
  std::string index;                  // the index's text; empty with one shard
  int64_t total_tensor_bytes = 0;     // the index's "total_size"

  bool sharded() const { return shards.size() > 1; }
  std::string index_name() const { return file_name + ".index.json"; }
  // Every tensor, in the order a ShardedWriter takes their bytes.
  std::vector<size_t> write_order() const;
  int64_t total_file_bytes() const;     // every file, the index included
  int64_t largest_file_bytes() const;
};

// Places `tensors` into files of at most `max_shard_bytes` of tensor data, in order: a shard
// fills until the next tensor would tip it over, and a tensor larger than the limit gets a
// shard of its own (huggingface_hub's split_torch_state_dict_into_shards). Within a file the
// widest dtypes come first, so every tensor is aligned to its element size. One shard is
// `file_name`; more are `<stem>-00001-of-0000N.safetensors` (stem: `file_name` without
// ".safetensors") and `<file_name>.index.json`. Every file's header carries `metadata`.
// UsageError for a shard size below 1 byte, a `file_name` that is not a plain name ending in
// ".safetensors", or a tensor name that is empty, "__metadata__" or given twice.
ShardPlan plan_shards(std::vector<OutputTensor> tensors, int64_t max_shard_bytes,
                      std::string_view file_name = kModelFileName,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Whether `name` is a file a plan for `file_name` writes, whatever its shard count (or its
// temporary name while being written): what an earlier save into the same directory left.
bool is_output_file(std::string_view name, std::string_view file_name);

struct ShardedOutput {
  std::vector<std::filesystem::path> files;     // written, in order; the index last when sharded
  int64_t bytes_written = 0;                    // every file, headers included
  std::vector<std::filesystem::path> removed;   // what an earlier save left here, removed
};

// Writes a plan's files into `dir`. The constructor creates `dir`, checks the disk has room
// for every file (check_room, with `room` in the message), removes an earlier index (so an
// index never names a mix of old and new shards) and opens the first shard: IoError, with
// nothing written, when any of that fails. Then write() takes the tensors' bytes in
// write_order(), each tensor's in one piece or several; a shard is committed as soon as its
// last byte is in. finish() writes the index and removes the files of an earlier save that
// this one did not write. A writer destroyed before finish() (an error while writing, on
// this rank or another) removes its temporary file and the shards it had committed.
class ShardedWriter {
 public:
  ShardedWriter(std::filesystem::path dir, ShardPlan plan, const RoomFor& room);
  ~ShardedWriter();
  ShardedWriter(const ShardedWriter&) = delete;
  ShardedWriter& operator=(const ShardedWriter&) = delete;

  const ShardPlan& plan() const { return plan_; }
  // The tensor the next bytes belong to (into plan().tensors), or nullopt when all are in.
  // A tensor of no bytes is never next: it needs none.
  std::optional<size_t> next_tensor() const;
  // The next `nbytes` of the tensors, in write_order(). A piece may not run past the end of
  // the tensor it starts in (InternalError): a caller writes one tensor at a time.
  void write(const void* data, int64_t nbytes);
  // Every byte must be in (InternalError otherwise).
  ShardedOutput finish();

 private:
  void advance();   // past finished tensors, committing finished shards

  std::filesystem::path dir_;
  ShardPlan plan_;
  ShardedOutput out_;
  size_t shard_ = 0;    // the open shard
  size_t slot_ = 0;     // the next tensor within it
  int64_t left_ = 0;    // bytes still due for that tensor
  std::unique_ptr<AtomicFile> file_;
  bool finished_ = false;
};

}  // namespace zerotrain::checkpoint
