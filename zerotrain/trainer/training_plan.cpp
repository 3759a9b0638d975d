#include "zerotrain/trainer/training_plan.h"

#include <cmath>

#include "zerotrain/core/error.h"
#include "zerotrain/data/sampler.h"

namespace zerotrain::trainer {
namespace {

using detail::str;

// 2^63 as a double: a double below it converts to int64_t exactly; one at or above it is
// undefined behaviour to convert (in practice INT64_MIN: a negative count of steps).
constexpr double kTwoTo63 = 9223372036854775808.0;

// The flags that make the global batch, with their values, for messages.
std::string batch_flags(const TrainingArguments& a, int64_t world_size) {
  return str("--per_device_train_batch_size ", a.per_device_train_batch_size, " x --gradient_accumulation_steps ",
             a.gradient_accumulation_steps, " x world size ", world_size);
}

}  // namespace

int64_t ceil_div(int64_t numerator, int64_t denominator) {
  ZT_INTERNAL_ASSERT(numerator >= 0 && denominator > 0, "ceil_div(", numerator, ", ", denominator, ")");
  return numerator / denominator + (numerator % denominator != 0 ? 1 : 0);
}

TrainingPlan plan_training(const TrainingArguments& a, int64_t dataset_size, int64_t world_size) {
  const int64_t micro = a.per_device_train_batch_size, accumulation = a.gradient_accumulation_steps;
  // check() refuses these first, with the config's words; kept here so that no caller that
  // skipped it divides by zero.
  ZT_CHECK(micro >= 1, UsageError, "--per_device_train_batch_size ", micro, ": must be at least 1");
  ZT_CHECK(accumulation >= 1, UsageError, "--gradient_accumulation_steps ", accumulation, ": must be at least 1");
  TrainingPlan plan;
  ZT_CHECK(!__builtin_mul_overflow(micro, accumulation, &plan.global_batch) &&
               !__builtin_mul_overflow(plan.global_batch, world_size, &plan.global_batch),
           UsageError, batch_flags(a, world_size),
           " (the global batch) does not fit in a 64-bit integer; use smaller values");

  const data::DistributedSampler sampler(
      dataset_size, {.num_replicas = world_size, .rank = 0, .shuffle = false, .drop_last = a.dataloader_drop_last});
  const int64_t per_rank = sampler.num_samples();
  plan.batches_per_epoch = a.dataloader_drop_last ? per_rank / micro : ceil_div(per_rank, micro);
  ZT_CHECK(plan.batches_per_epoch > 0, UsageError, "the training set has ", dataset_size, " samples: ", per_rank,
           " per rank at world size ", world_size, ", ",
           a.dataloader_drop_last ? str("fewer than one --per_device_train_batch_size (", micro,
                                        ") with --dataloader_drop_last; give a smaller batch or drop the flag")
                                  : std::string("no batch to train on; give a dataset with samples"));

  // HF counts len(dataloader) // gradient_accumulation_steps steps; the micro-batches left
  // over are not trained on (docs/trainer.md), so an epoch shorter than one step has none.
  plan.steps_per_epoch = plan.batches_per_epoch / accumulation;
  ZT_CHECK(plan.steps_per_epoch > 0, UsageError, "--gradient_accumulation_steps ", accumulation,
           ": one optimizer step accumulates ", accumulation, " micro-batches, but an epoch has only ",
           plan.batches_per_epoch, " per rank (", dataset_size, " samples at world size ", world_size,
           " in batches of --per_device_train_batch_size ", micro, "); give --gradient_accumulation_steps ",
           plan.batches_per_epoch, " or less, a smaller --per_device_train_batch_size, or more samples");

  if (a.max_steps > 0) {
    plan.max_steps = a.max_steps;
    plan.num_train_epochs = ceil_div(a.max_steps, plan.steps_per_epoch);
  } else {
    // NaN and infinity fail the comparison, as a count of 2^63 or more does.
    const double steps = std::ceil(a.num_train_epochs * static_cast<double>(plan.steps_per_epoch));
    ZT_CHECK(steps >= 1 && steps < kTwoTo63, UsageError, "--num_train_epochs ", a.num_train_epochs, " x ",
             plan.steps_per_epoch, " steps per epoch = ", steps,
             " optimizer steps: give a number of epochs that makes 1 to 2^63-1 steps, or --max_steps");
    plan.max_steps = static_cast<int64_t>(steps);
    // At most max_steps (steps_per_epoch >= 1), so it fits too.
    plan.num_train_epochs = static_cast<int64_t>(std::ceil(a.num_train_epochs));
  }
  ZT_CHECK(plan.max_steps >= 1, UsageError, "--max_steps ", a.max_steps,
           ": the run would train no step; give 1 or more");

  // The samples counter (the engine's global_samples) must not wrap before the last step.
  ZT_CHECK(!__builtin_mul_overflow(plan.max_steps, plan.global_batch, &plan.train_samples), UsageError,
           a.max_steps > 0 ? str("--max_steps ", a.max_steps)
                           : str("--num_train_epochs ", a.num_train_epochs, " (", plan.max_steps, " steps)"),
           " x the global batch ", plan.global_batch, " (", batch_flags(a, world_size),
           ") is more samples than a 64-bit counter holds; give fewer steps");
  return plan;
}

}  // namespace zerotrain::trainer
