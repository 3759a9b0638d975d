// glibc's malloc thresholds fixed for training.
//
// Why: glibc serves a block above its mmap threshold with a fresh mapping and unmaps it on
// free; the threshold adapts (it rises to the size of a mapped block when that is freed,
// up to 32 MiB) and the heap gives back whatever is free at its top beyond a trim threshold
// that follows it. A training step frees and reallocates the same activation and gradient
// sizes every step, so whether they were reused or mapped, faulted in and zeroed by the
// kernel again depended on the order of the first frees: two ranks of one job measured 74
// thousand and 667 thousand page faults in an epoch of a small ConvNet, the second spending
// 1.8 s of its 6.6 s in the kernel, and the slower rank set the pace of both. With the
// thresholds fixed, every rank measured 68-72 thousand faults and 0.25 s in the kernel, and
// the epoch took 4.1-4.5 s instead of 5.9-6.5 (docs/benchmarks.md, "Memory reuse between
// steps").
//
// Blocks above 32 MiB (a large model's logits, its embedding gradient): glibc refuses a
// larger threshold, so LibTorch's tensors of that size go through the large-block cache
// (large_block_cache.cpp) instead.
//
// A user's own glibc.malloc tunables (GLIBC_TUNABLES) stand: the policy then leaves memory
// as it is.
#include "zerotrain/cpu/malloc_policy.h"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/cpu/large_block_cache.h"

namespace zerotrain::cpu {
namespace {

bool user_tuned_malloc() {
  const auto tunables = env::get("GLIBC_TUNABLES");
  return tunables && (tunables->find("glibc.malloc.mmap_threshold") != std::string::npos ||
                      tunables->find("glibc.malloc.trim_threshold") != std::string::npos);
}

}  // namespace

MallocPolicy plan_malloc_policy() {
  MallocPolicy p;
  p.setting = env::get(kMallocEnv).value_or("auto");
  if (p.setting.empty()) p.setting = "auto";
  ZT_CHECK(p.setting == "auto" || p.setting == "default", UsageError, kMallocEnv, "=", p.setting,
           ": expected auto (a step's memory reused by the next) or default (glibc's adaptive thresholds "
           "and LibTorch's allocator as they are)");
  if (p.setting == "default") {
    p.reason = "glibc's adaptive thresholds, LibTorch's allocator (ZEROTRAIN_MALLOC=default)";
    return p;
  }
  if (user_tuned_malloc()) {
    p.reason = "glibc's thresholds as GLIBC_TUNABLES sets them, LibTorch's allocator";
    return p;
  }
  p.large_block_cache = true;
#if defined(__GLIBC__)
  p.training_thresholds = true;
  p.reason = "a step's memory reused by the next: malloc keeps blocks up to 32 MiB (mmap threshold 32 MiB, trim "
             "threshold 1 GiB), larger tensors stay mapped; ZEROTRAIN_MALLOC=default turns this off";
#else
  p.reason = "tensors above 32 MiB stay mapped between steps (not glibc: its thresholds are its own)";
#endif
  return p;
}

MallocPolicy apply_malloc_policy() {
  static std::once_flag once;
  static MallocPolicy applied;
  std::call_once(once, [] {
    MallocPolicy p = plan_malloc_policy();
#if defined(__GLIBC__)
    if (p.training_thresholds) {
      const bool set = ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kTrainingMmapThresholdBytes)) == 1 &&
                       ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTrainingTrimThresholdBytes)) == 1;
      if (!set) {
        p.training_thresholds = false;
        p.reason = "glibc's adaptive thresholds (mallopt refused the training ones); larger tensors stay mapped";
      }
    }
#endif
    if (p.large_block_cache) install_large_block_cache();
    applied = std::move(p);
  });
  return applied;
}

}  // namespace zerotrain::cpu
