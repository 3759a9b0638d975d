// `optimizer` and `scheduler`. The set of valid `params` keys depends on `type`, so each type
// has its own params block (deepspeed/runtime/engine.py, ops/*, runtime/lr_schedules.py).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "zerotrain/config/field.h"

namespace zerotrain::config {

// Every optimizer's params reject max_grad_norm the way DeepSpeed does.
template <class V>
void reject_max_grad_norm(V& v) {
  v.removed("max_grad_norm",
            "'max_grad_norm' is not an optimizer parameter (DeepSpeed raises ValueError); "
            "use the top-level \"gradient_clipping\" instead");
}

struct AdamParams {        // "Adam" and "AdamW" (FusedAdam / DeepSpeedCPUAdam)
  static constexpr bool kIsBlock = true;
  Auto<double> lr = 1e-3;
  Auto<std::array<double, 2>> betas = std::array<double, 2>{0.9, 0.999};
  Auto<double> eps = 1e-8;
  Auto<double> weight_decay = 0.0;
  bool bias_correction = true;
  bool amsgrad = false;
  bool torch_adam = false;
  bool adam_w_mode = true;  // DeepSpeed: "Adam" decays weights decoupled (AdamW) unless false

  template <class V> void visit(V& v) {
    v.field("lr", lr, {.min = 0.0});
    v.field("betas", betas);
    v.field("eps", eps, {.min = 0.0});
    v.field("weight_decay", weight_decay, {.min = 0.0});
    v.field("bias_correction", bias_correction);
    v.field("amsgrad", amsgrad, {.unsupported = "AMSGrad"});
    v.field("torch_adam", torch_adam);
    v.field("adam_w_mode", adam_w_mode);
    reject_max_grad_norm(v);
  }
};

struct LambParams {
  static constexpr bool kIsBlock = true;
  Auto<double> lr = 1e-3;
  Auto<std::array<double, 2>> betas = std::array<double, 2>{0.9, 0.999};
  Auto<double> eps = 1e-8;
  Auto<double> weight_decay = 0.0;
  bool bias_correction = true;
  bool eps_inside_sqrt = false;
  double max_coeff = 10.0;
  double min_coeff = 0.01;
  bool amsgrad = false;

  template <class V> void visit(V& v) {
    v.field("lr", lr, {.min = 0.0});
    v.field("betas", betas);
    v.field("eps", eps, {.min = 0.0});
    v.field("weight_decay", weight_decay, {.min = 0.0});
    v.field("bias_correction", bias_correction);
    v.field("eps_inside_sqrt", eps_inside_sqrt);
    v.field("max_coeff", max_coeff);
    v.field("min_coeff", min_coeff);
    v.field("amsgrad", amsgrad, {.unsupported = "AMSGrad"});
    reject_max_grad_norm(v);
  }
};

struct SgdParams {         // torch.optim.SGD
  static constexpr bool kIsBlock = true;
  Auto<double> lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  Auto<double> weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;

  template <class V> void visit(V& v) {
    v.field("lr", lr, {.min = 0.0});
    v.field("momentum", momentum, {.min = 0.0});
    v.field("dampening", dampening);
    v.field("weight_decay", weight_decay, {.min = 0.0});
    v.field("nesterov", nesterov);
    v.field("maximize", maximize, {.unsupported = "maximize"});
    reject_max_grad_norm(v);
  }
};

struct AdagradParams {     // DeepSpeedCPUAdagrad / torch.optim.Adagrad
  static constexpr bool kIsBlock = true;
  Auto<double> lr = 1e-2;
  double lr_decay = 0.0;
  Auto<double> weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  Auto<double> eps = 1e-10;

  template <class V> void visit(V& v) {
    v.field("lr", lr, {.min = 0.0});
    v.field("lr_decay", lr_decay, {.min = 0.0});
    v.field("weight_decay", weight_decay, {.min = 0.0});
    v.field("initial_accumulator_value", initial_accumulator_value, {.min = 0.0});
    v.field("eps", eps, {.min = 0.0});
    reject_max_grad_norm(v);
  }
};

struct LionParams {        // FusedLion / DeepSpeedCPULion
  static constexpr bool kIsBlock = true;
  Auto<double> lr = 1e-4;
  Auto<std::array<double, 2>> betas = std::array<double, 2>{0.9, 0.99};
  Auto<double> weight_decay = 0.0;

  template <class V> void visit(V& v) {
    v.field("lr", lr, {.min = 0.0});
    v.field("betas", betas);
    v.field("weight_decay", weight_decay, {.min = 0.0});
    reject_max_grad_norm(v);
  }
};

enum class OptimizerKind { kAdam, kAdamW, kLamb, kSgd, kAdagrad, kLion };

struct OptimizerConfig {
  static constexpr bool kIsBlock = true;
  std::string type;                 // as written in the file
  OptimizerKind kind = OptimizerKind::kAdam;
  std::variant<AdamParams, LambParams, SgdParams, AdagradParams, LionParams> params;
  bool legacy_fusion = false;

  template <class V> void visit(V& v);
};

// ---------------------------------------------------------------------------------------
enum class WarmupType { kLog, kLinear };
template <> struct EnumNames<WarmupType> {
  static constexpr std::array<const char*, 2> names{"log", "linear"};
};

struct WarmupLRParams {
  static constexpr bool kIsBlock = true;
  Auto<double> warmup_min_lr = 0.0;
  Auto<double> warmup_max_lr = 0.001;
  Auto<int64_t> warmup_num_steps = 1000;
  WarmupType warmup_type = WarmupType::kLog;
  // WarmupDecayLR only (required there): the step at which the rate has decayed to 0.
  Auto<std::optional<int64_t>> total_num_steps;

  template <class V> void visit(V& v, bool with_decay) {
    v.field("warmup_min_lr", warmup_min_lr, {.min = 0.0});
    v.field("warmup_max_lr", warmup_max_lr, {.min = 0.0});
    v.field("warmup_num_steps", warmup_num_steps, {.min = 0});
    v.field("warmup_type", warmup_type);
    if (with_decay) v.field("total_num_steps", total_num_steps, {.required = true, .min = 1});
  }
  template <class V> void visit(V& v) { visit(v, false); }
};

struct WarmupDecayLRParams : WarmupLRParams {
  template <class V> void visit(V& v) { WarmupLRParams::visit(v, true); }
};

struct WarmupCosineLRParams {
  static constexpr bool kIsBlock = true;
  Auto<std::optional<int64_t>> total_num_steps;
  double warmup_min_ratio = 0.0;
  Auto<int64_t> warmup_num_steps = 1000;
  double cos_min_ratio = 0.0001;
  WarmupType warmup_type = WarmupType::kLog;

  template <class V> void visit(V& v) {
    // DeepSpeed warms up for at least 2 steps and divides by total - warmup: 3 at least.
    v.field("total_num_steps", total_num_steps, {.required = true, .min = 3});
    v.field("warmup_min_ratio", warmup_min_ratio, {.min = 0.0, .max = 1.0});
    v.field("warmup_num_steps", warmup_num_steps, {.min = 0});
    v.field("cos_min_ratio", cos_min_ratio, {.min = 0.0});
    v.field("warmup_type", warmup_type);
  }
};

struct OneCycleParams {
  static constexpr bool kIsBlock = true;
  std::optional<double> cycle_min_lr;        // required
  std::optional<double> cycle_max_lr;        // required
  double decay_lr_rate = 0.0;
  int64_t cycle_first_step_size = 2000;
  std::optional<int64_t> cycle_second_step_size;   // unset: cycle_first_step_size
  int64_t cycle_first_stair_count = 0;
  std::optional<int64_t> cycle_second_stair_count;
  int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;

  template <class V> void visit(V& v) {
    v.field("cycle_min_lr", cycle_min_lr, {.required = true, .min = 0.0});
    v.field("cycle_max_lr", cycle_max_lr, {.required = true, .min = 0.0});
    v.field("decay_lr_rate", decay_lr_rate, {.min = 0.0});
    v.field("cycle_first_step_size", cycle_first_step_size, {.min = 1});
    v.field("cycle_second_step_size", cycle_second_step_size, {.min = 1});
    v.field("cycle_first_stair_count", cycle_first_stair_count, {.min = 0});
    v.field("cycle_second_stair_count", cycle_second_stair_count, {.min = 0});
    v.field("decay_step_size", decay_step_size, {.min = 0});
    v.field("cycle_momentum", cycle_momentum);
    v.field("cycle_min_mom", cycle_min_mom, {.min = 0.0});
    v.field("cycle_max_mom", cycle_max_mom, {.min = 0.0});
    v.field("decay_mom_rate", decay_mom_rate, {.min = 0.0});
  }
};

struct LRRangeTestParams {
  static constexpr bool kIsBlock = true;
  double lr_range_test_min_lr = 1e-3;
  int64_t lr_range_test_step_size = 2000;
  double lr_range_test_step_rate = 1.0;
  bool lr_range_test_staircase = false;

  template <class V> void visit(V& v) {
    v.field("lr_range_test_min_lr", lr_range_test_min_lr, {.min = 0.0});
    v.field("lr_range_test_step_size", lr_range_test_step_size, {.min = 1});
    v.field("lr_range_test_step_rate", lr_range_test_step_rate);
    v.field("lr_range_test_staircase", lr_range_test_staircase);
  }
};

enum class SchedulerKind { kWarmupLR, kWarmupDecayLR, kWarmupCosineLR, kOneCycle, kLRRangeTest };

struct SchedulerConfig {
  static constexpr bool kIsBlock = true;
  std::string type;
  SchedulerKind kind = SchedulerKind::kWarmupLR;
  std::variant<WarmupLRParams, WarmupDecayLRParams, WarmupCosineLRParams, OneCycleParams,
               LRRangeTestParams>
      params;

  template <class V> void visit(V& v);
};

}  // namespace zerotrain::config

#include "zerotrain/config/schema_optim_impl.h"
