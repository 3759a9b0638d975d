#include "zerotrain/precision/loss_scaler.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "zerotrain/core/error.h"

namespace zerotrain::precision {
namespace {

// Python's repr of a float: "32768.0", "0.25", "1e+16".
std::string python_float(double value) {
  if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 1e16) {
    return detail::str(static_cast<int64_t>(value), ".0");
  }
  char text[64];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

}  // namespace

LossScaler::LossScaler(const LossScalerOptions& options)
    : options_(options),
      scale_(options.dynamic ? options.initial_scale : options.static_scale),
      hysteresis_(options.hysteresis) {
  ZT_CHECK(scale_ > 0, ConfigError, "fp16: the loss scale must be positive, got ", scale_);
  ZT_CHECK(!options.dynamic || options.scale_window >= 1, ConfigError, "fp16.loss_scale_window must be at least 1");
  ZT_CHECK(!options.dynamic || options.hysteresis >= 1, ConfigError, "fp16.hysteresis must be at least 1");
}

std::string LossScaler::python_scale() const {
  return scale_prints_as_int_ ? detail::str(static_cast<int64_t>(scale_)) : python_float(scale_);
}

bool LossScaler::grows_now() const {
  const int64_t stable = iteration_ - last_overflow_iteration_ - 1;
  return stable > 0 && stable % options_.scale_window == 0;
}

std::optional<std::string> LossScaler::update(bool overflow) {
  std::optional<std::string> line;
  if (!options_.dynamic) {
    if (overflow && options_.flavor == ScalerFlavor::kNoZero) {
      // FP16_Optimizer's two lines; DeepSpeed keeps the static scale as a float.
      line = detail::str("Grad overflow on iteration: ", iteration_, "\nUsing static loss scale of: ",
                         python_float(scale_));
    } else if (overflow) {
      line = "[deepspeed] OVERFLOW! Skipping step. Gradients are non-finite, weights were not updated.";
    }
    ++iteration_;
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
    if (grows_now()) {
      if (!options_.consecutive_hysteresis) hysteresis_ = options_.hysteresis;
      scale_ *= options_.scale_factor;
    }
  }
  ++iteration_;
  return line;
}

std::optional<std::string> LossScaler::update_no_zero(bool overflow) {
  std::optional<std::string> line;
  const std::string before = python_scale();
  if (overflow) {
    const double halved = scale_ / options_.scale_factor;
    scale_ = std::max(halved, options_.min_scale);
    scale_prints_as_int_ = halved < options_.min_scale && options_.min_scale == std::trunc(options_.min_scale);
    line = detail::str("Grad overflow on iteration ", iteration_, "\nReducing dynamic loss scale from ", before, " to ",
                       python_scale());
    last_overflow_iteration_ = iteration_;
  } else if (grows_now()) {
    scale_ *= options_.scale_factor;
    scale_prints_as_int_ = false;
    line = detail::str("No Grad overflow for ", options_.scale_window, " iterations\nIncreasing dynamic loss scale from ",
                       before, " to ", python_scale());
  }
  ++iteration_;
  return line;
}

}  // namespace zerotrain::precision
