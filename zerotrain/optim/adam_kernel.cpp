// Highway's foreach_target re-includes this file once per SIMD target (HWY_TARGET_INCLUDE).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "zerotrain/optim/adam_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>

#include "zerotrain/optim/adam_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace zerotrain::optim::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One element, in exactly the order of the vector code below.
inline void adam_element(const AdamCoefficients& c, float& p, float g, float& m, float& v) {
  if (c.weight_decay > 0.0f && !c.adamw_mode) g = g + c.weight_decay * p;
  m = c.beta1 * m + (1.0f - c.beta1) * g;
  v = c.beta2 * v + (1.0f - c.beta2) * (g * g);
  const float denom = std::sqrt(v) * c.bias_correction2 + c.eps;
  if (c.weight_decay > 0.0f && c.adamw_mode) p = p + c.decay_factor * p;
  p = p + c.step_size * (m / denom);
}

void AdamUpdate(const AdamCoefficients& c, float* HWY_RESTRICT params, const float* HWY_RESTRICT grads,
                float* HWY_RESTRICT exp_avg, float* HWY_RESTRICT exp_avg_sq, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto beta1 = hn::Set(d, c.beta1), one_minus_beta1 = hn::Set(d, 1.0f - c.beta1);
  const auto beta2 = hn::Set(d, c.beta2), one_minus_beta2 = hn::Set(d, 1.0f - c.beta2);
  const auto eps = hn::Set(d, c.eps), bc2 = hn::Set(d, c.bias_correction2);
  const auto step_size = hn::Set(d, c.step_size), decay = hn::Set(d, c.decay_factor);
  const auto weight_decay = hn::Set(d, c.weight_decay);
  const bool l2 = c.weight_decay > 0.0f && !c.adamw_mode;
  const bool decoupled = c.weight_decay > 0.0f && c.adamw_mode;
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto p = hn::LoadU(d, params + i);
    auto g = hn::LoadU(d, grads + i);
    if (l2) g = hn::Add(g, hn::Mul(weight_decay, p));
    const auto m = hn::Add(hn::Mul(beta1, hn::LoadU(d, exp_avg + i)), hn::Mul(one_minus_beta1, g));
    const auto v = hn::Add(hn::Mul(beta2, hn::LoadU(d, exp_avg_sq + i)), hn::Mul(one_minus_beta2, hn::Mul(g, g)));
    const auto denom = hn::Add(hn::Mul(hn::Sqrt(v), bc2), eps);
    if (decoupled) p = hn::Add(p, hn::Mul(decay, p));
    p = hn::Add(p, hn::Mul(step_size, hn::Div(m, denom)));
    hn::StoreU(m, d, exp_avg + i);
    hn::StoreU(v, d, exp_avg_sq + i);
    hn::StoreU(p, d, params + i);
  }
  for (; i < n; ++i) adam_element(c, params[i], grads[i], exp_avg[i], exp_avg_sq[i]);
}

}  // namespace zerotrain::optim::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace zerotrain::optim {

HWY_EXPORT(AdamUpdate);

AdamCoefficients adam_coefficients(double lr, double beta1, double beta2, double eps, double weight_decay,
                                   bool adamw_mode, bool bias_correction, int64_t step) {
  AdamCoefficients c;
  c.beta1 = static_cast<float>(beta1);
  c.beta2 = static_cast<float>(beta2);
  c.eps = static_cast<float>(eps);
  c.weight_decay = static_cast<float>(weight_decay);
  c.adamw_mode = adamw_mode;
  const double bc1 = bias_correction ? 1.0 - std::pow(beta1, static_cast<double>(step)) : 1.0;
  const double bc2 = bias_correction ? 1.0 / std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step))) : 1.0;
  c.step_size = static_cast<float>(-lr / bc1);
  c.bias_correction2 = static_cast<float>(bc2);
  c.decay_factor = static_cast<float>(-lr * weight_decay);
  return c;
}

void adam_update(const AdamCoefficients& c, float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                 int64_t n) {
  HWY_DYNAMIC_DISPATCH(AdamUpdate)(c, params, grads, exp_avg, exp_avg_sq, n);
}

void adam_update_reference(const AdamCoefficients& c, float* params, const float* grads, float* exp_avg,
                           float* exp_avg_sq, int64_t n) {
  for (int64_t i = 0; i < n; ++i) HWY_STATIC_DISPATCH(adam_element)(c, params[i], grads[i], exp_avg[i], exp_avg_sq[i]);
}

std::string adam_target() {
  // The best target this CPU supports among those compiled in.
  const auto targets = hwy::SupportedAndGeneratedTargets();
  return targets.empty() ? "none" : hwy::TargetName(targets.front());
}

std::vector<int64_t> adam_available_targets() {
  hwy::SetSupportedTargetsForTest(0);
  return hwy::SupportedAndGeneratedTargets();
}

std::string adam_target_name(int64_t target) { return hwy::TargetName(target); }

void adam_force_target(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

}  // namespace zerotrain::optim
#endif  // HWY_ONCE
