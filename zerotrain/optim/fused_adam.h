// Adam/AdamW over flat fp32 tensors (a rank's shard of the master weights), with the
// update of optim/adam_kernel.h spread over LibTorch's intra-op threads.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace zerotrain::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool adamw_mode = true;
  bool bias_correction = true;
};

// One step (`step` counts from 1) on contiguous fp32 tensors of the same numel; throws
// UsageError naming the tensor that is not.
void fused_adam_step(const AdamOptions& options, int64_t step, const at::Tensor& params, const at::Tensor& grads,
                     const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq);

// The same step with ATen's kernels, on fp32 tensors of one device, any device: ATen's fused
// multi-tensor Adam/AdamW (at::_fused_adam_ / at::_fused_adamw_; a CUDA kernel, and a CPU
// one that tests hold against the SIMD kernel above), or, without bias correction (which the
// fused kernels always apply), ATen's elementwise ops. DeepSpeed's arithmetic up to
// rounding: its GPU FusedAdam computes the same formulas in another order. No host sync.
void aten_adam_step(const AdamOptions& options, int64_t step, const at::Tensor& params, const at::Tensor& grads,
                    const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq);

}  // namespace zerotrain::optim
