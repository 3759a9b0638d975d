// LibTorch's CPU tensors above 32 MiB (glibc's largest mmap threshold), kept mapped from one
// step to the next (large_block_cache.cpp has the why and the rule that bounds it). No LibTorch here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zerotrain::cpu {

struct LargeBlockCacheStats {
  std::size_t live_bytes = 0;     // blocks the cache has handed out and not had back
  std::size_t cached_bytes = 0;   // blocks it holds for reuse
  std::size_t peak_bytes = 0;     // the most live_bytes has been: live + cached stays within 1/8 above it
  int64_t hits = 0;               // allocations served from a held block
  int64_t misses = 0;             // allocations that mapped a new block
};

// The smallest tensor the cache handles; smaller ones stay with LibTorch's allocator (malloc,
// whose heap keeps them between steps under ZEROTRAIN_MALLOC=heap: malloc_policy.h).
inline constexpr std::size_t kLargeBlockMinBytes = (std::size_t{32} << 20) + 1;

// Makes the cache LibTorch's CPU allocator for tensors from now on (the ones that exist keep
// their own deleters). Once per process; later calls do nothing. Not thread-safe against
// itself: the engine calls it from initialize().
void install_large_block_cache();
bool large_block_cache_installed();

LargeBlockCacheStats large_block_cache_stats();

// Gives every held block back to the kernel (the live ones stay).
void release_large_block_cache();

}  // namespace zerotrain::cpu
