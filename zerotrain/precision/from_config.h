// The fp16 block as DeepSpeed's ZeRO optimizers read it, for the loss scaler and the
// overflow watch (docs/precision.md).
#pragma once

#include "zerotrain/config/config.h"
#include "zerotrain/precision/loss_scaler.h"
#include "zerotrain/precision/overflow_watch.h"

namespace zerotrain::precision {

// As DeepSpeed 0.19 does: the block's values, written or default (2^16, hysteresis 2, window
// 1000, minimum 1), for every stage. (Older DeepSpeed releases gave a ZeRO fp16 block with
// no scaler key a scale of 2^32 and hysteresis 1; 0.19 no longer does.) Stage 0 gets
// FP16_Optimizer's scaler (ScalerFlavor::kNoZero), which has no hysteresis.
LossScalerOptions loss_scaler_options(const Config& config);

OverflowWatchOptions overflow_watch_options(const Config& config);

}  // namespace zerotrain::precision
