#include "zerotrain/optim/fused_adam.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "zerotrain/core/error.h"
#include "zerotrain/optim/adam_kernel.h"

namespace zerotrain::optim {
namespace {

// Elements per task: big enough that a task's start-up is noise, small enough for 2+
// threads to share a 1M-element shard. A multiple of every SIMD width.
constexpr int64_t kGrainNumel = 1 << 15;

void check(const at::Tensor& t, const at::Tensor& params, const char* name) {
  ZT_CHECK(t.defined() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.device().is_cpu(), UsageError,
           "fused Adam: ", name, " must be a contiguous float32 CPU tensor");
  ZT_CHECK(t.numel() == params.numel(), UsageError, "fused Adam: ", name, " has ", t.numel(),
           " elements but params has ", params.numel());
}

}  // namespace

void fused_adam_step(const AdamOptions& o, int64_t step, const at::Tensor& params, const at::Tensor& grads,
                     const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq) {
  check(params, params, "params");
  check(grads, params, "grads");
  check(exp_avg, params, "exp_avg");
  check(exp_avg_sq, params, "exp_avg_sq");
  ZT_CHECK(step >= 1, UsageError, "fused Adam: step ", step, " must count from 1");
  const AdamCoefficients c =
      adam_coefficients(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.adamw_mode, o.bias_correction, step);
  float* p = params.data_ptr<float>();
  const float* g = grads.data_ptr<float>();
  float* m = exp_avg.data_ptr<float>();
  float* v = exp_avg_sq.data_ptr<float>();
  at::parallel_for(0, params.numel(), kGrainNumel, [&](int64_t begin, int64_t end) {
    adam_update(c, p + begin, g + begin, m + begin, v + begin, end - begin);
  });
}

}  // namespace zerotrain::optim
