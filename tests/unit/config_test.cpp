// The config schema: defaults, aliases, deprecated and removed keys, strictness, types,
// ranges, unsupported features, cross-block checks, sources.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

#include "tests/unit/config_test_util.h"
#include "zerotrain/config/effective.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/config/trainer_blocks.h"
#include "zerotrain/core/error.h"

namespace zerotrain::config {
namespace {

using testing::contains;
using testing::errors;
using testing::load;
using testing::unsupported;
using testing::warnings;

TEST(ConfigDefaults, MatchDeepSpeed) {
  Config c = load(R"({"train_batch_size": 8})");
  EXPECT_EQ(errors(c), "");
  EXPECT_FALSE(c.steps_per_print.has_value());          // None since DeepSpeed 0.15.2
  EXPECT_EQ(c.gradient_clipping.value, 1.0);
  EXPECT_EQ(c.zero_optimization.stage, 0);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size.value, 500'000'000);
  EXPECT_EQ(c.zero_optimization.allgather_bucket_size, 500'000'000);
  EXPECT_EQ(c.zero_optimization.prefetch_bucket_size.value, 50'000'000);
  EXPECT_EQ(c.zero_optimization.param_persistence_threshold.value, 100'000);
  EXPECT_EQ(c.zero_optimization.max_live_parameters, 1'000'000'000);
  EXPECT_EQ(c.zero_optimization.sub_group_size, 1'000'000'000);
  EXPECT_TRUE(c.zero_optimization.contiguous_gradients);
  EXPECT_FALSE(c.zero_optimization.offload_optimizer.has_value());
  EXPECT_FALSE(c.zero_optimization.effective_overlap_comm());
  EXPECT_FALSE(c.fp16_enabled());
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_EQ(c.fp16.min_loss_scale, 1.0);
  EXPECT_EQ(c.aio.block_size, 1'048'576);
  EXPECT_EQ(c.aio.queue_depth, 8);
  EXPECT_EQ(c.checkpoint.tag_validation, TagValidation::kWarn);
  EXPECT_FALSE(c.optimizer.has_value());
  EXPECT_EQ(c.source_of("zero_optimization.stage"), Source::kDefault);
  EXPECT_EQ(c.source_of("train_batch_size"), Source::kFile);
}

TEST(ConfigDefaults, OverlapCommDefaultsOnForStage3Only) {
  EXPECT_TRUE(load(R"({"zero_optimization": {"stage": 3}})").zero_optimization.effective_overlap_comm());
  EXPECT_FALSE(load(R"({"zero_optimization": {"stage": 2}})").zero_optimization.effective_overlap_comm());
  EXPECT_TRUE(load(R"({"zero_optimization": {"stage": 2, "overlap_comm": true}})")
                  .zero_optimization.effective_overlap_comm());
}

TEST(ConfigDefaults, OffloadBlockPresentButEmptyHasDefaults) {
  Config c = load(R"({"zero_optimization": {"stage": 3, "offload_param": {}, "offload_optimizer": null}})");
  ASSERT_TRUE(c.zero_optimization.offload_param.has_value());
  EXPECT_EQ(c.zero_optimization.offload_param->device, OffloadDevice::kNone);
  EXPECT_EQ(c.zero_optimization.offload_param->buffer_count, 5);
  EXPECT_FALSE(c.zero_optimization.offload_optimizer.has_value());
}

TEST(ConfigAliases, Stage3SpellingsSetTheSameField) {
  Config c = load(R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 123,
                      "stage3_max_live_parameters": 7, "param_persistence_threshold": 9,
                      "stage3_gather_16bit_weights_on_model_save": true}})");
  EXPECT_EQ(errors(c), "");
  EXPECT_EQ(warnings(c), "");
  EXPECT_EQ(c.zero_optimization.prefetch_bucket_size.value, 123);
  EXPECT_EQ(c.zero_optimization.max_live_parameters, 7);
  EXPECT_EQ(c.zero_optimization.param_persistence_threshold.value, 9);
  EXPECT_TRUE(c.zero_optimization.gather_16bit_weights_on_model_save);
}

TEST(ConfigAliases, BothSpellingsIsAnError) {
  Config c = load(R"({"zero_optimization": {"prefetch_bucket_size": 1, "stage3_prefetch_bucket_size": 2}})");
  EXPECT_TRUE(contains(errors(c), "given twice")) << errors(c);
}

TEST(ConfigDeprecated, CpuOffloadBecomesOffloadOptimizerWithAWarning) {
  Config c = load(R"({"zero_optimization": {"stage": 2, "cpu_offload": true}})");
  EXPECT_EQ(errors(c), "");
  ASSERT_TRUE(c.zero_optimization.offload_optimizer.has_value());
  EXPECT_EQ(c.zero_optimization.offload_optimizer->device, OffloadDevice::kCpu);
  EXPECT_TRUE(contains(warnings(c), "zero_optimization.cpu_offload: deprecated key; use \"offload_optimizer\""))
      << warnings(c);
  Config off = load(R"({"zero_optimization": {"stage": 2, "cpu_offload": false}})");
  EXPECT_FALSE(off.zero_optimization.offload_optimizer.has_value());
}

TEST(ConfigDeprecated, CpuOffloadParamBecomesOffloadParam) {
  Config c = load(R"({"zero_optimization": {"stage": 3, "cpu_offload_param": true}})");
  EXPECT_EQ(errors(c), "");
  ASSERT_TRUE(c.zero_optimization.offload_param.has_value());
  EXPECT_EQ(c.zero_optimization.offload_param->device, OffloadDevice::kCpu);
}

TEST(ConfigDeprecated, DeprecatedAndReplacementTogetherIsAnError) {
  Config c = load(R"({"zero_optimization": {"stage": 2, "cpu_offload": true,
                      "offload_optimizer": {"device": "cpu"}}})");
  EXPECT_TRUE(contains(errors(c), "zero_optimization.cpu_offload: deprecated, and its replacement")) << errors(c);
}

TEST(ConfigDeprecated, RenamedKeysStillWork) {
  Config c = load(R"({"bfloat16": {"enabled": true}, "aio": {"thread_count": 4},
                      "zero_optimization": {"stage": 3, "stage3_gather_fp16_weights_on_model_save": true}})");
  EXPECT_EQ(errors(c), "");
  EXPECT_TRUE(c.bf16_enabled());
  EXPECT_EQ(c.aio.intra_op_parallelism, 4);
  EXPECT_TRUE(c.zero_optimization.gather_16bit_weights_on_model_save);
  std::string w = warnings(c);
  EXPECT_TRUE(contains(w, "bfloat16: deprecated key; use \"bf16\"")) << w;
  EXPECT_TRUE(contains(w, "aio.thread_count: deprecated key; use \"intra_op_parallelism\"")) << w;
  EXPECT_TRUE(contains(w, "stage3_gather_fp16_weights_on_model_save: deprecated key")) << w;
}

TEST(ConfigDeprecated, BooleanZeroOptimizationMeansStage1) {
  Config c = load(R"({"zero_optimization": true, "allgather_size": 1000})");
  EXPECT_EQ(errors(c), "");
  EXPECT_EQ(c.zero_optimization.stage, 1);
  EXPECT_EQ(c.zero_optimization.allgather_bucket_size, 1000);
  EXPECT_TRUE(contains(warnings(c), "zero_optimization: the boolean form is deprecated")) << warnings(c);
  EXPECT_EQ(c.source_of("zero_optimization.stage"), Source::kDerived);
  EXPECT_EQ(c.source_of("zero_optimization.allgather_bucket_size"), Source::kDerived);
  EXPECT_EQ(load(R"({"zero_optimization": false})").zero_optimization.stage, 0);

  // Beside the object form allgather_size means nothing: it must not override the block.
  Config object = load(R"({"zero_optimization": {"stage": 1, "allgather_bucket_size": 2000}, "allgather_size": 1000})");
  EXPECT_EQ(errors(object), "");
  EXPECT_EQ(object.zero_optimization.allgather_bucket_size, 2000);
  EXPECT_TRUE(contains(warnings(object), "allgather_size: ignored")) << warnings(object);
}

TEST(ConfigRemoved, LegacyStage1AndElasticityAreErrorsWithHints) {
  Config c = load(R"({"zero_optimization": {"legacy_stage1": true}, "elasticity": {"enabled": true}})");
  std::string e = errors(c);
  EXPECT_TRUE(contains(e, "zero_optimization.legacy_stage1: no longer supported by DeepSpeed; the old ZeRO stage 1"))
      << e;
  EXPECT_TRUE(contains(e, "elasticity: no longer supported by DeepSpeed; DeepSpeed removed elastic training")) << e;
  Config off = load(R"({"zero_optimization": {"legacy_stage1": false}})");
  EXPECT_EQ(errors(off), "");
  EXPECT_TRUE(contains(warnings(off), "legacy_stage1")) << warnings(off);
}

TEST(ConfigStrict, TypoThreeLevelsDeepNamesItsPathAndASuggestion) {
  Config c = load(R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memroy": true}}})");
  EXPECT_EQ(errors(c),
            "zero_optimization.offload_optimizer.pin_memroy: unknown key; did you mean pin_memory?\n");
}

// NVMe offload needs O_DIRECT-sized requests; config check says so as start-up would.
TEST(ConfigChecks, NvmeOffloadNeedsWholeBlocksOfIo) {
  const std::string zero = R"("zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "swap"}})";
  Config odd = load("{" + zero + R"(, "aio": {"block_size": 1000000}})");
  EXPECT_TRUE(contains(errors(odd), "aio.block_size: must be a multiple of 4096 bytes for NVMe offload")) << errors(odd);
  Config whole = load("{" + zero + R"(, "aio": {"block_size": 1048576}})");
  EXPECT_EQ(errors(whole), "");
  Config no_nvme = load(R"({"zero_optimization": {"stage": 2}, "aio": {"block_size": 1000000}})");
  EXPECT_EQ(errors(no_nvme), "");
}

TEST(ConfigStrict, KeyAtTheWrongLevelPointsToWhereItBelongs) {
  Config c = load(R"({"zero_optimization": {"stage": 3, "aio": {}}, "stage3_max_live_parameters": 5})");
  std::string e = errors(c);
  EXPECT_TRUE(contains(e, "zero_optimization.aio: unknown key; did you mean aio? (it belongs there)")) << e;
  EXPECT_TRUE(contains(e, "stage3_max_live_parameters: unknown key")) << e;
  Config top = load(R"({"offload_optimizer": {"device": "cpu"}})");
  EXPECT_TRUE(contains(errors(top), "did you mean zero_optimization.offload_optimizer?")) << errors(top);
}

TEST(ConfigStrict, EveryErrorIsReportedNotJustTheFirst) {
  Config c = load(R"({"train_batch_size": "big", "zero_optimization": {"stage": 5, "overlap_com": true},
                      "fp16": {"enabled": 1}})");
  std::string e = errors(c);
  EXPECT_TRUE(contains(e, "train_batch_size: expected an integer or null or \"auto\", got \"big\" (a string)")) << e;
  EXPECT_TRUE(contains(e, "zero_optimization.stage: must be between 0 and 3, got 5")) << e;
  EXPECT_TRUE(contains(e, "zero_optimization.overlap_com: unknown key; did you mean overlap_comm?")) << e;
  EXPECT_TRUE(contains(e, "fp16.enabled: expected true or false or \"auto\", got 1 (an integer)")) << e;
  EXPECT_EQ(c.diagnostics.count(Severity::kError), 4u) << e;
}

TEST(ConfigStrict, FromJsonThrowsOneConfigErrorListingEveryProblem) {
  try {
    Config::from_string(R"({"zero_optimization": {"stage": "two", "bogus": 1}, "gradient_clipping": -1})",
                        {.origin = "ds.json"});
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "[config] ds.json: 3 problems")) << msg;
    EXPECT_TRUE(contains(msg, "zero_optimization.stage: expected an integer")) << msg;
    EXPECT_TRUE(contains(msg, "zero_optimization.bogus: unknown key")) << msg;
    EXPECT_TRUE(contains(msg, "gradient_clipping: must be at least 0")) << msg;
    EXPECT_EQ(e.exit_code(), 3);
  }
}

TEST(ConfigStrict, UnknownKeysCanBeDowngradedToWarnings) {
  const char* text = R"({"train_batch_size": 8, "some_new_deepspeed_key": 1, "zero_optimization": {"new_knob": 2}})";
  Config c = load(text, {.allow_unknown_keys = true});
  EXPECT_EQ(errors(c), "");
  EXPECT_TRUE(contains(warnings(c), "some_new_deepspeed_key: unknown key, ignored")) << warnings(c);
  EXPECT_TRUE(contains(warnings(c), "zero_optimization.new_knob: unknown key, ignored")) << warnings(c);

  setenv("ZEROTRAIN_ALLOW_UNKNOWN_KEYS", "1", 1);
  Config from_env = load(text);
  unsetenv("ZEROTRAIN_ALLOW_UNKNOWN_KEYS");
  EXPECT_EQ(errors(from_env), "");
  EXPECT_NE(errors(load(text)), "");
}

TEST(ConfigTypes, IntegralFloatsAreIntegersOthersAreNot) {
  Config c = load(R"({"zero_optimization": {"reduce_bucket_size": 5e8, "allgather_bucket_size": 2.5}})");
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size.value, 500'000'000);
  EXPECT_TRUE(contains(errors(c), "allgather_bucket_size: expected an integer or \"auto\"") ||
              contains(errors(c), "allgather_bucket_size: expected an integer, got 2.5"))
      << errors(c);
}

// An unsigned integer above 2^63-1 once wrapped to a negative value, and a non-finite
// number (possible in a Json built in C++) passed every range check.
TEST(ConfigTypes, IntegersBeyond64BitsAndNonFiniteNumbersAreErrors) {
  Config big = load(R"({"train_batch_size": 18446744073709551615})");
  EXPECT_TRUE(contains(errors(big), "train_batch_size: expected an integer up to 2^63-1")) << errors(big);
  Json j = Json::parse(R"({"train_batch_size": 8, "gradient_clipping": 1.0,
                           "optimizer": {"type": "Adam", "params": {"lr": 0.1, "betas": [0.9, 0.99]}}})");
  j["gradient_clipping"] = std::numeric_limits<double>::quiet_NaN();
  j["optimizer"]["params"]["lr"] = std::numeric_limits<double>::infinity();
  j["optimizer"]["params"]["betas"][1] = -std::numeric_limits<double>::infinity();
  Config c = load_config(j);
  EXPECT_TRUE(contains(errors(c), "gradient_clipping: expected a finite number or \"auto\", got nan")) << errors(c);
  EXPECT_TRUE(contains(errors(c), "optimizer.params.lr: expected a finite number")) << errors(c);
  EXPECT_TRUE(contains(errors(c), "optimizer.params.betas: expected a list of two finite numbers")) << errors(c);
}

TEST(ConfigTypes, EnumsListTheirValuesAndIgnoreCase) {
  Config c = load(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "CPU"}},
                      "checkpoint": {"tag_validation": "fail"}, "communication_data_type": "gpu"})");
  EXPECT_EQ(c.zero_optimization.offload_param->device, OffloadDevice::kCpu);
  EXPECT_EQ(c.checkpoint.tag_validation, TagValidation::kFail);
  EXPECT_TRUE(contains(errors(c), "communication_data_type: expected one of \"fp32\", \"fp16\", \"bf16\" or null"))
      << errors(c);
}

TEST(ConfigTypes, AutoIsOnlyAcceptedWhereTheTrainerFillsIt) {
  Config c = load(R"({"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": "auto"}})");
  EXPECT_TRUE(c.train_micro_batch_size_per_gpu.is_auto);
  EXPECT_EQ(c.source_of("train_micro_batch_size_per_gpu"), Source::kAutoPending);
  EXPECT_TRUE(contains(errors(c), "zero_optimization.stage: \"auto\" is not accepted for this key")) << errors(c);
  EXPECT_EQ(c.unresolved_auto_keys(), std::vector<std::string>{"train_micro_batch_size_per_gpu"});
}

TEST(ConfigUnsupported, FeaturesAreAcceptedWhileTheyAskForNothing) {
  Config off = load(R"({"zero_optimization": {"zero_quantized_weights": false, "mics_shard_size": -1},
                        "compression_training": {"weight_quantization": {"shared_parameters": {"enabled": false}}},
                        "amp": {"enabled": false, "opt_level": "O1"}, "flops_profiler": {"enabled": false}})");
  EXPECT_EQ(errors(off) + unsupported(off), "");

  Config on = load(R"({"zero_optimization": {"zero_quantized_weights": true},
                       "compression_training": {"weight_quantization": {"shared_parameters": {"enabled": true}}},
                       "sparse_attention": {"mode": "fixed"}, "flops_profiler": {"enabled": true}})");
  std::string u = unsupported(on);
  EXPECT_EQ(errors(on), "");
  EXPECT_TRUE(contains(u, "zero_optimization.zero_quantized_weights: ZeRO++ quantized weights")) << u;
  EXPECT_TRUE(contains(u, "compression_training: compression training is not implemented")) << u;
  EXPECT_TRUE(contains(u, "sparse_attention: sparse attention is not implemented")) << u;
  EXPECT_TRUE(contains(u, "flops_profiler.enabled: the flops profiler")) << u;
  EXPECT_THROW(Config::from_json(parse_json_text(R"({"sparse_attention": {"mode": "fixed"}})")), NotSupported);
}

TEST(ConfigOptimizer, ParamsAreCheckedPerType) {
  Config c = load(R"({"optimizer": {"type": "adam", "params": {"lr": 0.1, "betas": [0.8, 0.9], "momentum": 0.9}}})");
  EXPECT_TRUE(contains(errors(c), "optimizer.params.momentum: unknown key")) << errors(c);
  ASSERT_TRUE(c.optimizer.has_value());
  EXPECT_EQ(c.optimizer->kind, OptimizerKind::kAdam);
  const auto& adam = std::get<AdamParams>(c.optimizer->params);
  EXPECT_EQ(adam.lr.value, 0.1);
  EXPECT_EQ(adam.betas.value[0], 0.8);
  EXPECT_TRUE(adam.adam_w_mode);   // DeepSpeed's "Adam" is AdamW unless adam_w_mode is false

  Config sgd = load(R"({"optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}}})");
  EXPECT_EQ(errors(sgd), "");
  EXPECT_EQ(std::get<SgdParams>(sgd.optimizer->params).momentum, 0.9);
}

TEST(ConfigOptimizer, UnknownUnsupportedAndMaxGradNorm) {
  EXPECT_TRUE(contains(errors(load(R"({"optimizer": {"type": "Adamm", "params": {}}})")),
                       "optimizer.type: unknown optimizer type \"Adamm\"; did you mean Adam?"));
  EXPECT_TRUE(contains(unsupported(load(R"({"optimizer": {"type": "OneBitAdam", "params": {"freeze_step": 2}}})")),
                       "optimizer \"OneBitAdam\" is not implemented"));
  EXPECT_TRUE(contains(errors(load(R"({"optimizer": {"type": "Adam", "params": {"max_grad_norm": 1.0}}})")),
                       "optimizer.params.max_grad_norm: no longer supported by DeepSpeed; 'max_grad_norm' is not an "
                       "optimizer parameter"));
  EXPECT_TRUE(contains(errors(load(R"({"optimizer": {"params": {"lr": 1}}})")), "optimizer.type: required key is missing"));
}

TEST(ConfigOptimizer, UntestedOptimizerWithZeroNeedsTheOptIn) {
  const char* lamb = R"({"zero_optimization": {"stage": 2}, "optimizer": {"type": "Lamb", "params": {}}})";
  EXPECT_TRUE(contains(errors(load(lamb)), "zero_allow_untested_optimizer"));
  EXPECT_EQ(errors(load(R"({"zero_allow_untested_optimizer": true, "zero_optimization": {"stage": 2},
                            "optimizer": {"type": "Lamb", "params": {}}})")),
            "");
}

TEST(ConfigScheduler, RequiredParamsAndTypos) {
  EXPECT_TRUE(contains(errors(load(R"({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10}}})")),
                       "scheduler.params.total_num_steps: required key is missing"));
  EXPECT_TRUE(contains(errors(load(R"({"scheduler": {"type": "WarmupLr", "params": {}}})")),
                       "unknown scheduler type \"WarmupLr\"; did you mean WarmupLR?"));
  EXPECT_TRUE(contains(errors(load(R"({"scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.1}}})")),
                       "scheduler.params.cycle_max_lr: required key is missing"));
  Config ok = load(R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.01, "warmup_type": "linear"}}})");
  EXPECT_EQ(errors(ok), "");
  const auto& p = std::get<WarmupLRParams>(ok.scheduler->params);
  EXPECT_EQ(p.warmup_max_lr.value, 0.01);
  EXPECT_EQ(p.warmup_num_steps.value, 1000);
  EXPECT_EQ(p.warmup_type, WarmupType::kLinear);
}

TEST(ConfigConsistency, CrossBlockMistakesAreErrors) {
  auto e = [](const char* text) { return errors(load(text)); };
  EXPECT_TRUE(contains(e(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})"),
                       "fp16 and bf16 cannot both be enabled"));
  EXPECT_TRUE(contains(e(R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})"),
                       "parameter offload needs ZeRO stage 3, but stage is 2"));
  EXPECT_TRUE(contains(e(R"({"zero_optimization": {"offload_optimizer": {"device": "cpu"}}})"),
                       "optimizer offload needs ZeRO stage 1, 2 or 3"));
  EXPECT_TRUE(contains(e(R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}})"),
                       "offload_optimizer.nvme_path: required with device \"nvme\""));
  EXPECT_TRUE(contains(e(R"({"zero_optimization": {"stage": 1, "allgather_bucket_size": 1001}})"),
                       "must be a multiple of 2"));
  EXPECT_EQ(e(R"({"zero_optimization": {"stage": 1, "allgather_bucket_size": 1000}})"), "");
  EXPECT_TRUE(contains(e(R"({"zero_optimization": {"stage": 2}, "prescale_gradients": true})"),
                       "prescale_gradients: not supported with ZeRO stage 2"));
  EXPECT_TRUE(contains(e(R"({"fp16": {"enabled": true, "fp16_master_weights_and_grads": true}})"),
                       "only supported with ZeRO stage 2"));
}

TEST(ConfigSources, FileDefaultAndDerivedAndRoundTrip) {
  Config c = load(R"({"zero_optimization": {"stage": 2, "cpu_offload": true}, "fp16": {"enabled": true}})");
  EXPECT_EQ(c.source_of("zero_optimization.stage"), Source::kFile);
  EXPECT_EQ(c.source_of("fp16.loss_scale_window"), Source::kDefault);
  EXPECT_EQ(c.source_of("zero_optimization.offload_optimizer"), Source::kDerived);
  EXPECT_EQ(c.source_of("zero_optimization.offload_optimizer.device"), Source::kDerived);

  // The effective config is itself a valid config that loads to the same values.
  Config again = load_config(c.to_json());
  EXPECT_EQ(errors(again), "");
  EXPECT_EQ(again.to_json(), c.to_json());
}

TEST(ConfigSchema, KnowsEveryBlock) {
  const auto& paths = schema_paths();
  for (const char* p : {"zero_optimization.offload_param.nvme_path", "fp16.hysteresis", "aio.queue_depth",
                        "timers.throughput.enabled", "checkpoint.parallel_write.pipeline_stage"}) {
    EXPECT_NE(std::find(paths.begin(), paths.end(), p), paths.end()) << p;
  }
}

TEST(ConfigTopLevel, MustBeAnObject) {
  EXPECT_TRUE(contains(errors(load("[1, 2]")), "the config must be a JSON object"));
}

}  // namespace
}  // namespace zerotrain::config

// The start-up block (config/effective.h): what the file wrote, as written; what was filled in
// ("auto", the Trainer's blocks) only where it is not the default.
TEST(EffectiveConfig, TheStartBlockShowsWhatIsNotADefault) {
  zerotrain::Config c = zerotrain::Config::from_string(R"({"train_micro_batch_size_per_gpu": "auto", "fp16": {"enabled": "auto",
      "hysteresis": 2}, "zero_optimization": {"stage": 2}})");
  zerotrain::config::add_trainer_blocks(c, "linear");
  zerotrain::config::resolve_auto(c, {.learning_rate = 2e-3, .num_training_steps = 10});
  const std::string block = zerotrain::config::non_default_block(c);
  const auto at = [&](const std::string& text) { return block.find(text); };
  const auto filled = at("  auto: ");
  ASSERT_NE(filled, std::string::npos) << block;
  EXPECT_LT(at("fp16.hysteresis=2"), filled) << block;   // written, though it is the default
  EXPECT_LT(at("zero_optimization.stage=2"), filled) << block;
  for (const char* shown : {"train_micro_batch_size_per_gpu=8", "optimizer.params.lr=0.002", "optimizer.type=\"AdamW\"",
                            "scheduler.type=\"WarmupDecayLR\"", "scheduler.params.total_num_steps=10"}) {
    EXPECT_GT(at(shown), filled) << shown << "\n" << block;
    EXPECT_NE(at(shown), std::string::npos) << shown << "\n" << block;
  }
  for (const char* hidden : {"bias_correction", "amsgrad", "torch_adam", "fp16.enabled", "legacy_fusion"}) {
    EXPECT_EQ(at(hidden), std::string::npos) << hidden << " is a default\n" << block;
  }
}
