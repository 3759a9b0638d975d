// The DeepSpeed config a Trainer runs with. HF's Trainer trains without DeepSpeed too (DDP);
// so does this one: without --deepspeed the config is HF's DDP run in DeepSpeed's words,
// every batch, clipping and precision value "auto" (filled from the arguments as any "auto"
// is) at ZeRO stage 0. --zero_stage picks a stage without writing a file; with a file it
// fills a stage the file leaves out, and must agree with one it sets (HF's rule for every
// value that is not "auto").
#pragma once

#include "zerotrain/config/config.h"
#include "zerotrain/trainer/training_arguments.h"

namespace zerotrain::trainer {

// Throws ConfigError for a bad file, UsageError when --zero_stage and the file disagree.
Config trainer_config(const TrainingArguments& args);

// Writes <output_dir>/effective_config.json (the config as the engine runs it, with each
// value's source: config/effective.h), whole or not at all; makes output_dir if need be.
// The Trainer writes it when the run saves checkpoints there. Throws IoError.
void write_effective_config(const Config& config, const std::string& output_dir);

}  // namespace zerotrain::trainer
