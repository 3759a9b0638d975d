// Consolidating a checkpoint tag into safetensors files any framework loads
// (`zerotrain zero-to-fp32`, DeepSpeed's zero_to_fp32.py; docs/checkpoints-tools.md): each
// trained parameter whole, assembled from its fp32 master fragments on every rank, in fp32,
// bf16 or fp16; frozen parameters in the same dtype; module buffers as saved.
//
// It streams: one parameter at a time is read (pread, never mmap) into one buffer the size
// of the largest tensor, converted through a small scratch buffer when the output dtype
// differs, and written; so memory is the largest tensor plus a few MiB whatever the model's
// size. Every fragment's checksum is checked as it is read. The files are Hugging Face's
// layout, written by sharded_writer.h: each whole or not at all, a sharded output's index
// last. No LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/checkpoint/safetensors.h"
#include "zerotrain/checkpoint/sharded_writer.h"

namespace zerotrain::checkpoint {

inline constexpr std::string_view kConsolidatedName = kModelFileName;
inline constexpr std::string_view kConsolidatedIndexName = "model.safetensors.index.json";

struct ConsolidateOptions {
  Dtype dtype = Dtype::kF32;   // trained and frozen floating parameters: kF32, kBF16 or kF16
  // A shard holds tensors up to this many bytes (huggingface_hub's split: a tensor larger
  // than this gets a shard of its own). One shard is `model.safetensors`; more are
  // `model-00001-of-0000N.safetensors` with `model.safetensors.index.json`.
  int64_t max_shard_bytes = kDefaultMaxShardBytes;
};

// One tensor of the output, planned from the manifest alone.
struct PlannedTensor {
  enum class Kind { kParam, kFrozen, kBuffer };
  Kind kind = Kind::kParam;
  size_t record = 0;             // index into the manifest's params, frozen or buffers
  std::string name;              // the output name: the parameter's or buffer's name
  std::vector<int64_t> shape;
  Dtype saved = Dtype::kF32;     // as stored in the checkpoint
  Dtype dtype = Dtype::kF32;     // as written
  int64_t numel() const;
  int64_t nbytes() const { return numel() * dtype_size(dtype); }
  int64_t saved_nbytes() const { return numel() * dtype_size(saved); }
};

struct ConsolidationPlan {
  std::vector<PlannedTensor> tensors;   // parameters, frozen parameters, buffers: manifest order
  ShardPlan output;                     // the files, from `tensors` in the same order
  int64_t buffer_bytes = 0;             // the largest tensor as read: the one buffer's size
};

// What the output will be. CheckpointError naming `manifest_file` when two tensors would
// share a name or a saved dtype is unknown; UsageError for an output dtype that is not
// F32, BF16 or F16, or a shard size below 1 byte.
ConsolidationPlan plan_consolidation(const Manifest& manifest, const ConsolidateOptions& options,
                                     std::string_view manifest_file);

// For readers that assemble tensors in memory (the Python zero_to_fp32): every fragment the
// plan needs is in its rank file as the manifest says (CheckpointError otherwise), and one
// planned tensor whole into `buffer` (t.saved_nbytes() bytes) in its saved dtype, each piece's
// checksum checked as it is read.
void check_plan_pieces(CheckpointReader& reader, const ConsolidationPlan& plan);
void read_planned_tensor(CheckpointReader& reader, const PlannedTensor& t, char* buffer);

struct ConsolidatedOutput {
  ConsolidationPlan plan;
  std::vector<std::filesystem::path> files;   // written, in order; the index last when sharded
  int64_t bytes_written = 0;                  // every file, headers included
  std::vector<std::filesystem::path> removed; // what an earlier consolidation left here, removed
};

// Writes the consolidation of `reader`'s tag into `out_dir` (created). Before writing,
// every fragment is looked up in its rank file's header (size and dtype as the manifest
// says) and the disk is checked for room, so a damaged or incomplete tag fails with nothing
// written; a tensor that fails to read later takes the files written so far with it. An
// existing index is removed first when the output is sharded, so an index never names a mix
// of old and new shards; files of an earlier consolidation that this one does not write
// (model.safetensors, model-*-of-*.safetensors, the index) are removed at the end.
// CheckpointError for a damaged checkpoint, IoError for the output.
ConsolidatedOutput consolidate(CheckpointReader& reader, const std::filesystem::path& out_dir,
                               const ConsolidateOptions& options = {});

}  // namespace zerotrain::checkpoint
