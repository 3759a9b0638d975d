// DeepSpeed's fp16 loss scalers: a static scale, or a dynamic one in either of DeepSpeed's
// two flavours.
//  - ZeRO (stages 1-3; DynamicLossScaler in deepspeed/runtime/fp16/loss_scaler.py): halves
//    on overflow once `hysteresis` overflows are spent, and raises at the minimum scale.
//  - Without ZeRO (stage 0; FP16_Optimizer._update_scale in fp16/fused_optimizer.py): halves
//    on every overflow, floored at the minimum (and never raises).
// Both double when the steps since the last overflow, less one, are a positive multiple of
// the window (DeepSpeed 0.19's rule for both). The log lines are DeepSpeed 0.19.8's, word for
// word. No LibTorch: the engine detects overflow and applies the scale; this is the
// arithmetic and the log lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zerotrain::precision {

enum class ScalerFlavor { kZero, kNoZero };

struct LossScalerOptions {
  bool dynamic = true;
  ScalerFlavor flavor = ScalerFlavor::kZero;
  double static_scale = 1.0;        // used when !dynamic
  double initial_scale = 65536.0;   // 2^initial_scale_power
  int64_t scale_window = 1000;
  int64_t hysteresis = 2;           // DeepSpeed's delayed_shift
  bool consecutive_hysteresis = false;
  double min_scale = 1.0;
  double scale_factor = 2.0;        // not configurable in DeepSpeed either
};

// What a checkpoint keeps of a scaler to resume it exactly.
struct LossScalerState {
  double scale = 1.0;
  int64_t iteration = 0;
  int64_t last_overflow_iteration = -1;
  int64_t hysteresis_left = 1;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options);

  double scale() const { return scale_; }
  int64_t hysteresis_left() const { return hysteresis_; }
  int64_t iteration() const { return iteration_; }

  // Once per optimizer step, before it is applied or skipped. Returns DeepSpeed's log lines
  // for the event, if it logs any ("[deepspeed] OVERFLOW! Rank 0 Skipping step. ..."; two
  // lines, '\n'-separated, for some stage-0 events).
  // Throws Error when an overflow hits at the minimum scale, as DeepSpeed raises.
  std::optional<std::string> update(bool overflow);

  LossScalerState state() const { return {scale_, iteration_, last_overflow_iteration_, hysteresis_}; }
  void restore(const LossScalerState& state) {
    scale_ = state.scale;
    iteration_ = state.iteration;
    last_overflow_iteration_ = state.last_overflow_iteration;
    hysteresis_ = state.hysteresis_left;
    scale_prints_as_int_ = state.iteration == 0;
  }

 private:
  std::optional<std::string> update_no_zero(bool overflow);
  bool grows_now() const;
  std::string python_scale() const;


  LossScalerOptions options_;
  double scale_;
  int64_t iteration_ = 0;
  int64_t last_overflow_iteration_ = -1;
  int64_t hysteresis_;
  // Python prints DeepSpeed's scale as an int until a halving or doubling makes it a float
  // ("from 65536 to 32768.0"; a halving floored at the integer minimum gives an int again):
  // stage 0's lines keep that.
  bool scale_prints_as_int_ = true;
};

}  // namespace zerotrain::precision
