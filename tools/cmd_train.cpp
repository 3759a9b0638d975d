// `zerotrain train`: the Trainer's command-line face (docs/trainer.md). One flag per field of
// TrainingArguments, spelled as HF's, plus the built-in model and dataset; under `zerotrain
// launch` for several ranks. Numbers are read as the config reads them (tools/number_flags.h),
// values pass the same checks as the C++ API's (the Trainer runs them), and "auto" values in
// the DeepSpeed config are filled from them as HF's Trainer does.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/number_flags.h"
#include "tools/tokenized_data.h"
#include "tools/train_data.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/models/models.h"
#include "zerotrain/text/tokenizer.h"
#include "zerotrain/trainer/trainer.h"

namespace zerotrain::tools {
namespace {

struct TrainOptions {
  std::string model = "gpt";
  std::string model_config;
  TrainDataOptions data{.spec = "synthetic"};
  TrainingArguments args;
  std::string eval_strategy = "no", save_strategy = "steps";
  std::string metrics_file;
  std::string log_level = "passive";
  int local_rank = -1;   // DeepSpeed's launcher appends --local_rank=N
  bool skip_memory_check = false;
  bool bf16_if_native = false;
  bool save_steps_given = false;
  bool save_on_signal = true;
};

// DeepSpeed's launcher passes --local_rank=N, and torchrun's environment LOCAL_RANK; when
// both are there they must agree (a script given the wrong one would use another's device).
void check_local_rank(int given) {
  ZT_CHECK(given >= -1, UsageError, "--local_rank ", given,
           ": must be at least 0 (the launcher sets it; -1: not given)");
  if (given < 0) return;
  const auto from_env = env::get_int("LOCAL_RANK");
  ZT_CHECK(!from_env || *from_env == given, UsageError, "--local_rank=", given, " but LOCAL_RANK=", *from_env,
           " in the environment; drop the flag or launch with a launcher that sets both alike");
}

// The folder written back at the end goes into --output_dir: that must not be the folder
// being fine-tuned (its weights would be replaced, and a failed write would lose them), which
// is refused before anything trains rather than at the end.
void check_output_is_not_the_model(const TrainOptions& o) {
  if (!is_hf_model(o.model) || o.args.output_dir.empty()) return;
  std::error_code ec;
  const std::filesystem::path model_dir = o.model.substr(3);
  ZT_CHECK(!std::filesystem::equivalent(o.args.output_dir, model_dir, ec), UsageError, "--output_dir ",
           o.args.output_dir, " is the model folder of --model ", o.model, ": the folder written back at the end would "
           "replace the weights being fine-tuned; give another --output_dir");
}

// A --tokenizer folder's files, which the model folders written back carry in place of the
// model's own (the tokenizer they were fine-tuned with).
std::vector<std::filesystem::path> tokenizer_files(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  if (dir.empty()) return files;
  for (const char* name : text::kTokenizerFiles) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(std::filesystem::path(dir) / name, ec)) files.emplace_back(std::filesystem::path(dir) / name);
  }
  return files;
}

int run_train(TrainOptions o) {
  log::set_level(o.log_level);
  check_local_rank(o.local_rank);
  o.args.eval_strategy = parse_strategy(o.eval_strategy, "--eval_strategy");
  o.args.save_strategy = parse_strategy(o.save_strategy, "--save_strategy");
  // A save interval without a place to save is a mistake, not "never" (HF needs an output_dir).
  ZT_CHECK(!o.save_steps_given || o.args.save_steps == 0 || !o.args.output_dir.empty(), UsageError, "--save_steps ",
           o.args.save_steps, " saves checkpoints into --output_dir: give --output_dir DIR (or --save_steps 0 to save none)");
  check(o.args);   // before the data and the communicator: a typo costs nothing
  check_output_is_not_the_model(o);
  o.data.model = o.model;
  o.data.model_config = o.model_config;
  o.data.seed = o.args.seed;
  o.data.needs_eval = o.args.eval_strategy != IntervalStrategy::kNo;
  TrainData data = open_train_data(o.data);
  const models::DataShape shape = data.shape;
  ModelSpec spec{.build = [o, shape] { return models::make_model(o.model, o.model_config, shape); },
                 .hidden_size = models::hidden_size_of(o.model, o.model_config, shape),
                 .shape = models::shape_of(o.model, o.model_config, shape)};
  Trainer trainer(o.args, std::move(spec), {.train = data.train, .eval = data.eval},
                  {.metrics_file = o.metrics_file,
                   .bf16_if_native = o.bf16_if_native,
                   .check_memory = !o.skip_memory_check,
                   .hf_tokenizer_files = tokenizer_files(o.data.tokenizer)});
  trainer.train();
  return 0;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  TrainingArguments& a = o->args;
  CLI::App* cmd = app.add_subcommand("train", "Train a built-in model (convnet, mlp, gpt) or fine-tune a Hugging Face folder (hf:DIR) with a DeepSpeed config");
  cmd->add_option("--model", o->model,
                  "convnet, mlp, gpt, or hf:DIR: a Hugging Face model folder to fine-tune (GPT-2, Llama, Mistral, "
                  "Qwen2; docs/finetune.md)")
      ->capture_default_str();
  cmd->add_option("--model_config", o->model_config,
                  "preset=NAME,key=value,... (gpt: tiny, small, gpt2; mlp: tiny, small; convnet: small, tiny); "
                  "hf:DIR: block_size=N only");
  cmd->add_option("--dataset", o->data.spec,
                  "fashion-mnist, cifar10:PATH, mnist:PATH, text:PATH, kjv or synthetic; with --model hf:DIR, "
                  "jsonl:PATH or text:PATH, tokenised")
      ->capture_default_str();
  cmd->add_option("--tokenizer", o->data.tokenizer,
                  "--model hf:DIR: the folder whose tokenizer.json tokenises the data (default: DIR)");
  add_number_flag(*cmd, "--max_train_samples", o->data.max_train_samples,
                  "Train on the first N samples only (0: all)");
  add_number_flag(*cmd, "--max_eval_samples", o->data.max_eval_samples,
                  "Evaluate on the first N samples only (0: all)");
  cmd->add_option("--deepspeed", a.deepspeed,
                  "The DeepSpeed config (ds_config.json); without it, every value \"auto\" at ZeRO stage 0 (HF's run "
                  "without DeepSpeed)");
  add_number_flag(*cmd, "--zero_stage", a.zero_stage,
                  "The ZeRO stage (0-3) without writing a config; with --deepspeed it fills an absent "
                  "zero_optimization.stage and must match a written one");
  cmd->add_option("--output_dir", a.output_dir,
                  "Where checkpoints go: DIR/checkpoint-<step>/ (the engine's save dir: global_step<step>/, latest)");
  cmd->add_flag("--overwrite_output_dir", a.overwrite_output_dir,
                "Replace checkpoint-<step> folders of an earlier run in --output_dir and an existing --metrics_file "
                "(refused without it)");
  add_number_flag(*cmd, "--per_device_train_batch_size", a.per_device_train_batch_size);
  add_number_flag(*cmd, "--per_device_eval_batch_size", a.per_device_eval_batch_size);
  add_number_flag(*cmd, "--gradient_accumulation_steps", a.gradient_accumulation_steps);
  add_number_flag(*cmd, "--learning_rate", a.learning_rate);
  add_number_flag(*cmd, "--weight_decay", a.weight_decay);
  add_number_flag(*cmd, "--adam_beta1", a.adam_beta1);
  add_number_flag(*cmd, "--adam_beta2", a.adam_beta2);
  add_number_flag(*cmd, "--adam_epsilon", a.adam_epsilon);
  add_number_flag(*cmd, "--max_grad_norm", a.max_grad_norm);
  add_number_flag(*cmd, "--num_train_epochs", a.num_train_epochs);
  add_number_flag(*cmd, "--max_steps", a.max_steps,
                  "Train this many optimizer steps (overrides --num_train_epochs; -1: off)");
  cmd->add_option("--lr_scheduler_type", a.lr_scheduler_type,
                  "linear, cosine, constant_with_warmup or constant (used when the config has no scheduler block)")
      ->capture_default_str();
  add_number_flag(*cmd, "--warmup_steps", a.warmup_steps);
  add_number_flag(*cmd, "--warmup_ratio", a.warmup_ratio);
  add_number_flag(*cmd, "--logging_steps", a.logging_steps);
  cmd->add_flag("--logging_first_step", a.logging_first_step, "Log the first step too");
  cmd->add_option("--logging_dir", a.logging_dir, "Where --report_to writes (default: <output_dir>/runs/<time>_<host>)");
  cmd->add_option("--eval_strategy", o->eval_strategy, "no, steps or epoch")->capture_default_str();
  add_number_flag(*cmd, "--eval_steps", a.eval_steps,
                  "Evaluate every N steps with --eval_strategy steps (default: --logging_steps)");
  cmd->add_option("--save_strategy", o->save_strategy, "no, steps or epoch (saves need --output_dir)")->capture_default_str();
  auto* save_steps =
      add_number_flag(*cmd, "--save_steps", a.save_steps, "Save a checkpoint every N optimizer steps (0: never)");
  cmd->add_flag("--save_async", a.save_async,
                "Write checkpoints in the background from a snapshot of the state: training waits only for the copy "
                "(fills checkpoint.async_save)");
  add_number_flag(*cmd, "--save_total_limit", a.save_total_limit,
                  "Keep the newest N checkpoint-<step> folders, deleting older ones after each save (0: keep all)");
  add_number_flag(*cmd, "--save_hf_steps", a.save_hf_steps,
                  "--model hf:DIR: write the model as a Hugging Face folder into <output_dir>/hf-<step>/ every N "
                  "optimizer steps (0: only the final one, into <output_dir>)");
  cmd->add_option("--max_shard_size", a.max_shard_size,
                  "The largest safetensors file of those folders; past it, shards and an index (5GB, 500MB, 2GiB)")
      ->capture_default_str();
  cmd->add_option("--resume_from_checkpoint", a.resume_from_checkpoint,
                  "Continue from a checkpoint-<step> folder (any world size, stage, dtype), or `true`: the newest "
                  "complete one in --output_dir");
  add_number_flag(*cmd, "--seed", a.seed);
  auto* device = cmd->add_option("--device", a.device,
                                 "auto (a GPU when one is visible), cpu, cuda (the GPU LOCAL_RANK names) or cuda:N (all "
                                 "ranks of the node on GPU N: gloo only)")
                     ->capture_default_str();
  cmd->add_flag_callback("--use_cpu", [&a] { a.device = "cpu"; }, "HF's spelling of --device cpu")->excludes(device);
  auto* fp16 = cmd->add_flag("--fp16", a.fp16, "Train in fp16 with loss scaling (fills \"fp16\": {\"enabled\": \"auto\"})");
  auto* bf16 = cmd->add_flag("--bf16", a.bf16, "Train in bf16 (fills \"bf16\": {\"enabled\": \"auto\"})")->excludes(fp16);
  cmd->add_flag("--bf16_if_native", o->bf16_if_native,
                "bf16 when this CPU computes it natively (AVX512-BF16 or AMX), fp32 otherwise; the log says which")
      ->excludes(fp16)
      ->excludes(bf16);
  cmd->add_flag("--gradient_checkpointing", a.gradient_checkpointing,
                "Recompute each transformer block in backward instead of keeping its activations (gpt)");
  add_number_flag(*cmd, "--dataloader_num_workers", a.dataloader_num_workers,
                  "Background threads that load batches (0: none)");
  cmd->add_flag("--dataloader_drop_last", a.dataloader_drop_last, "Drop the last incomplete batch of each epoch");
  cmd->add_option("--report_to", a.report_to, "tensorboard, csv, jsonl or none (several may be given)");
  cmd->add_flag("--disable_tqdm", a.disable_tqdm, "No progress bar: one plain line per log");
  add_number_flag(*cmd, "--early_stopping_patience", a.early_stopping_patience,
                  "Stop after N evaluations without improvement of --metric_for_best_model (0: off)");
  add_number_flag(*cmd, "--early_stopping_threshold", a.early_stopping_threshold);
  cmd->add_option("--metric_for_best_model", a.metric_for_best_model)->capture_default_str();
  cmd->add_option("--greater_is_better", a.greater_is_better, "Default: false for a loss, true otherwise");
  cmd->add_option("--metrics_file", o->metrics_file, "Rank 0 writes one JSON object per log, evaluation and epoch here");
  cmd->add_option("--log_level", o->log_level,
                  "debug, info, warning, error, critical or passive (HF's; passive keeps ZEROTRAIN_LOG_LEVEL or info)")
      ->capture_default_str();
  add_number_flag(*cmd, "--local_rank", o->local_rank,
                  "Set by DeepSpeed's launcher (--local_rank=N); must match LOCAL_RANK");
  cmd->add_flag("--skip_memory_check", o->skip_memory_check,
                "Train even when the estimated peak exceeds the memory this host has left");
  auto* save_on_signal = cmd->add_flag(
      "--save_on_signal", o->save_on_signal,
      "On SIGTERM or SIGUSR1 to any rank: finish the step, save a checkpoint, exit 143 (default with --output_dir; "
      "--save_on_signal=false: the signal stops the run at once)");
  return {cmd, [o, save_steps, save_on_signal] {
            o->save_steps_given = save_steps->count() > 0;
            if (save_on_signal->count() > 0) o->args.save_on_signal = o->save_on_signal;
            return run_train(*o);
          }};
}

}  // namespace zerotrain::tools
