#include "zerotrain/precision/from_config.h"

#include <cmath>

namespace zerotrain::precision {

LossScalerOptions loss_scaler_options(const Config& config) {
  const auto& fp16 = config.fp16;
  LossScalerOptions options;
  if (fp16.loss_scale > 0) {
    options.dynamic = false;
    options.static_scale = fp16.loss_scale;
    return options;
  }
  // Stage 0 is DeepSpeed's FP16_Optimizer: 2^initial_scale_power, window and minimum from
  // the config whether or not they were written, no hysteresis.
  if (!config.zero_optimization.enabled()) {
    options.flavor = ScalerFlavor::kNoZero;
    options.initial_scale = std::ldexp(1.0, static_cast<int>(fp16.initial_scale_power));
    options.scale_window = fp16.loss_scale_window;
    options.min_scale = fp16.min_loss_scale;
    options.hysteresis = 1;
    return options;
  }
  // config.py get_dynamic_loss_scale_args builds the scaler's arguments only when one of
  // these keys is present; otherwise ZeRO's CreateLossScaler uses the constructor defaults.
  bool any_key = false;
  for (const char* key : {"fp16.initial_scale_power", "fp16.loss_scale_window", "fp16.min_loss_scale",
                          "fp16.hysteresis", "fp16.consecutive_hysteresis"}) {
    any_key = any_key || config.source_of(key) != config::Source::kDefault;
  }
  if (!any_key) return options;   // LossScalerOptions' defaults are the constructor's
  options.initial_scale = std::ldexp(1.0, static_cast<int>(fp16.initial_scale_power));
  options.scale_window = fp16.loss_scale_window;
  options.hysteresis = fp16.hysteresis;
  options.consecutive_hysteresis = fp16.consecutive_hysteresis;
  options.min_scale = fp16.min_loss_scale;
  return options;
}

OverflowWatchOptions overflow_watch_options(const Config& config) {
  const auto& fp16 = config.fp16;
  const LossScalerOptions scaler = loss_scaler_options(config);
  OverflowWatchOptions options;
  options.max_consecutive_skipped_steps = fp16.max_consecutive_skipped_steps;
  // A static scale never moves: sitting at it is not a sign of anything.
  // Longer than the window and the step after it, in which a clean scale doubles again.
  options.max_steps_at_min_scale = scaler.dynamic ? fp16.max_steps_at_min_scale.value_or(scaler.scale_window + 2) : 0;
  options.min_scale = scaler.dynamic ? scaler.min_scale : scaler.static_scale;
  options.initial_scale_power = static_cast<int64_t>(std::log2(scaler.dynamic ? scaler.initial_scale : scaler.static_scale));
  return options;
}

}  // namespace zerotrain::precision
