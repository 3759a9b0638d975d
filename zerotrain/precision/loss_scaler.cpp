#include "zerotrain/precision/loss_scaler.h"

#include <algorithm>

#include "zerotrain/core/error.h"

namespace zerotrain::precision {

LossScaler::LossScaler(const LossScalerOptions& options)
    : options_(options),
      scale_(options.dynamic ? options.initial_scale : options.static_scale),
      hysteresis_(options.hysteresis) {
  ZT_CHECK(scale_ > 0, ConfigError, "fp16: the loss scale must be positive, got ", scale_);
  ZT_CHECK(!options.dynamic || options.scale_window >= 1, ConfigError, "fp16.loss_scale_window must be at least 1");
  ZT_CHECK(!options.dynamic || options.hysteresis >= 1, ConfigError, "fp16.hysteresis must be at least 1");
}

std::optional<std::string> LossScaler::update(bool overflow) {
  std::optional<std::string> line;
  if (!options_.dynamic) {
    ++iteration_;
    if (overflow) line = "[deepspeed] OVERFLOW! Rank 0 Skipping step.";
    return line;
  }
  if (options_.flavor == ScalerFlavor::kNoZero) return update_no_zero(overflow);
  if (overflow) {
    if (options_.hysteresis == 1 || hysteresis_ == 1) {
      if (scale_ == options_.min_scale) {
        throw NumericsError(detail::str("current loss scale already at minimum (", scale_,
                                        ") - cannot decrease scale anymore: the gradients overflow even at the "
                                        "smallest scale. Train in bf16, or find the operation that overflows"));
      }
      const double next = std::max(scale_ / options_.scale_factor, options_.min_scale);
      line = detail::str("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: ",
                         static_cast<int64_t>(scale_), ", reducing to ", static_cast<int64_t>(next));
      scale_ = next;
    } else {
      line = detail::str("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: ",
                         static_cast<int64_t>(scale_), ", but hysteresis is ", hysteresis_, ". Reducing hysteresis to ",
                         hysteresis_ - 1);
      --hysteresis_;
    }
    last_overflow_iteration_ = iteration_;
  } else {
    if (options_.consecutive_hysteresis) {
      line = detail::str("Consecutive hysteresis is enabled. Restoring hysteresis to ", options_.hysteresis);
      hysteresis_ = options_.hysteresis;
    }
    if ((iteration_ - last_overflow_iteration_) % options_.scale_window == 0) {
      if (!options_.consecutive_hysteresis) hysteresis_ = options_.hysteresis;
      scale_ *= options_.scale_factor;
    }
  }
  ++iteration_;
  return line;
}

std::optional<std::string> LossScaler::update_no_zero(bool overflow) {
  std::optional<std::string> line;
  if (overflow) {
    const double next = std::max(scale_ / options_.scale_factor, options_.min_scale);
    line = detail::str("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: ", static_cast<int64_t>(scale_),
                       ", reducing to ", static_cast<int64_t>(next));
    scale_ = next;
    last_overflow_iteration_ = iteration_;
  } else {
    const int64_t stable = iteration_ - last_overflow_iteration_ - 1;
    if (stable > 0 && stable % options_.scale_window == 0) scale_ *= options_.scale_factor;
  }
  ++iteration_;
  return line;
}

}  // namespace zerotrain::precision
