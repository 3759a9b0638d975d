// The fp16 block as the scaler reads it (DeepSpeed 0.19.8's defaults), and the overflow watch's
// limits and diagnosis.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"
#include "zerotrain/precision/from_config.h"
#include "zerotrain/precision/overflow_watch.h"

namespace zp = zerotrain::precision;

namespace {

zp::LossScalerOptions scaler_of(const std::string& fp16_block) {
  return zp::loss_scaler_options(zerotrain::Config::from_string(
      R"({"train_batch_size": 1, "zero_optimization": {"stage": 2}, "fp16": )" + fp16_block + "}"));
}

TEST(LossScalerConfig, NoScalerKeysGiveDeepSpeed019sDefaults) {
  const auto o = scaler_of(R"({"enabled": true})");
  EXPECT_TRUE(o.dynamic);
  EXPECT_EQ(o.initial_scale, 65536);
  EXPECT_EQ(o.hysteresis, 2);
  EXPECT_FALSE(o.consecutive_hysteresis);
  EXPECT_EQ(o.scale_window, 1000);
  EXPECT_EQ(o.min_scale, 1.0);
}

// DeepSpeed 0.19.8 with "fp16": {"enabled": true} and ZeRO, as the Hugging Face DeepSpeed
// guide's log shows it: the first overflow spends the hysteresis, the second halves, and
// training goes on at 32768. Two OVERFLOW lines, as DeepSpeed prints.
TEST(LossScalerConfig, ReplaysTheGuidesStartWithTheDefaults) {
  zp::LossScaler s(scaler_of(R"({"enabled": true})"));
  std::vector<std::string> lines;
  for (bool overflow : {true, true, false, false, false}) {
    if (auto line = s.update(overflow)) lines.push_back(*line);
  }
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. "
                       "Reducing hysteresis to 1",
                       "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768"}));
  EXPECT_EQ(s.scale(), 32768);
}

TEST(LossScalerConfig, AnyScalerKeyGivesTheConfigDefaults) {
  for (const char* key : {R"("initial_scale_power": 16)", R"("loss_scale_window": 1000)", R"("min_loss_scale": 1)",
                          R"("hysteresis": 2)", R"("consecutive_hysteresis": false)"}) {
    const auto o = scaler_of(std::string(R"({"enabled": true, )") + key + "}");
    EXPECT_EQ(o.initial_scale, 65536) << key;
    EXPECT_EQ(o.hysteresis, 2) << key;
  }
  const auto o = scaler_of(R"({"enabled": true, "initial_scale_power": 8, "loss_scale_window": 2, "hysteresis": 3,
                               "consecutive_hysteresis": true, "min_loss_scale": 0.25})");
  EXPECT_EQ(o.initial_scale, 256);
  EXPECT_EQ(o.scale_window, 2);
  EXPECT_EQ(o.hysteresis, 3);
  EXPECT_TRUE(o.consecutive_hysteresis);
  EXPECT_EQ(o.min_scale, 0.25);
}

TEST(LossScalerConfig, StageZeroIsDeepSpeedsFp16Optimizer) {
  const auto o = zp::loss_scaler_options(
      zerotrain::Config::from_string(R"({"train_batch_size": 1, "fp16": {"enabled": true}})"));
  EXPECT_EQ(o.flavor, zp::ScalerFlavor::kNoZero);
  EXPECT_EQ(o.initial_scale, 65536);
  EXPECT_EQ(o.scale_window, 1000);
  EXPECT_EQ(o.min_scale, 1.0);
}

TEST(OverflowWatchConfig, AStaticScaleHasNoFloorToSitAt) {
  auto c = zerotrain::Config::from_string(R"({"train_batch_size": 1, "fp16": {"enabled": true, "loss_scale": 128}})");
  EXPECT_EQ(zp::overflow_watch_options(c).max_steps_at_min_scale, 0);
}

TEST(LossScalerConfig, APositiveLossScaleIsStatic) {
  const auto o = scaler_of(R"({"enabled": true, "loss_scale": 512})");
  EXPECT_FALSE(o.dynamic);
  EXPECT_EQ(o.static_scale, 512);
}

TEST(OverflowWatchConfig, LimitsDefaultToFiftySkipsAndJustOverAWindow) {
  auto c = zerotrain::Config::from_string(R"({"train_batch_size": 1, "fp16": {"enabled": true, "loss_scale_window": 200}})");
  auto o = zp::overflow_watch_options(c);
  EXPECT_EQ(o.max_consecutive_skipped_steps, 50);
  EXPECT_EQ(o.max_steps_at_min_scale, 202);   // the window, and the step after it, plus one
  c = zerotrain::Config::from_string(R"({"train_batch_size": 1, "fp16": {"enabled": true,
      "max_consecutive_skipped_steps": 0, "max_steps_at_min_scale": 0}})");
  o = zp::overflow_watch_options(c);
  EXPECT_EQ(o.max_consecutive_skipped_steps, 0);
  EXPECT_EQ(o.max_steps_at_min_scale, 0);
}

zp::StepRecord overflow(int64_t step, double scale, std::vector<std::string> params) {
  return {step, true, scale, scale / 2, std::nullopt, std::move(params)};
}
zp::StepRecord good(int64_t step, double scale, double norm) { return {step, false, scale, scale, norm, {}}; }

TEST(OverflowWatch, GoodStepsResetTheConsecutiveCount) {
  zp::OverflowWatch w({.max_consecutive_skipped_steps = 3, .max_steps_at_min_scale = 0});
  w.record(overflow(0, 1024, {"a"}));
  w.record(overflow(1, 512, {"a"}));
  w.record(good(2, 256, 1.5));
  w.record(overflow(3, 256, {"b"}));
  w.record(overflow(4, 128, {"a", "b"}));
  EXPECT_EQ(w.consecutive_skipped(), 2);
  try {
    w.record(overflow(5, 64, {"c"}));
    FAIL() << "the third skip in a row must stop";
  } catch (const zerotrain::NumericsError& e) {
    const std::string text = e.what();
    // First overflow first: a (step 0, 3 steps), b (step 3, 2), c (step 5, 1).
    const auto a = text.find("a: step 0; 3"), b = text.find("b: step 3; 2"), c = text.find("c: step 5; 1");
    EXPECT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos) << text;
    EXPECT_LT(a, b);
    EXPECT_LT(b, c);
    EXPECT_NE(text.find("step 2: 256 -> 256; 1.5"), std::string::npos) << text;
    EXPECT_NE(text.find("5 step(s) skipped in all, 3 in a row"), std::string::npos) << text;
  }
}

TEST(OverflowWatch, NotesEachOverflowAfterDeepSpeedsLine) {
  zp::OverflowWatch w({.initial_scale_power = 16});
  w.record(overflow(0, 65536, {"head.weight", "l3.bias", "l3.weight", "l2.weight"}));
  EXPECT_EQ(*w.overflow_note(),
            "[zerotrain] step 1: inf/nan gradients in 4 parameter(s), first in backward: head.weight, l3.bias, "
            "l3.weight, ...; usual while the loss scale comes down from 2^16 at the start");
  w.record(good(1, 32768, 0.5));
  EXPECT_FALSE(w.overflow_note().has_value());
  w.record(overflow(2, 32768, {"l1.weight"}));
  EXPECT_EQ(*w.overflow_note(),
            "[zerotrain] step 3: inf/nan gradients in 1 parameter(s), first in backward: l1.weight; "
            "2 step(s) skipped in all, 1 in a row");
}

TEST(OverflowWatch, ZeroTurnsALimitOff) {
  zp::OverflowWatch w({.max_consecutive_skipped_steps = 0, .max_steps_at_min_scale = 0, .min_scale = 1});
  for (int i = 0; i < 500; ++i) EXPECT_NO_THROW(w.record({i, true, 1, 1, std::nullopt, {"p"}}));
}

TEST(OverflowWatch, TheFloorAloneIsNotAProblem) {
  // At the minimum after a fall, clean steps until the window doubles the scale again.
  zp::OverflowWatch w({.max_consecutive_skipped_steps = 0, .max_steps_at_min_scale = 4, .min_scale = 1});
  w.record({0, true, 2, 1, std::nullopt, {"p"}});   // fell to the floor: not an overflow *at* it
  for (int i = 1; i < 10; ++i) EXPECT_NO_THROW(w.record(good(i, 1, 0.5)));
  // An overflow at the floor after sitting there for the limit's steps.
  EXPECT_THROW(w.record({10, true, 1, 1, std::nullopt, {"p"}}), zerotrain::NumericsError);
}

}  // namespace
