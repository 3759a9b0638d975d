// What offload holds per rank and parameter group, in bytes, as zerotrain/offload sizes it
// (docs/offload.md): the NVMe optimizer store's sub-group buffers and swap files, and stage
// 3's parameter swap file. The engine's offload takes its sub-group size and buffer sets from
// these functions; the file slots it lays out itself, and estimate_engine_test checks those
// against Engine::model_state_bytes() to the byte. No LibTorch.
#pragma once

#include <cstdint>

#include "zerotrain/partition/layout.h"

namespace zerotrain::estimate {

// The sub-group the offloaded step walks: sub_group_size, capped at the largest shard of the
// rank's groups (DeepSpeed's default of 1e9 would size gigabytes of buffers for a small
// model), and at least one element.
int64_t sub_group_numel(int64_t sub_group_size, int64_t largest_shard_numel);

struct NvmeBuffering {
  int64_t buffer_count = 4;      // offload_optimizer.buffer_count: DeepSpeed counts single-tensor buffers
  bool pipeline_read = false;
  bool pipeline_write = false;
};

// Sub-groups in memory at once: one being stepped, one read ahead, one written behind, or
// buffer_count / 3 sets of the three tensors, whichever is more.
int64_t nvme_buffer_sets(const NvmeBuffering& buffering);

// The store's buffers: every set holds a sub-group's master, exp_avg and exp_avg_sq in fp32,
// each padded to the 4096-byte alignment of O_DIRECT.
int64_t nvme_optimizer_buffer_bytes(const NvmeBuffering& buffering, int64_t sub_group_numel);

// A group's three swap files: one aligned slot per sub-group (at least one).
int64_t nvme_optimizer_disk_bytes(int64_t shard_numel, int64_t sub_group_numel);

// Stage 3 with offload_param nvme: a group's parameter file, one aligned slot per bucket (a
// unit) holding this rank's chunk of it in the model dtype.
int64_t nvme_param_disk_bytes(const partition::GroupLayout& layout, int64_t element_bytes);

}  // namespace zerotrain::estimate
