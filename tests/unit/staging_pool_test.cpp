// The stage-2/3 bucket buffers kept across steps (stages/staging_pool.h): reused when they
// fit, counted by the meter while the pool holds them, never more than `kept` at once; and
// the estimator's simulation of the same policy (stages/plan.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "zerotrain/stages/plan.h"
#include "zerotrain/stages/staging_pool.h"

namespace {

using zerotrain::stages::simulate_staging_peak;
using zerotrain::stages::StagingMeter;
using zerotrain::stages::StagingPool;

const auto kFloat = torch::TensorOptions().dtype(torch::kFloat);

TEST(StagingPool, AGivenBackBufferIsLentAgain) {
  StagingMeter meter;
  StagingPool pool(1, &meter);
  StagingPool::Loan first = pool.take(100, kFloat);
  EXPECT_EQ(first.buffer.numel(), 100);
  const void* memory = first.lent.data_ptr();
  pool.give_back(std::move(first.lent));
  StagingPool::Loan again = pool.take(80, kFloat);
  EXPECT_EQ(again.lent.data_ptr(), memory);
  EXPECT_EQ(again.buffer.numel(), 80);
  EXPECT_EQ(again.buffer.data_ptr(), memory);
  EXPECT_EQ(meter.peak_nbytes(), 400);   // one buffer all along
}

TEST(StagingPool, ASpareTooSmallGoesBeforeALargerOneIsMade) {
  StagingMeter meter;
  StagingPool pool(1, &meter);
  StagingPool::Loan small = pool.take(10, kFloat);
  pool.give_back(std::move(small.lent));
  StagingPool::Loan large = pool.take(50, kFloat);
  EXPECT_EQ(large.lent.numel(), 50);
  EXPECT_EQ(meter.peak_nbytes(), 200);   // never both
}

TEST(StagingPool, NeverMoreThanKeptBuffersAndTheSmallestFitServes) {
  StagingMeter meter;
  StagingPool pool(2, &meter);
  StagingPool::Loan a = pool.take(10, kFloat), b = pool.take(50, kFloat);
  EXPECT_EQ(meter.peak_nbytes(), 240);
  pool.give_back(std::move(a.lent));
  pool.give_back(std::move(b.lent));
  StagingPool::Loan c = pool.take(8, kFloat);
  EXPECT_EQ(c.lent.numel(), 10);   // the smallest that fits
  StagingPool::Loan d = pool.take(40, kFloat);
  EXPECT_EQ(d.lent.numel(), 50);
  pool.give_back(std::move(c.lent));
  StagingPool::Loan e = pool.take(60, kFloat);   // the 10 goes first: two buffers at most
  EXPECT_EQ(e.lent.numel(), 60);
  EXPECT_EQ(meter.peak_nbytes(), 200 + 240);
}

TEST(StagingPool, MoreLentThanKeptAreLetGoWhenGivenBack) {
  StagingMeter meter;
  StagingPool pool(1, &meter);
  StagingPool::Loan a = pool.take(10, kFloat), b = pool.take(20, kFloat), c = pool.take(30, kFloat);
  EXPECT_EQ(meter.peak_nbytes(), 240);
  pool.give_back(std::move(a.lent));
  pool.give_back(std::move(c.lent));
  pool.give_back(std::move(b.lent));   // one spare stays: the last one given back
  StagingPool::Loan d = pool.take(15, kFloat);
  EXPECT_EQ(d.lent.numel(), 20);
  StagingPool::Loan e = pool.take(5, kFloat);
  EXPECT_EQ(e.lent.numel(), 5);   // the only one is lent: a new one
}

// What the estimator counts: with one bucket alive at a time the largest bucket; with two in
// flight and one filling, what the pool settles on, which holds three consecutive buckets.
TEST(StagingPeak, FollowsThePolicyOverBackwards) {
  EXPECT_EQ(simulate_staging_peak({107, 561}, false), 561);
  EXPECT_EQ(simulate_staging_peak({5, 7, 9}, true), 21);
  EXPECT_EQ(simulate_staging_peak({100, 100, 100, 100}, true), 300);
  EXPECT_EQ(simulate_staging_peak({}, true), 0);
  // Never less than the largest window of three consecutive buckets.
  const std::vector<int64_t> uneven{10, 10, 10, 100, 10, 10, 10};
  EXPECT_GE(simulate_staging_peak(uneven, true), 120);
  EXPECT_LE(simulate_staging_peak(uneven, true), 300);
}

}  // namespace
