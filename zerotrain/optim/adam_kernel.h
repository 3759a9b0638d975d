// The fused Adam/AdamW update over flat fp32 arrays: one pass reads a parameter, its
// gradient and both moments and writes three of them back, vectorised with Highway and
// dispatched at run time to the best SIMD target of the CPU (AVX-512, AVX2, SSE4, ...).
// The arithmetic is DeepSpeedCPUAdam's (csrc/includes/cpu_adam.h in DeepSpeed), operation for
// operation, without fused multiply-adds, so every target gives the scalar reference's
// bits exactly. No LibTorch here; optim/adam.h splits work across threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zerotrain::optim {

// Per-step constants, computed once per step (adam_coefficients) in DeepSpeed's way.
struct AdamCoefficients {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool adamw_mode = true;       // decoupled decay (AdamW) or L2 added to the gradient (Adam)
  float step_size = 0.0f;       // -lr / (1 - beta1^t)
  float bias_correction2 = 1.0f;   // 1 / sqrt(1 - beta2^t)
  float decay_factor = 0.0f;    // -lr * weight_decay
};

AdamCoefficients adam_coefficients(double lr, double beta1, double beta2, double eps, double weight_decay,
                                   bool adamw_mode, bool bias_correction, int64_t step);

// Updates elements [0, n) in place. The arrays may not overlap.
void adam_update(const AdamCoefficients& c, float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                 int64_t n);
// The same on plain scalars: the reference every SIMD target is tested against.
void adam_update_reference(const AdamCoefficients& c, float* params, const float* grads, float* exp_avg,
                           float* exp_avg_sq, int64_t n);

// The SIMD target adam_update dispatches to, e.g. "AVX3".
std::string adam_target();
// For tests: every target this binary has code for and this CPU can run, and a way to
// force one (0 restores the normal choice).
std::vector<int64_t> adam_available_targets();
std::string adam_target_name(int64_t target);
void adam_force_target(int64_t target);

}  // namespace zerotrain::optim
