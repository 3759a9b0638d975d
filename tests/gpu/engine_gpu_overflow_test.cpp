// fp16 with dynamic loss scaling on a GPU: a step that overflows on the CPU overflows on the
// GPU. The scale starts at 2^20, so the first steps overflow by themselves until it comes
// down, grows back after 6 clean steps (and may overflow again), and two steps are made to
// overflow on purpose (an inf loss); the CUDA run must skip the same steps and follow the
// same loss-scale trajectory as the CPU run, exactly, and train to the same losses within
// the fp16 bounds. Skipped where the machine shows no GPU (gpu_required.h).
#include <gtest/gtest.h>

#include "tests/gpu/device_runs.h"

namespace {

using namespace zerotrain::test;
using namespace zerotrain::test::gpu;

class EngineGpuOverflow : public GpuTest<::testing::TestWithParam<RunSpec>> {};

TEST_P(EngineGpuOverflow, SameSkippedStepsAndLossScalesAsOnTheCpu) {
  const RunSpec spec = GetParam();
  const DeviceRun want = train_on(kCpu, spec);
  const DeviceRun got = train_on(kCuda, spec);
  ASSERT_EQ(want.error, "");
  ASSERT_EQ(got.error, "");
  // The test means something only if steps were skipped: at least the two poisoned ones and
  // the first (2^20 overflows fp16 on this model's gradients).
  ASSERT_GE(want.skipped_steps.back(), 3) << "the CPU run skipped too few steps for the test to mean anything";
  EXPECT_EQ(got.skipped_steps, want.skipped_steps);
  EXPECT_EQ(got.loss_scales, want.loss_scales);
  expect_close_runs(got, want, tolerance_for("fp16"));
}

std::vector<RunSpec> cases() {
  std::vector<RunSpec> out;
  for (int stage : {0, 1, 2, 3}) {
    for (int gas : {1, 2}) {
      out.push_back({.stage = stage, .accumulation = gas, .dtype = "fp16", .dynamic_loss_scale = true,
                     .poisoned_steps = {12, 17}});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, EngineGpuOverflow, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name_of(info.param); });

}  // namespace
