// zerotrain::TrainingArguments: HF's TrainingArguments for the C++ Trainer, with HF's
// names and defaults (transformers.TrainingArguments), so that a ds_config's "auto" values
// are filled, and checked, exactly as the HF Trainer does. `zerotrain train` has one flag
// per field (tools/cmd_train.cpp), spelled as HF's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zerotrain/config/resolve.h"

namespace zerotrain {

enum class IntervalStrategy { kNo, kSteps, kEpoch };

struct TrainingArguments {
  std::string output_dir;                 // checkpoints: <output_dir>/checkpoint-<step>/ (empty: none)
  std::string deepspeed;                  // the ds_config.json (empty: HF's run without DeepSpeed, all "auto")
  // The ZeRO stage (0-3) without writing a config; with one, it fills an absent
  // zero_optimization.stage and must match a written one. HF has no such argument.
  std::optional<int64_t> zero_stage;
  // Replace what is in the way of this run's outputs: checkpoint-<step> folders of an earlier
  // run in output_dir, an existing --metrics_file. Without it those are refused.
  bool overwrite_output_dir = false;
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;
  double num_train_epochs = 3.0;
  int64_t max_steps = -1;                 // > 0 overrides num_train_epochs
  std::string lr_scheduler_type = "linear";   // used when the config has no scheduler block
  int64_t warmup_steps = 0;               // wins over warmup_ratio when > 0
  double warmup_ratio = 0.0;
  int64_t logging_steps = 500;
  bool logging_first_step = false;
  std::string logging_dir;                // --report_to writers (default <output_dir>/runs/<time>_<host>)
  IntervalStrategy eval_strategy = IntervalStrategy::kNo;
  std::optional<int64_t> eval_steps;      // default: logging_steps
  IntervalStrategy save_strategy = IntervalStrategy::kSteps;
  int64_t save_steps = 500;
  int64_t save_total_limit = 0;           // 0: keep every checkpoint (HF's None)
  // A model built from a Hugging Face folder (--model hf:DIR) is written back as one every N
  // steps into <output_dir>/hf-<step>/ (0: never), and at the end into <output_dir>. HF's
  // Trainer has no such argument (its checkpoints hold the model folder).
  int64_t save_hf_steps = 0;
  // Those folders' shards: huggingface_hub's max_shard_size ("5GB": powers of 1000, "2GiB").
  std::string max_shard_size = "5GB";
  int64_t seed = 42;
  // auto (a GPU when one is visible, else the CPU), cpu, cuda (the GPU LOCAL_RANK names) or
  // cuda:N (every rank of the node on GPU N). HF's --use_cpu is --device cpu.
  std::string device = "auto";
  bool bf16 = false;
  bool fp16 = false;
  bool gradient_checkpointing = false;
  int64_t dataloader_num_workers = 0;     // 0: load in the training thread
  bool dataloader_drop_last = false;
  std::string resume_from_checkpoint;     // a checkpoint-<step> folder, or "true": the newest in output_dir
  // SIGTERM or SIGUSR1 on any rank: every rank finishes the step, saves a checkpoint and the
  // run ends with Preempted (exit 143). Default: on when output_dir is set; true needs it.
  std::optional<bool> save_on_signal;
  // Checkpoints written in the background (fills checkpoint.async_save; a config that sets
  // it false is a mismatch). HF has no such argument.
  bool save_async = false;
  std::vector<std::string> report_to;     // "tensorboard", "csv", "jsonl" (HF's default is none)
  bool disable_tqdm = false;              // no progress bar
  // Early stopping (HF's EarlyStoppingCallback; 0: off) and the metric it watches.
  int64_t early_stopping_patience = 0;
  double early_stopping_threshold = 0.0;
  std::string metric_for_best_model = "loss";
  std::optional<bool> greater_is_better;  // default: false for a loss, true otherwise
};

// HF's strategy names: "no", "steps", "epoch". Throws UsageError naming the flag.
IntervalStrategy parse_strategy(const std::string& text, const std::string& flag);
const char* to_string(IntervalStrategy strategy);

// Every range check HF makes, and the ones it should: throws one UsageError naming each bad
// argument and how to fix it.
void check(const TrainingArguments& args);

// The arguments that fill a ds_config's "auto" values.
config::TrainerArgs to_trainer_args(const TrainingArguments& args, int64_t world_size,
                                    std::optional<int64_t> hidden_size, int64_t num_training_steps);

}  // namespace zerotrain
