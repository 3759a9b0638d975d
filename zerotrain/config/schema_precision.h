// `fp16`, `bf16` and `data_types` (deepspeed/runtime/constants.py, config.py).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "zerotrain/config/field.h"

namespace zerotrain::config {

enum class DType { kFp32, kFp16, kBf16 };
template <> struct EnumNames<DType> {
  static constexpr std::array<const char*, 3> names{"fp32", "fp16", "bf16"};
};

struct Fp16Config {
  static constexpr bool kIsBlock = true;
  Auto<bool> enabled = false;
  bool auto_cast = false;
  double loss_scale = 0.0;            // 0: dynamic loss scaling; > 0: this static scale
  int64_t initial_scale_power = 16;   // dynamic scaling starts at 2**initial_scale_power
  int64_t loss_scale_window = 1000;   // overflow-free steps before the scale doubles
  int64_t hysteresis = 2;             // overflows tolerated before the scale halves
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1.0;
  bool fp16_master_weights_and_grads = false;
  // zerotrain's own (DeepSpeed ignores unknown fp16 keys): stop with a diagnosis instead of
  // skipping steps without end. 0 turns a limit off (docs/precision.md).
  int64_t max_consecutive_skipped_steps = 50;
  std::optional<int64_t> max_steps_at_min_scale;   // unset: loss_scale_window + 2

  template <class V> void visit(V& v) {
    v.field("enabled", enabled);
    v.field("auto_cast", auto_cast);
    v.field("loss_scale", loss_scale, {.min = 0.0});
    v.field("initial_scale_power", initial_scale_power, {.min = 0, .max = 127});
    v.field("loss_scale_window", loss_scale_window, {.min = 1});
    v.field("hysteresis", hysteresis, {.min = 1});
    v.field("consecutive_hysteresis", consecutive_hysteresis);
    v.field("min_loss_scale", min_loss_scale, {.min = 0.0});
    v.field("fp16_master_weights_and_grads", fp16_master_weights_and_grads);
    v.field("max_consecutive_skipped_steps", max_consecutive_skipped_steps, {.min = 0});
    v.field("max_steps_at_min_scale", max_steps_at_min_scale, {.min = 0});
  }
};

struct Bf16Config {
  static constexpr bool kIsBlock = true;
  Auto<bool> enabled = false;
  bool immediate_grad_update = false;

  template <class V> void visit(V& v) {
    v.field("enabled", enabled);
    v.field("immediate_grad_update", immediate_grad_update);
  }
};

struct DataTypesConfig {
  static constexpr bool kIsBlock = true;
  // dtype gradients accumulate in across micro-steps; unset: DeepSpeed's per-mode default.
  std::optional<DType> grad_accum_dtype;

  template <class V> void visit(V& v) { v.field("grad_accum_dtype", grad_accum_dtype); }
};

}  // namespace zerotrain::config
