// The one skip decision of every GPU test. Where LibTorch sees no CUDA device:
//   - the machine shows no NVIDIA GPU (no /dev/nvidia[0-9]*, nvidia-smi lists none): skip, as
//     on CI, which has none;
//   - the machine shows one: FAIL, naming why LibTorch cannot use it (its CUDA half failed to
//     load, with dlopen's error; was not attempted, and why; or the CUDA runtime's error) and
//     the fix. Skipping there would report a broken GPU setup as a pass.
// zerotrain/cuda/availability.h has the evidence and the words; `zerotrain report` says the same.
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>

#include "zerotrain/cuda/availability.h"

namespace zerotrain::test::gpu {

struct GpuVerdict {
  bool usable = false;   // LibTorch sees a CUDA device
  bool fail = false;     // it does not, but the machine shows an NVIDIA GPU
  std::string why;       // the skip reason or the failure message
};

// Decided once per process (nvidia-smi may be asked).
inline const GpuVerdict& gpu_verdict() {
  static const GpuVerdict verdict = [] {
    if (torch::cuda::is_available()) return GpuVerdict{true, false, ""};
    const cuda::GpuSighting seen = cuda::sight_nvidia_gpu();
    if (!seen.shown) {
      return GpuVerdict{false, false,
                        "no CUDA device visible, and this machine shows no NVIDIA GPU (no /dev/nvidia[0-9]*, "
                        "nvidia-smi -L lists none)"};
    }
    return GpuVerdict{false, true, cuda::unusable_gpu_message(seen, cuda::cuda_load(), cuda::cuda_runtime_reason())};
  }();
  return verdict;
}

}  // namespace zerotrain::test::gpu

// In a fixture's SetUp (or a test body): returns from it with a skip or a fatal failure unless
// LibTorch sees a CUDA device. A fatal failure in SetUp keeps the test body from running.
#define ZT_REQUIRE_GPU()                                                \
  do {                                                                  \
    const auto& zt_verdict = ::zerotrain::test::gpu::gpu_verdict();     \
    if (zt_verdict.fail) GTEST_FAIL() << zt_verdict.why;                \
    if (!zt_verdict.usable) GTEST_SKIP() << zt_verdict.why;             \
  } while (0)
