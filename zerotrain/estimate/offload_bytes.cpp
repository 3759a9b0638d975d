#include "zerotrain/estimate/offload_bytes.h"

#include <algorithm>

#include "zerotrain/io/io_engine.h"

namespace zerotrain::estimate {
namespace {

constexpr int64_t kFp32 = 4;
constexpr int64_t kStatesPerSubGroup = 3;   // master, exp_avg, exp_avg_sq

}  // namespace

int64_t sub_group_numel(int64_t sub_group_size, int64_t largest_shard_numel) {
  return std::max<int64_t>(1, std::min(sub_group_size, std::max<int64_t>(largest_shard_numel, 1)));
}

int64_t nvme_buffer_sets(const NvmeBuffering& b) {
  const int64_t needed = 1 + (b.pipeline_read ? 1 : 0) + (b.pipeline_write ? 1 : 0);
  return std::max(needed, b.buffer_count / kStatesPerSubGroup);
}

int64_t nvme_optimizer_buffer_bytes(const NvmeBuffering& buffering, int64_t sub_group_numel) {
  return nvme_buffer_sets(buffering) * kStatesPerSubGroup * io::align_up(sub_group_numel * kFp32);
}

int64_t nvme_optimizer_disk_bytes(int64_t shard_numel, int64_t sub_group_numel) {
  const int64_t slots = std::max<int64_t>(1, (shard_numel + sub_group_numel - 1) / sub_group_numel);
  return kStatesPerSubGroup * slots * io::align_up(sub_group_numel * kFp32);
}

int64_t nvme_param_disk_bytes(const partition::GroupLayout& layout, int64_t element_bytes) {
  int64_t total = 0;
  for (const auto& bucket : layout.buckets()) total += io::align_up(std::max<int64_t>(bucket.chunk.numel, 1) * element_bytes);
  return total;
}

}  // namespace zerotrain::estimate
