// The large-block cache (zerotrain/cpu/large_block_cache.h) as LibTorch's CPU allocator: a
// tensor of a size seen before reuses its block without page faults, small tensors are left
// to LibTorch's allocator, the cache's footprint stays within an eighth above the most that
// was live at once, raw allocations and many threads at once work, and release gives the blocks back.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <thread>
#include <vector>

#include "zerotrain/cpu/large_block_cache.h"

namespace {

using zerotrain::cpu::install_large_block_cache;
using zerotrain::cpu::large_block_cache_stats;
using zerotrain::cpu::LargeBlockCacheStats;
using zerotrain::cpu::release_large_block_cache;

constexpr int64_t kMiB = int64_t{1} << 20;

class LargeBlockCache : public ::testing::Test {
 protected:
  void SetUp() override {
    install_large_block_cache();
    release_large_block_cache();
  }
  void TearDown() override { release_large_block_cache(); }
};

at::Tensor floats_of(int64_t bytes) { return at::empty({bytes / 4}, at::kFloat); }

long minor_faults() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The cache's bound: its blocks, live and held, within an eighth above the live peak.
void expect_within_peak(const LargeBlockCacheStats& s, const char* when) {
  EXPECT_LE(s.live_bytes + s.cached_bytes, s.peak_bytes + s.peak_bytes / 8) << when;
}

TEST_F(LargeBlockCache, ATensorOfASizeSeenBeforeReusesItsBlockWithoutPageFaults) {
  const auto before = large_block_cache_stats();
  void* first = nullptr;
  {
    auto t = floats_of(48 * kMiB);
    t.fill_(1.0f);
    first = t.data_ptr();
  }
  const long faults_before = minor_faults();
  auto again = floats_of(48 * kMiB);
  again.fill_(2.0f);
  const long faults = minor_faults() - faults_before;
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_LT(faults, 48 * kMiB / 4096 / 100) << "the reused block faulted in again";
  EXPECT_DOUBLE_EQ(again.sum().item<double>(), 2.0 * 12 * kMiB);
  const auto after = large_block_cache_stats();
  EXPECT_EQ(after.hits - before.hits, 1);
  EXPECT_EQ(after.misses - before.misses, 1);
}

TEST_F(LargeBlockCache, SmallTensorsAreLeftToLibTorchsAllocator) {
  const auto before = large_block_cache_stats();
  auto small = floats_of(32 * kMiB);   // 32 MiB exactly, one byte under the cache's threshold
  small.zero_();
  const auto after = large_block_cache_stats();
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.hits, before.hits);
}

TEST_F(LargeBlockCache, TheFootprintStaysWithinAnEighthAboveTheMostThatWasLiveAtOnce) {
  // Sizes that do not repeat in order, as a step with an evaluation in between might ask.
  const std::vector<int64_t> sizes_mib = {40, 60, 40, 100, 34, 34, 60, 200, 40};
  for (int round = 0; round < 3; ++round) {
    std::vector<at::Tensor> alive;
    for (size_t i = 0; i < sizes_mib.size(); ++i) {
      alive.push_back(floats_of(sizes_mib[i] * kMiB));
      expect_within_peak(large_block_cache_stats(), "after an allocation");
      if (i % 3 == 2) alive.clear();   // free a few at a time
      expect_within_peak(large_block_cache_stats(), "after frees");
    }
  }
  const auto s = large_block_cache_stats();
  EXPECT_EQ(s.live_bytes, 0u);
  EXPECT_LE(s.cached_bytes, s.peak_bytes + s.peak_bytes / 8);
}

TEST_F(LargeBlockCache, ReleaseGivesEveryHeldBlockBack) {
  { auto t = floats_of(64 * kMiB); }
  EXPECT_GE(large_block_cache_stats().cached_bytes, static_cast<size_t>(64 * kMiB));
  release_large_block_cache();
  EXPECT_EQ(large_block_cache_stats().cached_bytes, 0u);
}

TEST_F(LargeBlockCache, RawAllocationsOfAnySizeGoBackWhereTheyCameFrom) {
  c10::Allocator* allocator = c10::GetCPUAllocator();
  for (size_t bytes : {size_t{4096}, size_t{40} << 20, size_t{1} << 20, size_t{80} << 20}) {
    void* p = allocator->raw_allocate(bytes);
    ASSERT_NE(p, nullptr);
    static_cast<char*>(p)[bytes - 1] = 1;
    allocator->raw_deallocate(p);
  }
  EXPECT_EQ(large_block_cache_stats().live_bytes, 0u);
}

TEST_F(LargeBlockCache, ManyThreadsAtOnce) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 30; ++i) {
        auto x = floats_of((34 + 2 * ((t + i) % 4)) * kMiB);
        x.fill_(static_cast<float>(t));
        EXPECT_EQ(x[x.numel() - 1].item<float>(), static_cast<float>(t));
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto s = large_block_cache_stats();
  EXPECT_EQ(s.live_bytes, 0u);
  expect_within_peak(s, "after the threads");
}

}  // namespace
