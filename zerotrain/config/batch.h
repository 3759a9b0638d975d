// DeepSpeed's batch-size triangle (runtime/config.py: _set_batch_related_parameters,
// _batch_assertion):  train_batch_size = micro_batch_per_gpu * gradient_accumulation * world_size.
#pragma once

#include <cstdint>
#include <optional>

#include "zerotrain/config/diagnostics.h"

namespace zerotrain::config {

struct BatchSizes {
  int64_t train_batch_size = 0;
  int64_t micro_batch_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
};

struct BatchInputs {   // what the config gave; nullopt = absent
  std::optional<int64_t> train_batch_size;
  std::optional<int64_t> micro_batch_per_gpu;
  std::optional<int64_t> gradient_accumulation_steps;
};

// Derives the missing values with DeepSpeed's integer (floor) division and checks the
// result. On failure records an error naming the keys, the arithmetic, and a fix, and
// returns nullopt.
std::optional<BatchSizes> derive_batch_sizes(const BatchInputs& in, int64_t world_size, Diagnostics& diags);

}  // namespace zerotrain::config
