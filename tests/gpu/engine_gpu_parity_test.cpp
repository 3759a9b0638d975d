// The engine on a GPU at world size 1 (the nccl backend): ZeRO stages 0-3, fp32 and bf16,
// accumulation 1 and 2 train the parity model to the losses and parameters of the same run
// on the CPU, within the bounds device_runs.h explains. Skipped where the machine shows no GPU
// (gpu_required.h).
#include <gtest/gtest.h>

#include "tests/gpu/device_runs.h"

namespace {

using namespace zerotrain::test;
using namespace zerotrain::test::gpu;

class EngineGpuParity : public GpuTest<::testing::TestWithParam<RunSpec>> {};

TEST_P(EngineGpuParity, SameLossesAndParametersAsOnTheCpu) {
  const RunSpec spec = GetParam();
  const DeviceRun want = train_on(kCpu, spec);
  const DeviceRun got = train_on(kCuda, spec);
  expect_close_runs(got, want, tolerance_for(spec.dtype));
}

std::vector<RunSpec> cases() {
  std::vector<RunSpec> out;
  for (int stage : {0, 1, 2, 3}) {
    for (const char* dtype : {"fp32", "bf16"}) {
      for (int gas : {1, 2}) out.push_back({.stage = stage, .accumulation = gas, .dtype = dtype});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, EngineGpuParity, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name_of(info.param); });

}  // namespace
