// The loss scalers against DeepSpeed 0.19.8's arithmetic and log lines. The expected scales
// are what DeepSpeed 0.19.8's DynamicLossScaler gives for the same events.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/precision/loss_scaler.h"

namespace zp = zerotrain::precision;

namespace {

zp::LossScalerOptions dynamic(double initial, int64_t window, int64_t hysteresis, double min_scale = 1.0,
                              bool consecutive = false) {
  return {.dynamic = true, .initial_scale = initial, .scale_window = window, .hysteresis = hysteresis,
          .consecutive_hysteresis = consecutive, .min_scale = min_scale};
}

TEST(LossScaler, WorkedTraceWithHysteresis) {
  zp::LossScaler s(dynamic(65536, 4, 2));
  auto line = s.update(true);   // iter 0
  EXPECT_EQ(s.scale(), 65536);
  EXPECT_EQ(s.hysteresis_left(), 1);
  EXPECT_EQ(*line, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. "
                   "Reducing hysteresis to 1");
  line = s.update(true);   // iter 1
  EXPECT_EQ(*line, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768");
  EXPECT_EQ(s.scale(), 32768);
  for (int i = 2; i <= 5; ++i) {
    EXPECT_FALSE(s.update(false).has_value());
    EXPECT_EQ(s.scale(), 32768) << "iter " << i;
  }
  s.update(false);   // iter 6: stable (6 - 1 - 1) % 4 == 0: doubles and refills hysteresis
  EXPECT_EQ(s.scale(), 65536);
  EXPECT_EQ(s.hysteresis_left(), 2);
  s.update(true);   // iter 7
  EXPECT_EQ(s.scale(), 65536);
  EXPECT_EQ(s.hysteresis_left(), 1);
}

TEST(LossScaler, NoOverflowDoublesEveryWindow) {
  // The first doubling comes when a whole window of steps has passed.
  zp::LossScaler s(dynamic(8, 2, 1));
  std::vector<double> scales;
  for (int i = 0; i < 6; ++i) {
    s.update(false);
    scales.push_back(s.scale());
  }
  EXPECT_EQ(scales, (std::vector<double>{8, 8, 16, 16, 32, 32}));
}

TEST(LossScaler, AllOverflowHalvesDownToTheMinimumThenStops) {
  zp::LossScaler s(dynamic(8, 2, 1, /*min_scale=*/2));
  s.update(true);
  EXPECT_EQ(s.scale(), 4);
  s.update(true);
  EXPECT_EQ(s.scale(), 2);
  try {
    s.update(true);
    FAIL() << "no error at the minimum scale";
  } catch (const zerotrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find("already at minimum"), std::string::npos);
  }
}

TEST(LossScaler, SomeOverflowRestartsTheWindow) {
  zp::LossScaler s(dynamic(1024, 3, 1));
  s.update(false);   // iter 0
  s.update(true);    // iter 1: 512, last overflow 1
  EXPECT_EQ(s.scale(), 512);
  for (int i = 2; i <= 4; ++i) {
    s.update(false);   // stable 0, 1, 2
    EXPECT_EQ(s.scale(), 512) << "iter " << i;
  }
  s.update(false);   // iter 5: stable 3 % 3 == 0: doubles
  EXPECT_EQ(s.scale(), 1024);
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnEveryGoodStep) {
  zp::LossScaler s(dynamic(1024, 100, 3, 1.0, /*consecutive=*/true));
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.hysteresis_left(), 1);
  auto line = s.update(false);
  EXPECT_EQ(*line, "Consecutive hysteresis is enabled. Restoring hysteresis to 3");
  EXPECT_EQ(s.hysteresis_left(), 3);
  EXPECT_EQ(s.scale(), 1024);
}

TEST(LossScaler, StaticScaleNeverChanges) {
  zp::LossScaler s({.dynamic = false, .static_scale = 128});
  EXPECT_EQ(*s.update(true),
            "[deepspeed] OVERFLOW! Skipping step. Gradients are non-finite, weights were not updated.");
  EXPECT_FALSE(s.update(false).has_value());
  EXPECT_EQ(s.scale(), 128);
  EXPECT_THROW(zp::LossScaler({.dynamic = false, .static_scale = 0}), zerotrain::ConfigError);
}

// Stage 0: DeepSpeed's FP16_Optimizer, the cases of its test_dynamic_loss_scale.py.
zp::LossScalerOptions no_zero(double initial, int64_t window, double min_scale = 1.0) {
  return {.dynamic = true, .flavor = zp::ScalerFlavor::kNoZero, .initial_scale = initial, .scale_window = window,
          .min_scale = min_scale};
}

TEST(LossScalerNoZero, NoOverflowDoublesWhenTheStableStepsFillAWindow) {
  zp::LossScaler s(no_zero(256, 2));   // test_no_overflow: initial_scale_power 8, window 2
  std::vector<double> scales;
  for (int i = 0; i < 6; ++i) {
    s.update(false);
    scales.push_back(s.scale());
  }
  // stable = iteration - (-1) - 1 = iteration: doubles at iterations 2 and 4.
  EXPECT_EQ(scales, (std::vector<double>{256, 256, 512, 512, 1024, 1024}));
}

TEST(LossScalerNoZero, AllOverflowHalvesToTheMinimumAndStaysThere) {
  zp::LossScaler s(no_zero(16, 2));   // test_all_overflow: initial_scale_power 4
  std::vector<double> scales;
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(s.update(true).has_value());   // never raises, unlike the ZeRO scaler
    scales.push_back(s.scale());
  }
  EXPECT_EQ(scales, (std::vector<double>{8, 4, 2, 1, 1, 1}));
}

TEST(LossScalerNoZero, SomeOverflowWaitsAWindowPlusOne) {
  zp::LossScaler s(no_zero(256, 2));   // test_some_overflow
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 64);   // two overflows: / 2^2
  s.update(false);            // stable 0
  s.update(false);            // stable 1
  EXPECT_EQ(s.scale(), 64);
  s.update(false);            // stable 2: a whole window after the overflow
  EXPECT_EQ(s.scale(), 128);
}

TEST(LossScalerNoZero, LogsFp16OptimizersLinesWithPythonsNumbers) {
  zp::LossScaler s(no_zero(65536, 2));
  // The scale is Python's int 2**16 until the first halving makes it a float.
  EXPECT_EQ(*s.update(true), "Grad overflow on iteration 0\nReducing dynamic loss scale from 65536 to 32768.0");
  EXPECT_EQ(*s.update(true), "Grad overflow on iteration 1\nReducing dynamic loss scale from 32768.0 to 16384.0");
  EXPECT_FALSE(s.update(false).has_value());
  EXPECT_FALSE(s.update(false).has_value());
  EXPECT_EQ(*s.update(false), "No Grad overflow for 2 iterations\nIncreasing dynamic loss scale from 16384.0 to 32768.0");
  zp::LossScaler floored(no_zero(2, 2, /*min_scale=*/1));
  floored.update(true);   // 2 / 2 == 1.0: max(1.0, 1) keeps the float
  EXPECT_EQ(*floored.update(true), "Grad overflow on iteration 1\nReducing dynamic loss scale from 1.0 to 1");
  zp::LossScaler fixed({.dynamic = false, .flavor = zp::ScalerFlavor::kNoZero, .static_scale = 128});
  EXPECT_EQ(*fixed.update(true), "Grad overflow on iteration: 0\nUsing static loss scale of: 128.0");
}


}  // namespace
