// The manifest of a checkpoint tag (docs/checkpoints.md, "Format"): what was trained and how
// (world size, stage, dtypes, optimizer, step counters, schedule and loss-scaler state),
// every trainable parameter with the element ranges each rank's file holds, and every file
// with its size and checksums. Rank 0 writes it last; a tag without one is not a checkpoint.
// No LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/config/json_text.h"

namespace zerotrain::checkpoint {

using config::Json;

inline constexpr std::string_view kFormatName = "zerotrain-checkpoint";
inline constexpr int kFormatVersion = 1;
inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr int64_t kMaxManifestBytes = int64_t{256} << 20;

// Elements [begin, end) of a parameter (flattened, row-major), held in `rank`'s file.
struct Fragment {
  int rank = 0;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t numel() const { return end - begin; }
};

struct ParamRecord {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;    // the model's dtype when saved ("fp32", "bf16", "fp16")
  int group = 0;        // index into Manifest::groups
  std::vector<Fragment> fragments;   // sorted by begin, covering [0, numel) exactly
  int64_t numel() const;
};

// A tensor saved whole in rank 0's file: a module buffer or a frozen parameter.
struct WholeTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;    // safetensors tag ("F32", "BF16", ...)
};

// A tensor every rank's file holds under one name, each rank its own value (a generator's
// state, say): one dimension, any length.
struct RankTensor {
  std::string name;
  std::string dtype;    // safetensors tag
};

struct FileRecord {
  int rank = 0;
  std::string name;     // a plain file name in the tag directory
  int64_t bytes = 0;
  uint64_t checksum = 0;          // XXH3-64 of the whole file
  uint64_t header_checksum = 0;   // XXH3-64 of its first 8 + N bytes (the safetensors header)
};

struct GroupRecord {
  std::string name;
  double lr = 0;
  double weight_decay = 0;
  int64_t optimizer_steps = 0;
};

struct Counters {
  int64_t global_steps = 0;
  int64_t global_samples = 0;
  int64_t skipped_steps = 0;
  int64_t micro_steps = 0;
};

struct Manifest {
  int format_version = kFormatVersion;
  std::string tag;
  std::string zerotrain_version;
  int world_size = 1;
  int zero_stage = 0;
  std::string model_dtype = "fp32";
  Counters counters;
  // Optimizer: {"type": ..., "params": {...}} from the config, null for a client optimizer
  // whose state is not saved. `optimizer_states` names the state tensors saved beside the
  // fp32 master for every fragment ("exp_avg", "exp_avg_sq", ...).
  Json optimizer;
  std::vector<std::string> optimizer_states;
  Json lr_scheduler;   // {"type": ..., "last_batch_iteration": n} or null
  Json loss_scaler;    // fp16: the scaler's state; null otherwise
  bool rng_saved = false;   // every rank's file has its generator state ("rng/cpu")
  std::vector<GroupRecord> groups;
  std::vector<ParamRecord> params;
  std::vector<WholeTensor> buffers;   // in rank 0's file as "buffer/<name>"
  std::vector<WholeTensor> frozen;    // in rank 0's file as "frozen/<name>"
  // Providers' own tensors in every rank's file ("rank_tensors", absent when empty). "rng/cpu"
  // is not among them: rng_saved says it is there.
  std::vector<RankTensor> rank_tensors;
  std::vector<FileRecord> files;      // one per rank, by rank
  Json ds_config;
  Json client_state;

  const ParamRecord* find_param(std::string_view name) const;
};

// The key of a tensor in a rank's file: "<state>/<param>[<begin>:<end>]" for a fragment of
// a parameter's fp32 master ("fp32") or of an optimizer state; "buffer/<name>",
// "frozen/<name>" and "rng/cpu" for the rest.
std::string fragment_key(std::string_view state, std::string_view param, const Fragment& fragment);
std::string rank_file_name(int rank);   // "rank_00003.safetensors"

Json manifest_to_json(const Manifest& manifest);
// Parses and checks a manifest read from `file`: the format and its version, and that every
// number, name and range is consistent (fragments cover each parameter exactly, ranks and
// groups exist, file names stay in the tag directory). Throws CheckpointError naming `file`.
Manifest manifest_from_json(std::string_view text, std::string_view file);

}  // namespace zerotrain::checkpoint
