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

void check_aten(const at::Tensor& t, const at::Tensor& params, const char* name) {
  ZT_CHECK(t.defined() && t.scalar_type() == at::kFloat && t.device() == params.device(), UsageError, "Adam: ", name,
           " must be a float32 tensor on ", params.device(), " (the parameters' device)");
  ZT_CHECK(t.numel() == params.numel(), UsageError, "Adam: ", name, " has ", t.numel(), " elements but params has ",
           params.numel());
}

}  // namespace

void aten_adam_step(const AdamOptions& options, int64_t step, const at::Tensor& params, const at::Tensor& grads,
                    const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq) {
  ZT_CHECK(params.defined() && params.scalar_type() == at::kFloat, UsageError, "Adam: params must be float32");
  check_aten(grads, params, "grads");
  check_aten(exp_avg, params, "exp_avg");
  check_aten(exp_avg_sq, params, "exp_avg_sq");
  ZT_CHECK(step >= 1, UsageError, "Adam: step ", step, " must count from 1");
  // DeepSpeed's Adam kernels (CPU and GPU FusedAdam alike) take the hyper-parameters as
  // float: 1 - beta2 is then 1 - 0.999f, 1.3e-5 away from 0.001, which shows in the second
  // moment. ATen's take double, so they are given the float values.
  const auto f = [](double x) { return static_cast<double>(static_cast<float>(x)); };
  AdamOptions o = options;
  o.lr = f(o.lr);
  o.beta1 = f(o.beta1);
  o.beta2 = f(o.beta2);
  o.eps = f(o.eps);
  o.weight_decay = f(o.weight_decay);
  if (!o.bias_correction) {
    // DeepSpeed's update with both corrections 1 (adam_kernel.h has the same steps).
    const at::Tensor g = !o.adamw_mode && o.weight_decay != 0 ? grads.add(params, o.weight_decay) : grads;
    exp_avg.mul_(o.beta1).add_(g, 1 - o.beta1);
    exp_avg_sq.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
    if (o.adamw_mode && o.weight_decay != 0) params.mul_(1 - o.lr * o.weight_decay);
    params.addcdiv_(exp_avg, exp_avg_sq.sqrt().add_(o.eps), -o.lr);
    return;
  }
  // The kernels read the step from a tensor on the parameters' device (as torch.optim keeps
  // it) and do not advance it: the count is this optimizer's. float32, as torch.optim's is;
  // exact to 2^24 steps, and beyond, bias correction is 1 to float precision anyway. Made
  // by a fill on the device, not a copy from the host, so nothing waits.
  const at::Tensor steps = at::full({}, static_cast<double>(step), params.options());
  const at::TensorList none;   // no amsgrad maxima
  if (o.adamw_mode) {
    // Decoupled decay: params *= 1 - lr * wd before the update, DeepSpeed's order.
    at::_fused_adamw_({params}, {grads}, {exp_avg}, {exp_avg_sq}, none, {steps}, o.lr, o.beta1, o.beta2,
                      o.weight_decay, o.eps, /*amsgrad=*/false, /*maximize=*/false);
  } else {
    // Adam with L2: wd * params added to the gradient, DeepSpeed's adam_w_mode false.
    at::_fused_adam_({params}, {grads}, {exp_avg}, {exp_avg_sq}, none, {steps}, o.lr, o.beta1, o.beta2,
                     o.weight_decay, o.eps, /*amsgrad=*/false, /*maximize=*/false);
  }
}

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
