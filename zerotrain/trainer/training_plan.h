// How long a run is: micro-batches and optimizer steps per epoch, the steps and epochs of
// the run and the samples it trains on, from the TrainingArguments, the dataset's size and
// the world size, as HF's Trainer counts them (set_initial_training_values). Every quantity
// is computed in checked 64-bit arithmetic: a value that does not fit, or a run of no step,
// is a UsageError naming the flags that make it, never a wrapped or clamped number.
#pragma once

#include <cstdint>

#include "zerotrain/trainer/training_arguments.h"

namespace zerotrain::trainer {

struct TrainingPlan {
  int64_t batches_per_epoch = 0;   // micro-batches per rank per epoch (len(dataloader))
  int64_t steps_per_epoch = 0;     // optimizer steps per epoch: batches_per_epoch // accumulation
  int64_t max_steps = 0;           // optimizer steps of the run (at least 1)
  int64_t num_train_epochs = 0;    // epochs the loop enters (the last may stop at max_steps)
  int64_t global_batch = 0;        // samples per step: micro-batch * accumulation * world size
  int64_t train_samples = 0;       // max_steps * global_batch
};

// Throws UsageError when an epoch holds no micro-batch (--dataloader_drop_last), fewer
// micro-batches than one step accumulates (the leftover micro-batches of an epoch are not
// trained on, so such an epoch would have no step), or when a count overflows 64 bits.
// `args` must have passed check().
TrainingPlan plan_training(const TrainingArguments& args, int64_t dataset_size, int64_t world_size);

// ceil(numerator / denominator) for numerator >= 0 and denominator > 0, without the
// overflow of (numerator + denominator - 1) / denominator.
int64_t ceil_div(int64_t numerator, int64_t denominator);

}  // namespace zerotrain::trainer
