// The fp16 block as DeepSpeed's ZeRO optimizers read it, for the loss scaler and the
// overflow watch (docs/precision.md).
#pragma once

#include "zerotrain/config/config.h"
#include "zerotrain/precision/loss_scaler.h"
#include "zerotrain/precision/overflow_watch.h"

namespace zerotrain::precision {

// DeepSpeed's quirk included: under ZeRO (stages 1-3), an fp16 block that sets none of
// initial_scale_power, loss_scale_window, min_loss_scale, hysteresis and
// consecutive_hysteresis gets DynamicLossScaler's constructor defaults, a scale of 2^32 and
// hysteresis 1. Stage 0 gets FP16_Optimizer's scaler (ScalerFlavor::kNoZero).
LossScalerOptions loss_scaler_options(const Config& config);

OverflowWatchOptions overflow_watch_options(const Config& config);

}  // namespace zerotrain::precision
