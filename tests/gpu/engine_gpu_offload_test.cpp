// ZeRO-Offload from a GPU: with the optimizer's states (and at stage 3 the parameters) in
// pinned host memory, stepped by the CPU Adam, a CUDA run trains the parity model to the
// losses and parameters of the same run without offload, at stages 2 and 3, in fp32 and
// bf16, with accumulation 1 and 2. Not bit for bit as on the CPU (where both sides run the
// same Adam): without offload a GPU steps with ATen's fused CUDA AdamW, so the bounds are
// the cross-device ones (device_runs.h). Skipped where the machine shows no GPU (gpu_required.h).
#include <gtest/gtest.h>

#include "tests/gpu/device_runs.h"

namespace {

using namespace zerotrain::test;
using namespace zerotrain::test::gpu;

class EngineGpuOffload : public GpuTest<::testing::TestWithParam<RunSpec>> {};

TEST_P(EngineGpuOffload, SameLossesAndParametersAsWithoutOffload) {
  const RunSpec offloaded = GetParam();
  RunSpec plain = offloaded;
  plain.offload_optimizer = plain.offload_param = "none";
  const DeviceRun want = train_on(kCuda, plain);
  const DeviceRun got = train_on(kCuda, offloaded);
  expect_close_runs(got, want, tolerance_for(offloaded.dtype));
}

std::vector<RunSpec> cases() {
  std::vector<RunSpec> out;
  for (int stage : {2, 3}) {
    for (const char* dtype : {"fp32", "bf16"}) {
      for (int gas : {1, 2}) {
        out.push_back({.stage = stage, .accumulation = gas, .dtype = dtype, .offload_optimizer = "cpu"});
      }
    }
  }
  // Stage 3 with the parameters offloaded too, and with them alone.
  for (const char* dtype : {"fp32", "bf16"}) {
    out.push_back({.stage = 3, .dtype = dtype, .offload_optimizer = "cpu", .offload_param = "cpu"});
  }
  out.push_back({.stage = 3, .accumulation = 2, .offload_param = "cpu"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, EngineGpuOffload, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name_of(info.param); });

}  // namespace
