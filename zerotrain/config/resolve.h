// Turning a loaded config into the one the engine runs: HF-style "auto" values filled from
// Trainer arguments, then the batch triangle at the real world size.
#pragma once

#include <cstdint>
#include <optional>

#include "zerotrain/config/config.h"

namespace zerotrain::config {

// The HF TrainingArguments that fill "auto" values, with HF's defaults.
struct TrainerArgs {
  int64_t world_size = 1;
  int64_t per_device_train_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  double max_grad_norm = 1.0;
  double learning_rate = 5e-5;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double weight_decay = 0.0;
  bool fp16 = false;
  bool bf16 = false;
  bool save_async = false;        // zerotrain's --save_async: checkpoint.async_save
  int64_t warmup_steps = 0;       // wins over warmup_ratio when > 0, as in HF
  double warmup_ratio = 0.0;
  int64_t seed = 42;
  std::optional<int64_t> num_training_steps;   // fills scheduler total_num_steps
  std::optional<int64_t> hidden_size;          // fills the ZeRO bucket sizes
};

// Does what transformers' HfTrainerDeepSpeedConfig.trainer_config_process and
// trainer_config_finalize do: every "auto" key takes the Trainer's value; a key the file sets
// to a value that differs from the Trainer's is a mismatch. All mismatches are reported in
// one ConfigError. Filled keys get Source::kAuto. The arguments are checked first
// (check_trainer_args), whether or not the config has the keys they fill.
void resolve_auto(Config& config, const TrainerArgs& args);

// Checks each argument exactly as a config file's value for the key it fills is checked
// (--learning_rate as optimizer.params.lr: finite, at least 0, ...), and the rest by HF's
// rules (--seed within 0..2^32-1, --warmup_ratio within [0, 1]). Throws one ConfigError
// naming every bad argument.
void check_trainer_args(const TrainerArgs& args);

// The last step before an engine starts: every "auto" must be resolved (an error names each
// key and the Trainer argument that fills it), and the batch triangle is derived and checked
// at `world_size`. Throws ConfigError listing every problem.
void finalize(Config& config, int64_t world_size);

// The part of finalize that `zerotrain config check` runs: derives the batch sizes when none
// of the three is "auto", recording problems in config.diagnostics instead of throwing.
void derive_batch(Config& config, int64_t world_size);

}  // namespace zerotrain::config
