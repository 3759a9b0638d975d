// A DeepSpeed checkpoint (its save_checkpoint's tag directory: ZeRO stages 0-3, any data-
// parallel world size, fp32, bf16 or fp16) converted into zerotrain's format, which then loads
// at any world size and stage: the fp32 master weights and Adam's states of every parameter,
// as the fragments each DeepSpeed rank held, the buffers, the step counters, the schedule's
// iteration and the fp16 loss scaler. The tensors stream from DeepSpeed's files into ours a
// piece at a time; DeepSpeed need not be installed. No LibTorch tensors (LibTorch's zip
// reader only).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "zerotrain/checkpoint/manifest.h"

namespace zerotrain::checkpoint {

struct DeepSpeedImportOptions {
  std::string tag;                               // the DeepSpeed tag; empty: the one its `latest` names
  std::function<void(const std::string&)> note;  // lines for the user (what was read, what was left out)
};

struct DeepSpeedImportResult {
  std::filesystem::path tag_dir;  // OUT/<tag>
  Manifest manifest;
  int64_t bytes_written = 0;
};

// Reads DS_DIR (a save_checkpoint folder, or a tag folder inside one) and writes OUT/<tag>/
// and OUT/latest. CheckpointError naming the file and the field for anything it cannot
// convert (model or pipeline parallelism, mixture of experts, an optimizer other than
// Adam/AdamW, a tag missing); nothing is left in OUT then, and an existing OUT/<tag> is
// never replaced.
DeepSpeedImportResult import_deepspeed(const std::filesystem::path& ds_dir, const std::filesystem::path& out_dir,
                                       const DeepSpeedImportOptions& options);

}  // namespace zerotrain::checkpoint
