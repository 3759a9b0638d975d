// The blocks HF's Trainer supplies when a ds_config has none: an AdamW optimizer from
// --learning_rate/--adam_beta1/--adam_beta2/--adam_epsilon/--weight_decay, and the
// schedule of --lr_scheduler_type with --warmup_steps/--warmup_ratio. Their values are
// "auto", so resolve_auto fills them like any other; config check shows them as `auto`.
#pragma once

#include <string>

#include "zerotrain/config/config.h"

namespace zerotrain::config {

// The --lr_scheduler_type values, each as the DeepSpeed schedule that computes HF's rate:
//   linear                -> WarmupDecayLR (linear warmup from 0, linear decay to 0)
//   cosine                -> WarmupCosineLR (linear warmup from 0, cosine decay to 0)
//   constant_with_warmup  -> WarmupLR (linear warmup, then constant)
//   constant              -> no schedule
// Throws UsageError naming the accepted values for any other.
void add_trainer_blocks(Config& config, const std::string& lr_scheduler_type);

}  // namespace zerotrain::config
