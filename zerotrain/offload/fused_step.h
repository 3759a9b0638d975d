// DeepSpeedCPUAdam's update of one sub-group as offload runs it: the gradients are read in
// the dtype they were reduced in (fp32, bf16 or fp16) and unscaled on the fly, and the
// updated weights are written straight into the model's 16-bit (or fp32) parameters. No
// fp32 copy of the gradients and no separate copy-back pass exist: both happen a tile at a
// time inside the step, while the tile is in cache. The arithmetic is optim/adam_kernel.h's,
// so offload on and off give the same bits.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>

#include "zerotrain/optim/adam_kernel.h"

namespace zerotrain::offload {

struct FusedStepArrays {
  float* master = nullptr;          // fp32 weights, updated in place
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  const void* grads = nullptr;      // `grad_dtype`
  c10::ScalarType grad_dtype = c10::ScalarType::Float;
  void* weights_out = nullptr;      // `weights_dtype`; may be null (nothing written)
  c10::ScalarType weights_dtype = c10::ScalarType::Float;
  int64_t numel = 0;
};

// One Adam step over `a`. Each gradient is divided by `grad_divisor` (the loss scale times
// the clipping factor, as the engine's unscale divides) before the update; 1 leaves it be.
// Spreads the work over LibTorch's intra-op threads.
void fused_adam_step(const optim::AdamCoefficients& c, const FusedStepArrays& a, float grad_divisor);

}  // namespace zerotrain::offload
