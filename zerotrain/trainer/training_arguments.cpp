#include "zerotrain/trainer/training_arguments.h"

#include <cmath>

#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/trainer/device.h"

namespace zerotrain {

IntervalStrategy parse_strategy(const std::string& text, const std::string& flag) {
  if (text == "no") return IntervalStrategy::kNo;
  if (text == "steps") return IntervalStrategy::kSteps;
  if (text == "epoch") return IntervalStrategy::kEpoch;
  throw UsageError(detail::str(flag, " ", text, ": give no, steps or epoch"));
}

const char* to_string(IntervalStrategy strategy) {
  switch (strategy) {
    case IntervalStrategy::kNo: return "no";
    case IntervalStrategy::kSteps: return "steps";
    case IntervalStrategy::kEpoch: return "epoch";
  }
  return "?";
}

void check(const TrainingArguments& a) {
  std::vector<std::string> problems;
  auto need = [&](bool ok, std::string what) {
    if (!ok) problems.push_back(std::move(what));
  };
  need(!a.zero_stage || (*a.zero_stage >= 0 && *a.zero_stage <= 3),
       detail::str("--zero_stage ", a.zero_stage.value_or(0), ": give a ZeRO stage from 0 to 3"));
  need(a.per_device_eval_batch_size > 0,
       detail::str("--per_device_eval_batch_size ", a.per_device_eval_batch_size, ": must be at least 1"));
  need(std::isfinite(a.num_train_epochs) && a.num_train_epochs > 0,
       detail::str("--num_train_epochs ", a.num_train_epochs, ": must be above 0 (or give --max_steps)"));
  need(a.max_steps == -1 || a.max_steps > 0,
       detail::str("--max_steps ", a.max_steps, ": must be at least 1, or -1 to train --num_train_epochs"));
  need(a.logging_steps > 0, detail::str("--logging_steps ", a.logging_steps, ": must be at least 1"));
  need(!a.save_on_signal.value_or(false) || !a.output_dir.empty(),
       "--save_on_signal saves a checkpoint into --output_dir: give --output_dir DIR (or --save_on_signal=false)");
  need(!a.eval_steps || *a.eval_steps > 0, detail::str("--eval_steps ", a.eval_steps.value_or(0), ": must be at least 1"));
  need(a.save_steps >= 0, detail::str("--save_steps ", a.save_steps, ": must be at least 0 (0 saves no checkpoint)"));
  need(a.save_total_limit >= 0,
       detail::str("--save_total_limit ", a.save_total_limit, ": must be at least 0 (0 keeps every checkpoint)"));
  need(a.save_hf_steps >= 0,
       detail::str("--save_hf_steps ", a.save_hf_steps, ": must be at least 0 (0 writes no model folder during training)"));
  need(a.save_hf_steps == 0 || !a.output_dir.empty(),
       "--save_hf_steps writes <output_dir>/hf-<step>/: give --output_dir DIR (or --save_hf_steps 0)");
  try {
    const int64_t shard_bytes = strings::parse_bytes(a.max_shard_size, "--max_shard_size");
    need(shard_bytes >= 1, "--max_shard_size " + a.max_shard_size + ": must be at least 1 byte, such as 5GB (the default)");
  } catch (const UsageError& e) {
    problems.push_back(e.message());
  }
  need(a.dataloader_num_workers >= 0 && a.dataloader_num_workers <= 64,
       detail::str("--dataloader_num_workers ", a.dataloader_num_workers, ": give 0 (load in the training thread) to 64"));
  need(a.early_stopping_patience >= 0,
       detail::str("--early_stopping_patience ", a.early_stopping_patience, ": must be at least 0 (0: off)"));
  need(std::isfinite(a.early_stopping_threshold) && a.early_stopping_threshold >= 0,
       detail::str("--early_stopping_threshold ", a.early_stopping_threshold, ": must be a finite number, at least 0"));
  need(a.early_stopping_patience == 0 || a.eval_strategy != IntervalStrategy::kNo,
       "--early_stopping_patience needs evaluations: give --eval_strategy steps or epoch");
  need(!(a.bf16 && a.fp16), "--bf16 and --fp16: give one of them");
  try {
    trainer::check_device_flag(a.device);
  } catch (const UsageError& e) {
    problems.push_back(e.message());
  }
  for (const auto& r : a.report_to) {
    need(r == "tensorboard" || r == "csv" || r == "jsonl" || r == "none" || r == "all",
         detail::str("--report_to ", r, ": give tensorboard, csv, jsonl, all (= tensorboard) or none; several may be ",
                     "given. HF's other integrations (wandb, mlflow, ...) are not in zerotrain"));
  }
  if (!problems.empty()) {
    std::string text = problems.size() == 1 ? problems.front() : "the training arguments have problems:";
    if (problems.size() > 1) {
      for (const auto& p : problems) text += "\n  - " + p;
    }
    throw UsageError(text);
  }
  // The arguments that fill config keys (the batch sizes, the optimizer's, the warmup, the
  // seed) are checked as those keys are in a ds_config, by the config's reader: a zero
  // --per_device_train_batch_size is refused as "train_micro_batch_size_per_gpu": 0 is.
  // Before the Trainer plans the run's length from them, so no division sees a zero.
  // (World size 1 and one step: the real ones are checked as the Trainer resolves the config.)
  config::check_trainer_args(to_trainer_args(a, 1, std::nullopt, 1));
}

config::TrainerArgs to_trainer_args(const TrainingArguments& a, int64_t world_size, std::optional<int64_t> hidden_size,
                                    int64_t num_training_steps) {
  config::TrainerArgs t;
  t.world_size = world_size;
  t.per_device_train_batch_size = a.per_device_train_batch_size;
  t.gradient_accumulation_steps = a.gradient_accumulation_steps;
  t.max_grad_norm = a.max_grad_norm;
  t.learning_rate = a.learning_rate;
  t.adam_beta1 = a.adam_beta1;
  t.adam_beta2 = a.adam_beta2;
  t.adam_epsilon = a.adam_epsilon;
  t.weight_decay = a.weight_decay;
  t.fp16 = a.fp16;
  t.bf16 = a.bf16;
  t.save_async = a.save_async;
  t.warmup_steps = a.warmup_steps;
  t.warmup_ratio = a.warmup_ratio;
  t.seed = a.seed;
  t.num_training_steps = num_training_steps;
  t.hidden_size = hidden_size;
  return t;
}

}  // namespace zerotrain
