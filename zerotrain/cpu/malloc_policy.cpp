// How a training process reuses one step's memory in the next.
//
// The default ("auto"): LibTorch's tensors above 32 MiB come from the large-block cache
// (large_block_cache.cpp has the why: at 124M parameters, 18-28% more samples/s).
//
// "heap" also fixes glibc's thresholds. glibc serves a block above its mmap threshold with a
// fresh mapping and unmaps it on free; the threshold adapts (it rises to the size of a
// mapped block when that is freed, up to 32 MiB) and the heap gives back whatever is free
// at its top beyond a trim threshold that follows it. So whether a step's mid-size blocks
// were reused or mapped, faulted in and zeroed by the kernel again depended on the order of
// the first frees: two ranks of one job measured 74 thousand and 667 thousand page faults
// in an epoch of a small ConvNet, the second spending 1.8 s of its 6.6 s in the kernel, and
// the slower rank set the pace of both. With the thresholds fixed, every rank measured
// 68-72 thousand faults and 0.25 s in the kernel, and the epoch took 4.1-4.5 s instead of
// 5.9-6.5. It is not the default because the heap then holds freed blocks it cannot give
// back (free chunks below its top): peak RSS rose 10-27% over the estimator's prediction at
// stages 1-3 of a 29M model, and 49% in the NVMe offload memory test (docs/benchmarks.md,
// "Memory reuse between steps").
//
// A user's own glibc.malloc tunables (GLIBC_TUNABLES) stand: "heap" then leaves the
// thresholds as they are.
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

#if defined(__GLIBC__)
bool user_tuned_malloc() {
  const auto tunables = env::get("GLIBC_TUNABLES");
  return tunables && (tunables->find("glibc.malloc.mmap_threshold") != std::string::npos ||
                      tunables->find("glibc.malloc.trim_threshold") != std::string::npos);
}
#endif

}  // namespace

MallocPolicy plan_malloc_policy() {
  MallocPolicy p;
  p.setting = env::get(kMallocEnv).value_or("auto");
  if (p.setting.empty()) p.setting = "auto";
  ZT_CHECK(p.setting == "auto" || p.setting == "heap" || p.setting == "default", UsageError, kMallocEnv, "=",
           p.setting,
           ": expected auto (tensors above 32 MiB stay mapped between steps), heap (also malloc's thresholds "
           "fixed, so that smaller blocks stay in its heap) or default (glibc and LibTorch's allocator as they are)");
  if (p.setting == "default") {
    p.reason = "glibc's adaptive thresholds, LibTorch's allocator (ZEROTRAIN_MALLOC=default)";
    return p;
  }
  p.large_block_cache = true;
  const char* big = "tensors above 32 MiB stay mapped between steps";
  if (p.setting == "auto") {
    p.reason = std::string(big) + " (ZEROTRAIN_MALLOC=default turns this off, =heap also fixes malloc's thresholds)";
    return p;
  }
#if defined(__GLIBC__)
  if (user_tuned_malloc()) {
    p.reason = std::string(big) + "; glibc's thresholds as GLIBC_TUNABLES sets them";
  } else {
    p.training_thresholds = true;
    p.reason = std::string(big) + "; malloc keeps blocks up to 32 MiB (mmap threshold 32 MiB, trim threshold 64 MiB)";
  }
#else
  p.reason = std::string(big) + "; not glibc: its thresholds are its own";
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
        p.reason = "tensors above 32 MiB stay mapped between steps; glibc's adaptive thresholds (mallopt refused)";
      }
    }
#endif
    if (p.large_block_cache) install_large_block_cache();
    applied = std::move(p);
  });
  return applied;
}

}  // namespace zerotrain::cpu
