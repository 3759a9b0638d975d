// The Trainer's numbers before any arithmetic (check()) and the run's length from them
// (plan_training): zero, negative and huge values, and products that overflow 64 bits, are
// errors that name the flags; no count wraps, is clamped or comes out as a run of no step.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "zerotrain/core/error.h"
#include "zerotrain/trainer/training_arguments.h"
#include "zerotrain/trainer/training_plan.h"

namespace zerotrain {
namespace {

using trainer::plan_training;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TrainingArguments base() {
  TrainingArguments a;
  a.deepspeed = "ds_config.json";
  return a;
}

// The message of the error `fn` throws, which must be of type E.
template <class E, class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "another error type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

#define EXPECT_HAS(text, needle) EXPECT_NE((text).find(needle), std::string::npos) << (text)

// --- check(): each value, by the config's reader where it fills a config key -----------------

TEST(TrainingArgumentsCheck, BatchSizesAndAccumulationBelowOneAreRefusedAsTheConfigRefusesThem) {
  for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{-8}, std::numeric_limits<int64_t>::min()}) {
    TrainingArguments a = base();
    a.per_device_train_batch_size = bad;
    const std::string m = error_of<ConfigError>([&] { check(a); });
    EXPECT_HAS(m, "train_micro_batch_size_per_gpu");
    EXPECT_HAS(m, "--per_device_train_batch_size");

    TrainingArguments g = base();
    g.gradient_accumulation_steps = bad;
    const std::string mg = error_of<ConfigError>([&] { check(g); });
    EXPECT_HAS(mg, "--gradient_accumulation_steps");

    TrainingArguments e = base();
    e.per_device_eval_batch_size = bad;
    EXPECT_HAS(error_of<UsageError>([&] { check(e); }), "--per_device_eval_batch_size");
  }
}

TEST(TrainingArgumentsCheck, ABatchProductBeyond64BitsIsRefused) {
  TrainingArguments a = base();
  a.per_device_train_batch_size = int64_t{1} << 40;
  a.gradient_accumulation_steps = int64_t{1} << 30;
  const std::string m = error_of<ConfigError>([&] { check(a); });
  EXPECT_HAS(m, "--per_device_train_batch_size * --gradient_accumulation_steps");
}

TEST(TrainingArgumentsCheck, NumbersThatAreNotFiniteOrOutOfRangeAreNamed) {
  const double nan = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    void (*set)(TrainingArguments&);
    const char* flag;
  };
  const Case cases[] = {
      {[](TrainingArguments& a) { a.learning_rate = std::nan(""); }, "--learning_rate"},
      {[](TrainingArguments& a) { a.learning_rate = -1; }, "--learning_rate"},
      {[](TrainingArguments& a) { a.adam_beta2 = std::numeric_limits<double>::infinity(); },
       "--adam_beta1 and --adam_beta2"},
      {[](TrainingArguments& a) { a.warmup_steps = -5; }, "--warmup_steps"},
      {[](TrainingArguments& a) { a.warmup_ratio = 2; }, "--warmup_ratio"},
      {[](TrainingArguments& a) { a.seed = int64_t{1} << 40; }, "--seed"},
      {[](TrainingArguments& a) { a.max_grad_norm = std::nan(""); }, "--max_grad_norm"},
  };
  for (const Case& c : cases) {
    TrainingArguments a = base();
    c.set(a);
    EXPECT_HAS(error_of<ConfigError>([&] { check(a); }), c.flag);
  }
  for (double bad : {nan, inf, -0.5}) {
    TrainingArguments a = base();
    a.early_stopping_threshold = bad;
    EXPECT_HAS(error_of<UsageError>([&] { check(a); }), "--early_stopping_threshold");
    a = base();
    a.num_train_epochs = bad;
    EXPECT_HAS(error_of<UsageError>([&] { check(a); }), "--num_train_epochs");
  }
  for (int64_t bad : {int64_t{0}, int64_t{-2}, std::numeric_limits<int64_t>::min()}) {
    TrainingArguments a = base();
    a.max_steps = bad;
    EXPECT_HAS(error_of<UsageError>([&] { check(a); }), "--max_steps");
  }
}

// --- plan_training: the run's length -------------------------------------------------------

TEST(TrainingPlan, CountsAsHfDoes) {
  TrainingArguments a = base();
  a.per_device_train_batch_size = 8;
  a.gradient_accumulation_steps = 2;
  a.num_train_epochs = 2;
  // 100 samples on 2 ranks: 50 each, 7 micro-batches (the last of 2), 3 steps of 2.
  auto plan = plan_training(a, 100, 2);
  EXPECT_EQ(plan.batches_per_epoch, 7);
  EXPECT_EQ(plan.steps_per_epoch, 3);
  EXPECT_EQ(plan.max_steps, 6);
  EXPECT_EQ(plan.num_train_epochs, 2);
  EXPECT_EQ(plan.global_batch, 32);
  EXPECT_EQ(plan.train_samples, 6 * 32);
  a.max_steps = 5;
  plan = plan_training(a, 100, 2);
  EXPECT_EQ(plan.max_steps, 5);
  EXPECT_EQ(plan.num_train_epochs, 2);
  // Accumulation equal to the epoch's batches: one step per epoch.
  a.gradient_accumulation_steps = 7;
  EXPECT_EQ(plan_training(a, 100, 2).steps_per_epoch, 1);
  // A tiny fraction of an epoch is one step, never none.
  a.max_steps = -1;
  a.num_train_epochs = 1e-300;
  plan = plan_training(a, 100, 2);
  EXPECT_EQ(plan.max_steps, 1);
  EXPECT_EQ(plan.num_train_epochs, 1);
}

TEST(TrainingPlan, AccumulationLongerThanAnEpochIsRefusedWithTheBatchCount) {
  struct Case {
    int64_t samples, world, micro, accumulation, batches;
  };
  for (const Case& c : {Case{4, 1, 2, 4, 2}, Case{100, 2, 8, 8, 7}, Case{10, 1, 1, kMax, 10}, Case{1, 4, 1, 2, 1}}) {
    TrainingArguments a = base();
    a.per_device_train_batch_size = c.micro;
    a.gradient_accumulation_steps = c.accumulation;
    const std::string m = error_of<UsageError>([&] { plan_training(a, c.samples, c.world); });
    EXPECT_HAS(m, "--gradient_accumulation_steps " + std::to_string(c.accumulation));
    EXPECT_HAS(m, "an epoch has only " + std::to_string(c.batches) + " per rank");
  }
}

TEST(TrainingPlan, AnEpochWithoutABatchIsRefused) {
  TrainingArguments a = base();
  a.per_device_train_batch_size = 16;
  a.dataloader_drop_last = true;
  EXPECT_HAS(error_of<UsageError>([&] { plan_training(a, 20, 2); }), "--dataloader_drop_last");
  a.dataloader_drop_last = false;
  EXPECT_HAS(error_of<UsageError>([&] { plan_training(a, 0, 1); }), "the training set has 0 samples");
}

TEST(TrainingPlan, StepCountsNear64BitsNeitherWrapNorPlanNoStep) {
  TrainingArguments a = base();
  a.per_device_train_batch_size = 1;
  // --max_steps 2^63-1 once planned (max_steps + steps_per_epoch - 1) / steps_per_epoch < 0
  // epochs: a run of no step that exited 0.
  for (int64_t steps : {kMax, kMax - 1, kMax - 100}) {
    a.max_steps = steps;
    const auto plan = plan_training(a, 10, 1);
    EXPECT_EQ(plan.max_steps, steps);
    EXPECT_EQ(plan.num_train_epochs, trainer::ceil_div(steps, 10));
    EXPECT_GT(plan.num_train_epochs, 0);
  }
  // With a batch of 2 the samples counter would wrap.
  a.per_device_train_batch_size = 2;
  a.max_steps = kMax / 2 + 1;
  const std::string m = error_of<UsageError>([&] { plan_training(a, 10, 1); });
  EXPECT_HAS(m, "--max_steps");
  EXPECT_HAS(m, "--per_device_train_batch_size 2");
  EXPECT_HAS(m, "64-bit");
}

TEST(TrainingPlan, EpochsThatMakeMoreThan2To63StepsAreRefused) {
  TrainingArguments a = base();
  a.per_device_train_batch_size = 1;
  for (double epochs : {1e300, 1e18, std::numeric_limits<double>::max()}) {
    a.num_train_epochs = epochs;
    const std::string m = error_of<UsageError>([&] { plan_training(a, 100, 1); });
    EXPECT_HAS(m, "--num_train_epochs");
  }
  a.num_train_epochs = 1e15;   // 1e17 steps (and samples): fit
  EXPECT_EQ(plan_training(a, 100, 1).max_steps, int64_t{100'000'000'000'000'000});
}

TEST(TrainingPlan, AGlobalBatchBeyond64BitsAtTheWorldSizeIsRefused) {
  TrainingArguments a = base();
  a.per_device_train_batch_size = int64_t{1} << 61;
  a.gradient_accumulation_steps = 1;
  a.max_steps = 1;
  EXPECT_EQ(plan_training(a, 10, 2).global_batch, int64_t{1} << 62);   // one batch per rank
  const std::string m = error_of<UsageError>([&] { plan_training(a, 10, 4); });
  EXPECT_HAS(m, "world size 4");
  EXPECT_HAS(m, "does not fit in a 64-bit integer");
  // A micro-batch of 2^63-1 is one batch of the samples there are, not a negative count.
  a.per_device_train_batch_size = kMax;
  const auto plan = plan_training(a, 10, 1);
  EXPECT_EQ(plan.batches_per_epoch, 1);
  EXPECT_EQ(plan.steps_per_epoch, 1);
}

TEST(TrainingPlan, CeilDivDoesNotOverflow) {
  EXPECT_EQ(trainer::ceil_div(0, 3), 0);
  EXPECT_EQ(trainer::ceil_div(7, 3), 3);
  EXPECT_EQ(trainer::ceil_div(9, 3), 3);
  EXPECT_EQ(trainer::ceil_div(kMax, kMax), 1);
  EXPECT_EQ(trainer::ceil_div(10, kMax), 1);
  EXPECT_EQ(trainer::ceil_div(kMax, 2), kMax / 2 + 1);
}

}  // namespace
}  // namespace zerotrain
