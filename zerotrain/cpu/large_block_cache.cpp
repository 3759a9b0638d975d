// Large CPU tensors kept mapped between steps.
//
// Why: a step allocates the same large tensors every time. At 124M parameters with a 50k
// vocabulary they are the logits and their gradient (51 MB each at 2 x 128 tokens) and the
// embedding's gradient with its tied sum (154 MB each). Above glibc's largest mmap threshold
// (32 MiB) malloc maps each one afresh and unmaps it on free, so every step the kernel
// faulted in and zeroed about 0.8 GB again (docs/benchmarks.md, "Memory reuse between
// steps", has the measurements). The cache keeps a freed block mapped and hands it to the
// next request of the same size.
//
// The rule that bounds it: the bytes it has handed out (live) plus those it holds (cached)
// never exceed the most that were ever live at once (peak) by more than an eighth. A
// request it cannot serve from a held block first unmaps held blocks, oldest first, until
// the new one fits under max(peak + peak / 8, live + new). The eighth is there because a
// step's large blocks are not all live at its busiest moment: at 124M parameters the
// forward's logits (50 MiB blocks) are freed before the backward takes its three 148 MiB
// gradients, and holding both through the step takes 150 MiB (6%) more than the peak. With
// no slack, or a sixteenth, the cache unmapped a block every step and mapped and faulted
// it in again. So the large blocks take at most an eighth more memory than at the
// process's busiest moment so far, and stay mapped between steps.
// release_large_block_cache() gives the held blocks back.
#include "zerotrain/cpu/large_block_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace zerotrain::cpu {
namespace {

// Sizes are rounded up to this, so that requests a few bytes apart share blocks; the pages
// past a request's end are never touched, so they cost address space, not memory.
constexpr std::size_t kGranuleBytes = std::size_t{2} << 20;

// Held blocks may take the large blocks' footprint this fraction (1/8) above their peak.
constexpr std::size_t kSlackDivisor = 8;

std::size_t rounded(std::size_t n) { return (n + kGranuleBytes - 1) / kGranuleBytes * kGranuleBytes; }

class LargeBlockCache final : public c10::Allocator {
 public:
  explicit LargeBlockCache(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(std::size_t n) override {
    if (n < kLargeBlockMinBytes) return fallback_->allocate(n);
    void* block = take(rounded(n));
    return {block, block, &give_back_any, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &give_back_any; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  // A block this cache handed out goes back to it; anything else (raw_allocate of a small
  // size went to the fallback) to the fallback's deleter.
  static void give_back_any(void* block);

  LargeBlockCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!held_.empty()) unmap_oldest_held();
  }

 private:
  struct Held {
    void* block;
    std::size_t bytes;
  };

  void* take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    // The most recently returned block of this size: the likeliest still in the cache's lines.
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
      if (it->bytes != bytes) continue;
      void* block = it->block;
      held_.erase(std::next(it).base());
      stats_.cached_bytes -= bytes;
      lend(block, bytes);
      ++stats_.hits;
      return block;
    }
    const std::size_t limit = std::max(stats_.peak_bytes + stats_.peak_bytes / kSlackDivisor, stats_.live_bytes + bytes);
    while (!held_.empty() && stats_.live_bytes + stats_.cached_bytes + bytes > limit) unmap_oldest_held();
    void* block = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) {
      while (!held_.empty()) unmap_oldest_held();
      block = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (block == MAP_FAILED) {
      C10_THROW_ERROR(OutOfMemoryError, "zerotrain: cannot map " + std::to_string(bytes >> 20) +
                                            " MiB for a CPU tensor (" + std::to_string(stats_.live_bytes >> 20) +
                                            " MiB of large tensors are in use)");
    }
    lend(block, bytes);
    ++stats_.misses;
    return block;
  }

  void lend(void* block, std::size_t bytes) {
    live_.emplace(block, bytes);
    stats_.live_bytes += bytes;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  }

  // Returns whether the block was one of this cache's.
  bool give_back(void* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(block);
    if (it == live_.end()) return false;
    const std::size_t bytes = it->second;
    live_.erase(it);
    stats_.live_bytes -= bytes;
    held_.push_back({block, bytes});
    stats_.cached_bytes += bytes;
    return true;
  }

  void unmap_oldest_held() {
    const Held oldest = held_.front();
    held_.erase(held_.begin());
    stats_.cached_bytes -= oldest.bytes;
    ::munmap(oldest.block, oldest.bytes);
  }

  c10::Allocator* fallback_;
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> live_;
  std::vector<Held> held_;   // in the order they came back: a training step holds a few dozen at most
  LargeBlockCacheStats stats_;
};

// Never destroyed: tensors may be freed during static destruction, after main returns.
LargeBlockCache* g_cache = nullptr;

void LargeBlockCache::give_back_any(void* block) {
  if (block == nullptr) return;
  if (g_cache->give_back(block)) return;
  const c10::DeleterFnPtr fallback_deleter = g_cache->fallback_->raw_deleter();
  TORCH_INTERNAL_ASSERT(fallback_deleter != nullptr, "a raw CPU allocation the cache did not make has no deleter");
  fallback_deleter(block);
}

}  // namespace

void install_large_block_cache() {
  if (g_cache != nullptr) return;
  g_cache = new LargeBlockCache(c10::GetCPUAllocator());
  // Above the default allocator's priority (0), so that a later registration at the default
  // priority does not take its place back.
  c10::SetCPUAllocator(g_cache, /*priority=*/1);
}

bool large_block_cache_installed() { return g_cache != nullptr; }

LargeBlockCacheStats large_block_cache_stats() { return g_cache ? g_cache->stats() : LargeBlockCacheStats{}; }

void release_large_block_cache() {
  if (g_cache) g_cache->release();
}

}  // namespace zerotrain::cpu
