#include "zerotrain/precision/from_config.h"

#include <cmath>

namespace zerotrain::precision {

LossScalerOptions loss_scaler_options(const Config& config) {
  const auto& fp16 = config.fp16;
  LossScalerOptions options;
  // Stage 0 is DeepSpeed's FP16_Optimizer (no hysteresis, its own log lines); ZeRO's
  // optimizers use DynamicLossScaler. DeepSpeed 0.19 builds both from the fp16 block's values,
  // written or default (2^16, hysteresis 2, window 1000, minimum 1).
  options.flavor = config.zero_optimization.enabled() ? ScalerFlavor::kZero : ScalerFlavor::kNoZero;
  if (fp16.loss_scale > 0) {
    options.dynamic = false;
    options.static_scale = fp16.loss_scale;
    return options;
  }
  options.initial_scale = std::ldexp(1.0, static_cast<int>(fp16.initial_scale_power));
  options.scale_window = fp16.loss_scale_window;
  options.min_scale = fp16.min_loss_scale;
  options.hysteresis = options.flavor == ScalerFlavor::kNoZero ? 1 : fp16.hysteresis;
  options.consecutive_hysteresis = options.flavor == ScalerFlavor::kZero && fp16.consecutive_hysteresis;
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
