// HF-style "auto" resolution (transformers' HfTrainerDeepSpeedConfig semantics).
#include "zerotrain/config/resolve.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "tests/unit/config_test_util.h"
#include "zerotrain/core/error.h"

namespace zerotrain::config {
namespace {

using testing::contains;
using testing::load;

constexpr const char* kAutoConfig = R"({
  "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
  "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                "warmup_num_steps": "auto", "total_num_steps": "auto"}},
  "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                        "stage3_param_persistence_threshold": "auto"}
})";

TEST(ResolveAuto, FillsEveryAutoKeyFromTrainerArguments) {
  Config c = load(kAutoConfig);
  ASSERT_EQ(testing::errors(c), "");
  EXPECT_EQ(c.unresolved_auto_keys().size(), 17u);
  TrainerArgs args{.world_size = 2, .per_device_train_batch_size = 4, .gradient_accumulation_steps = 3,
                   .max_grad_norm = 0.5, .learning_rate = 1e-4, .adam_beta1 = 0.8, .adam_beta2 = 0.95,
                   .adam_epsilon = 1e-6, .weight_decay = 0.1, .bf16 = true, .warmup_ratio = 0.1,
                   .num_training_steps = 1000, .hidden_size = 64};
  resolve_auto(c, args);
  EXPECT_TRUE(c.unresolved_auto_keys().empty());
  EXPECT_EQ(c.train_micro_batch_size_per_gpu.value, 4);
  EXPECT_EQ(c.gradient_accumulation_steps.value, 3);
  EXPECT_EQ(c.train_batch_size.value, 24);
  EXPECT_EQ(c.gradient_clipping.value, 0.5);
  EXPECT_TRUE(c.bf16_enabled());
  EXPECT_FALSE(c.fp16_enabled());
  const auto& adam = std::get<AdamParams>(c.optimizer->params);
  EXPECT_EQ(adam.lr.value, 1e-4);
  EXPECT_EQ(adam.betas.value, (std::array<double, 2>{0.8, 0.95}));
  EXPECT_EQ(adam.eps.value, 1e-6);
  EXPECT_EQ(adam.weight_decay.value, 0.1);
  const auto& sched = std::get<WarmupDecayLRParams>(c.scheduler->params);
  EXPECT_EQ(sched.warmup_min_lr.value, 0.0);
  EXPECT_EQ(sched.warmup_max_lr.value, 1e-4);
  EXPECT_EQ(sched.total_num_steps.value, 1000);
  EXPECT_EQ(sched.warmup_num_steps.value, 100);   // ceil(1000 * 0.1)
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size.value, 64 * 64);
  EXPECT_EQ(c.zero_optimization.prefetch_bucket_size.value, static_cast<int64_t>(0.9 * 64 * 64));
  EXPECT_EQ(c.zero_optimization.param_persistence_threshold.value, 640);
  EXPECT_EQ(c.source_of("optimizer.params.lr"), Source::kAuto);
  finalize(c, 2);   // now consistent: 24 = 4 * 3 * 2
}

TEST(ResolveAuto, ValuesThatDisagreeWithTheTrainerAreAllReported) {
  Config c = load(R"({"train_micro_batch_size_per_gpu": 8, "gradient_clipping": 2.0,
                      "optimizer": {"type": "Adam", "params": {"lr": 0.001}}})");
  try {
    resolve_auto(c, TrainerArgs{.per_device_train_batch_size = 4, .learning_rate = 5e-5});
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "- ds train_micro_batch_size_per_gpu=8 vs hf per_device_train_batch_size=4")) << msg;
    EXPECT_TRUE(contains(msg, "- ds gradient_clipping=2 vs hf max_grad_norm=1")) << msg;
    EXPECT_TRUE(contains(msg, "- ds optimizer.params.lr=0.001 vs hf learning_rate=5e-05")) << msg;
    EXPECT_TRUE(contains(msg, "set these keys to \"auto\"")) << msg;
  }
}

TEST(ResolveAuto, DefaultsAreNotMismatches) {
  // Keys absent from the file keep DeepSpeed's defaults and are not compared (HF does the same).
  Config c = load(R"({"train_micro_batch_size_per_gpu": 8, "optimizer": {"type": "Adam", "params": {}}})");
  EXPECT_NO_THROW(resolve_auto(c, TrainerArgs{.per_device_train_batch_size = 8, .learning_rate = 5e-5}));
}

TEST(ResolveAuto, APrecisionFlagTurnsOnAModeTheConfigDoesNotMention) {
  // HF drops --bf16 when the config has no bf16 block, and DeepSpeed trains in fp32; we don't.
  Config c = load(R"({"train_micro_batch_size_per_gpu": 8})");
  resolve_auto(c, TrainerArgs{.bf16 = true});
  EXPECT_TRUE(c.bf16_enabled());
  EXPECT_EQ(c.source_of("bf16.enabled"), Source::kAuto);
  EXPECT_FALSE(c.fp16_enabled());
  // A block that says false is the user's choice: the flag is a mismatch, as in HF.
  Config off = load(R"({"train_micro_batch_size_per_gpu": 8, "fp16": {"enabled": false}})");
  try {
    resolve_auto(off, TrainerArgs{.fp16 = true});
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "- ds fp16.enabled=false vs hf fp16=true")) << e.what();
  }
}

TEST(Finalize, UnresolvedAutoNamesTheKeyAndItsTrainerArgument) {
  Config c = load(R"({"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "Adam", "params": {"lr": "auto"}}})");
  try {
    finalize(c, 1);
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "train_micro_batch_size_per_gpu: still \"auto\" when the engine starts")) << msg;
    EXPECT_TRUE(contains(msg, "--per_device_train_batch_size")) << msg;
    EXPECT_TRUE(contains(msg, "optimizer.params.lr: still \"auto\"")) << msg;
    EXPECT_TRUE(contains(msg, "--learning_rate")) << msg;
  }
}

TEST(Finalize, Stage3BucketAutosOutsideStage3KeepDefaults) {
  Config c = load(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2, "stage3_prefetch_bucket_size": "auto"}})");
  finalize(c, 1);
  EXPECT_EQ(c.zero_optimization.prefetch_bucket_size.value, 50'000'000);
}

std::string config_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no ConfigError";
}

// Each Trainer argument is checked as the config key it fills is checked in a file, whether
// or not this config has that key (the config here has none of them).
TEST(TrainerArgs, AreCheckedLikeTheKeysTheyFill) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  struct Case {
    TrainerArgs args;
    std::string expected;
  };
  const Case cases[] = {
      {{.learning_rate = -1}, "optimizer.params.lr: must be at least 0, got -1 (filled from --learning_rate)"},
      {{.learning_rate = nan}, "optimizer.params.lr: expected a finite number or \"auto\", got nan"},
      {{.learning_rate = inf}, "scheduler.params.warmup_max_lr: expected a finite number or \"auto\", got inf"},
      {{.max_grad_norm = -0.5}, "gradient_clipping: must be at least 0, got -0.5 (filled from --max_grad_norm)"},
      {{.adam_epsilon = nan}, "optimizer.params.eps: expected a finite number"},
      {{.warmup_steps = -3}, "scheduler.params.warmup_num_steps: must be at least 0, got -3"},
      {{.per_device_train_batch_size = 0}, "train_micro_batch_size_per_gpu: must be at least 1, got 0"},
      {{.gradient_accumulation_steps = -2}, "gradient_accumulation_steps: must be at least 1, got -2"},
      {{.per_device_train_batch_size = int64_t{1} << 62, .gradient_accumulation_steps = 4},
       "--per_device_train_batch_size * --gradient_accumulation_steps does not fit in a 64-bit integer"},
      {{.fp16 = true, .bf16 = true},
       "bf16.enabled: fp16 and bf16 cannot both be enabled (filled from --bf16); enable one of them"},
      {{.warmup_ratio = 1.5}, "--warmup_ratio must lie in range [0,1], got 1.5"},
      {{.seed = -1}, "--seed must be between 0 and 2**32 - 1, got -1"},
      {{.seed = int64_t{1} << 32}, "--seed must be between 0 and 2**32 - 1"},
  };
  for (const auto& c : cases) {
    Config config = load(R"({"train_batch_size": 8})");
    const std::string msg = config_error_of([&] { resolve_auto(config, c.args); });
    EXPECT_TRUE(contains(msg, c.expected)) << "expected: " << c.expected << "\ngot: " << msg;
  }
  Config ok = load(R"({"train_batch_size": 8})");
  EXPECT_NO_THROW(resolve_auto(ok, TrainerArgs{.seed = 0xFFFFFFFF}));
  // The hidden size fills the bucket sizes only where the config says "auto".
  const TrainerArgs huge{.hidden_size = int64_t{1} << 40};
  Config explicit_buckets = load(R"({"train_batch_size": 8, "zero_optimization": {"reduce_bucket_size": 100}})");
  EXPECT_NO_THROW(resolve_auto(explicit_buckets, huge));
  Config auto_buckets = load(R"({"train_batch_size": 8, "zero_optimization": {"reduce_bucket_size": "auto"}})");
  EXPECT_TRUE(contains(config_error_of([&] { resolve_auto(auto_buckets, huge); }),
                       "hidden_size^2 (for reduce_bucket_size) does not fit in a 64-bit integer"));
}

// A value set from C++ after the load passes the reader's checks when the engine starts.
TEST(Finalize, ChecksValuesSetInCodeAsTheReaderWould) {
  Config c = load(R"({"train_batch_size": 8, "gradient_clipping": 1.0,
                      "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}})");
  std::get<AdamParams>(c.optimizer->params).lr.value = std::numeric_limits<double>::quiet_NaN();
  c.gradient_clipping.value = -1;
  const std::string msg = config_error_of([&] { finalize(c, 1); });
  EXPECT_TRUE(contains(msg, "optimizer.params.lr: expected a finite number")) << msg;
  EXPECT_TRUE(contains(msg, "gradient_clipping: must be at least 0, got -1")) << msg;
}

}  // namespace
}  // namespace zerotrain::config
