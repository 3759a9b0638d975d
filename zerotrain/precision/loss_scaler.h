// DeepSpeed's fp16 loss scalers (deepspeed/runtime/fp16/loss_scaler.py), the ZeRO flavour:
// a static scale, or a dynamic one that halves on overflow (after `hysteresis` overflows)
// and doubles after `loss_scale_window` steps without one. No LibTorch: the engine detects
// overflow and applies the scale; this is the arithmetic and the log lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zerotrain::precision {

struct LossScalerOptions {
  bool dynamic = true;
  double static_scale = 1.0;        // used when !dynamic
  double initial_scale = 4294967296.0;   // 2^initial_scale_power (DeepSpeed's constructor default 2^32)
  int64_t scale_window = 1000;
  int64_t hysteresis = 1;           // DeepSpeed's delayed_shift
  bool consecutive_hysteresis = false;
  double min_scale = 1.0;
  double scale_factor = 2.0;        // not configurable in DeepSpeed either
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options);

  double scale() const { return scale_; }
  int64_t hysteresis_left() const { return hysteresis_; }
  int64_t iteration() const { return iteration_; }

  // Once per optimizer step, before it is applied or skipped. Returns DeepSpeed's log line
  // for the event, if it logs one ("[deepspeed] OVERFLOW! Rank 0 Skipping step. ...").
  // Throws Error when an overflow hits at the minimum scale, as DeepSpeed raises.
  std::optional<std::string> update(bool overflow);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t iteration_ = 0;
  int64_t last_overflow_iteration_ = -1;
  int64_t hysteresis_;
};

}  // namespace zerotrain::precision
