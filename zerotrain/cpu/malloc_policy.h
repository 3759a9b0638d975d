// How a training process reuses the memory of one step in the next: glibc's malloc
// thresholds for blocks up to 32 MiB, the large-block cache (large_block_cache.h) above, and
// the switch for both (malloc_policy.cpp has the why and the measurements). No LibTorch.
#pragma once

#include <cstddef>
#include <string>

namespace zerotrain::cpu {

// ZEROTRAIN_MALLOC: unset or "auto" keeps LibTorch's tensors above 32 MiB mapped between
// steps (large_block_cache.h); "heap" also fixes glibc's thresholds (below), so that blocks
// up to 32 MiB stay in malloc's heap, at a cost in peak RSS; "default" leaves glibc and
// LibTorch's allocator as they are.
inline constexpr const char* kMallocEnv = "ZEROTRAIN_MALLOC";

// Under "heap": blocks up to this size come from malloc's heap, and are reused from one
// step to the next, instead of being mapped afresh (and faulted in, page by page, zeroed by
// the kernel) each time. glibc's own maximum for the setting.
inline constexpr std::size_t kTrainingMmapThresholdBytes = std::size_t{32} << 20;
// Under "heap": freed memory at the top of the heap up to this much stays for the next step
// rather than going back to the kernel: twice the mmap threshold, the ratio glibc keeps.
inline constexpr std::size_t kTrainingTrimThresholdBytes = 2 * kTrainingMmapThresholdBytes;

struct MallocPolicy {
  bool training_thresholds = false;  // the thresholds above are (or will be) set
  bool large_block_cache = false;    // tensors above 32 MiB are (or will be) kept mapped
  std::string setting;               // "auto", "heap" or "default", as read from ZEROTRAIN_MALLOC
  std::string reason;                // one line for logs and `zerotrain report`
};

// What apply_malloc_policy() does in this process under this environment; throws
// UsageError for a ZEROTRAIN_MALLOC it does not know. Changes nothing.
MallocPolicy plan_malloc_policy();

// Sets the thresholds and installs the cache when the plan says so. The engine's initialize()
// calls it; the first call in a process decides, later ones return the first one's plan.
MallocPolicy apply_malloc_policy();

}  // namespace zerotrain::cpu
