// DeepSpeed's schedules (deepspeed/runtime/lr_schedules.py) at chosen iterations, against
// values worked out by hand from its formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"
#include "zerotrain/optim/lr_schedule.h"

namespace zo = zerotrain::optim;

namespace {

std::unique_ptr<zo::LrSchedule> make(const std::string& scheduler, std::vector<double> base_lrs = {1.0}) {
  auto c = zerotrain::Config::from_string(R"({"train_batch_size": 8, "scheduler": )" + scheduler + "}");
  return zo::LrSchedule::from_config(*c.scheduler, std::move(base_lrs));
}

double lr_at(zo::LrSchedule& s, int64_t it) {
  s.set_iteration(it);
  return s.lrs().front();
}

TEST(LrSchedule, WarmupLRLog) {
  auto s = make(R"({"type": "WarmupLR", "params": {"warmup_min_lr": 0.1, "warmup_max_lr": 1.1, "warmup_num_steps": 10}})");
  EXPECT_DOUBLE_EQ(s->lrs().front(), 0.1);   // before the first step
  EXPECT_DOUBLE_EQ(lr_at(*s, 0), 0.1);       // log(1) = 0
  EXPECT_DOUBLE_EQ(lr_at(*s, 4), 0.1 + std::log(5.0) / std::log(10.0));
  EXPECT_DOUBLE_EQ(lr_at(*s, 9), 0.1 + 1.0);
  EXPECT_DOUBLE_EQ(lr_at(*s, 10), 1.1);
  EXPECT_DOUBLE_EQ(lr_at(*s, 1000), 1.1);
}

TEST(LrSchedule, WarmupLRLinearAndClampedSteps) {
  auto s = make(R"({"type": "WarmupLR", "params": {"warmup_max_lr": 1.0, "warmup_num_steps": 4, "warmup_type": "linear"}})");
  EXPECT_DOUBLE_EQ(lr_at(*s, 0), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(*s, 1), 0.25);
  EXPECT_DOUBLE_EQ(lr_at(*s, 3), 0.75);
  EXPECT_DOUBLE_EQ(lr_at(*s, 4), 1.0);
  // DeepSpeed clamps warmup_num_steps to at least 2.
  auto one = make(R"({"type": "WarmupLR", "params": {"warmup_max_lr": 1.0, "warmup_num_steps": 1, "warmup_type": "linear"}})");
  EXPECT_DOUBLE_EQ(lr_at(*one, 1), 0.5);
}

TEST(LrSchedule, WarmupDecayLR) {
  auto s = make(R"({"type": "WarmupDecayLR", "params": {"warmup_max_lr": 1.0, "warmup_num_steps": 10,
                    "total_num_steps": 30, "warmup_type": "linear"}})");
  EXPECT_DOUBLE_EQ(lr_at(*s, 5), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(*s, 10), 1.0);       // (30 - 10) / (30 - 10)
  EXPECT_DOUBLE_EQ(lr_at(*s, 20), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(*s, 30), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(*s, 40), 0.0);       // clamped at 0
}

TEST(LrSchedule, WarmupCosineLR) {
  auto s = make(R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 110, "warmup_num_steps": 10,
                    "warmup_min_ratio": 0.2, "cos_min_ratio": 0.1, "warmup_type": "linear"}})",
                {2.0, 4.0});
  EXPECT_EQ(s->lrs(), (std::vector<double>{0.0, 0.0}));   // DeepSpeed: [0.0] before the first step
  s->set_iteration(5);
  EXPECT_DOUBLE_EQ(s->lrs()[0], 2.0 * (0.2 + 0.5 * 0.8));
  EXPECT_DOUBLE_EQ(s->lrs()[1], 4.0 * (0.2 + 0.5 * 0.8));
  const double at60 = 0.1 + 0.9 * (1 + std::cos(std::numbers::pi * 51.0 / 100.0)) / 2;
  EXPECT_DOUBLE_EQ(lr_at(*s, 60), 2.0 * at60);
  EXPECT_NEAR(lr_at(*s, 109), 2.0 * 0.1, 1e-12);
  EXPECT_THROW(make(R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 10, "warmup_num_steps": 10}})"),
               zerotrain::ConfigError);
}

TEST(LrSchedule, OneCycle) {
  auto s = make(R"({"type": "OneCycle", "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 1.1,
                    "cycle_first_step_size": 10, "decay_lr_rate": 0.5, "decay_step_size": 5,
                    "cycle_min_mom": 0.8, "cycle_max_mom": 0.9, "decay_mom_rate": 0.1}})");
  EXPECT_DOUBLE_EQ(s->lrs().front(), 0.1);
  EXPECT_DOUBLE_EQ((*s->betas())[0], 0.8);
  EXPECT_DOUBLE_EQ((*s->betas())[1], 0.99);
  // it = 4: b = 5, x = 0.25 of the 20-step cycle, ratio 0.5: half-way up.
  EXPECT_DOUBLE_EQ(lr_at(*s, 4), 0.1 + 1.0 * 0.5);
  EXPECT_DOUBLE_EQ((*s->betas())[0], 0.9 - 0.1 * 0.5);
  EXPECT_DOUBLE_EQ(lr_at(*s, 9), 1.1);        // the peak
  EXPECT_NEAR(lr_at(*s, 14), 0.1 + 1.0 * 0.5, 1e-12);
  // Decay: it = 24, d = 24 - 20 + 1 = 5 steps = one decay_step_size.
  EXPECT_DOUBLE_EQ(lr_at(*s, 24), 0.1 / (1 + 0.5));
  EXPECT_DOUBLE_EQ((*s->betas())[0], 0.9 * (1 + 0.1));
  auto no_mom = make(R"({"type": "OneCycle", "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 1.1, "cycle_momentum": false}})");
  EXPECT_FALSE(no_mom->betas().has_value());
}

TEST(LrSchedule, LRRangeTest) {
  auto s = make(R"({"type": "LRRangeTest", "params": {"lr_range_test_min_lr": 0.01, "lr_range_test_step_size": 10,
                    "lr_range_test_step_rate": 2.0}})");
  EXPECT_DOUBLE_EQ(s->lrs().front(), 0.01);
  EXPECT_DOUBLE_EQ(lr_at(*s, 4), 0.01 * (1 + 2.0 * 0.5));
  auto stairs = make(R"({"type": "LRRangeTest", "params": {"lr_range_test_min_lr": 0.01, "lr_range_test_step_size": 10,
                         "lr_range_test_staircase": true}})");
  EXPECT_DOUBLE_EQ(lr_at(*stairs, 8), 0.01);
  EXPECT_DOUBLE_EQ(lr_at(*stairs, 9), 0.02);
}

TEST(LrSchedule, StepAdvancesOneIteration) {
  auto s = make(R"({"type": "WarmupLR", "params": {"warmup_max_lr": 1.0, "warmup_num_steps": 4, "warmup_type": "linear"}})");
  EXPECT_EQ(s->iteration(), -1);
  s->step();
  s->step();
  EXPECT_EQ(s->iteration(), 1);
  EXPECT_DOUBLE_EQ(s->lrs().front(), 0.25);
}

}  // namespace
