#include "zerotrain/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"

namespace zerotrain::optim {
namespace {

using config::WarmupType;

// WarmupLR's gamma: log(it+1)/log(N) or it/N during warm-up, then 1. DeepSpeed clamps N to 2.
double warmup_gamma(int64_t it, int64_t warmup_num_steps, WarmupType type) {
  const int64_t n = std::max<int64_t>(2, warmup_num_steps);
  if (it >= n) return 1.0;
  if (type == WarmupType::kLog) return std::log(static_cast<double>(it + 1)) / std::log(static_cast<double>(n));
  return static_cast<double>(it) / static_cast<double>(n);
}

class WarmupLR : public LrSchedule {
 public:
  WarmupLR(const config::WarmupLRParams& p, std::vector<double> base_lrs)
      : LrSchedule(std::move(base_lrs)),
        min_lr_(p.warmup_min_lr.value),
        max_lr_(p.warmup_max_lr.value),
        warmup_num_steps_(p.warmup_num_steps.value),
        type_(p.warmup_type) {}

 protected:
  double lr_at(int64_t it, double) const override {
    if (it < 0) return min_lr_;   // before the first step
    return min_lr_ + (max_lr_ - min_lr_) * gamma(it);
  }
  virtual double gamma(int64_t it) const { return warmup_gamma(it, warmup_num_steps_, type_); }
  int64_t warmup_num_steps() const { return std::max<int64_t>(2, warmup_num_steps_); }

 private:
  double min_lr_, max_lr_;
  int64_t warmup_num_steps_;
  WarmupType type_;
};

class WarmupDecayLR final : public WarmupLR {
 public:
  WarmupDecayLR(const config::WarmupLRParams& p, std::vector<double> base_lrs)
      : WarmupLR(p, std::move(base_lrs)), total_num_steps_(p.total_num_steps.value.value_or(0)) {}

 protected:
  double gamma(int64_t it) const override {
    if (it < warmup_num_steps()) return WarmupLR::gamma(it);
    return std::max(0.0, static_cast<double>(total_num_steps_ - it) /
                             static_cast<double>(std::max<int64_t>(1, total_num_steps_ - warmup_num_steps())));
  }

 private:
  int64_t total_num_steps_;
};

class WarmupCosineLR final : public LrSchedule {
 public:
  WarmupCosineLR(const config::WarmupCosineLRParams& p, std::vector<double> base_lrs)
      : LrSchedule(std::move(base_lrs)),
        total_num_steps_(p.total_num_steps.value.value_or(0)),
        warmup_min_ratio_(p.warmup_min_ratio),
        warmup_num_steps_(std::max<int64_t>(2, p.warmup_num_steps.value)),
        cos_min_ratio_(p.cos_min_ratio),
        type_(p.warmup_type) {
    ZT_CHECK(total_num_steps_ > warmup_num_steps_, ConfigError, "scheduler.params.total_num_steps (",
             total_num_steps_, ") must be greater than warmup_num_steps (", warmup_num_steps_,
             ") for WarmupCosineLR; DeepSpeed divides by their difference");
  }

 protected:
  double lr_at(int64_t it, double base_lr) const override {
    if (it < 0) return 0.0;   // DeepSpeed returns [0.0] before the first step
    double ratio;
    if (it < warmup_num_steps_) {
      ratio = warmup_min_ratio_ + warmup_gamma(it, warmup_num_steps_, type_) * (1.0 - warmup_min_ratio_);
    } else {
      const double done = static_cast<double>(it - warmup_num_steps_ + 1);
      const double span = static_cast<double>(total_num_steps_ - warmup_num_steps_);
      ratio = std::max(0.0, cos_min_ratio_ + (1.0 - cos_min_ratio_) * (1.0 + std::cos(std::numbers::pi * done / span)) / 2.0);
    }
    return base_lr * ratio;
  }

 private:
  int64_t total_num_steps_;
  double warmup_min_ratio_;
  int64_t warmup_num_steps_;
  double cos_min_ratio_;
  WarmupType type_;
};

class OneCycle final : public LrSchedule {
 public:
  OneCycle(const config::OneCycleParams& p, std::vector<double> base_lrs)
      : LrSchedule(std::move(base_lrs)), p_(p) {
    first_ = p.cycle_first_step_size;
    second_ = p.cycle_second_step_size.value_or(first_);
  }

  std::optional<std::array<double, 2>> betas() const override {
    if (!p_.cycle_momentum) return std::nullopt;
    // DeepSpeed pairs the cycled beta1 with a fixed beta2 of 0.99.
    const int64_t it = iteration();
    if (it < 0) return std::array<double, 2>{p_.cycle_min_mom, 0.99};
    if (it < first_ + second_) {
      return std::array<double, 2>{p_.cycle_max_mom - (p_.cycle_max_mom - p_.cycle_min_mom) * scale(it), 0.99};
    }
    if (p_.decay_step_size == 0 || p_.decay_mom_rate == 0.0) return std::array<double, 2>{p_.cycle_max_mom, 0.99};
    const double d = static_cast<double>(it - (first_ + second_) + 1) / static_cast<double>(p_.decay_step_size);
    return std::array<double, 2>{p_.cycle_max_mom * (1.0 + p_.decay_mom_rate * d), 0.99};
  }

 protected:
  double lr_at(int64_t it, double) const override {
    const double min_lr = *p_.cycle_min_lr, max_lr = *p_.cycle_max_lr;
    if (it < 0) return min_lr;
    if (it < first_ + second_) return min_lr + (max_lr - min_lr) * scale(it);
    if (p_.decay_step_size == 0 || p_.decay_lr_rate == 0.0) return min_lr;
    const double d = static_cast<double>(it - (first_ + second_) + 1) / static_cast<double>(p_.decay_step_size);
    return min_lr / (1.0 + p_.decay_lr_rate * d);
  }

 private:
  // Where iteration `it` sits in the triangle: 0 at the ends, 1 at the peak.
  double scale(int64_t it) const {
    const double total = static_cast<double>(first_ + second_);
    const double ratio = static_cast<double>(first_) / total;
    const double b = static_cast<double>(it + 1);
    const double cycle = std::floor(1.0 + b / total);
    const double x = 1.0 + b / total - cycle;
    return x <= ratio ? x / ratio : (x - 1.0) / (ratio - 1.0);
  }

  config::OneCycleParams p_;
  int64_t first_ = 0, second_ = 0;
};

class LRRangeTest final : public LrSchedule {
 public:
  LRRangeTest(const config::LRRangeTestParams& p, std::vector<double> base_lrs)
      : LrSchedule(std::move(base_lrs)), p_(p) {}

 protected:
  double lr_at(int64_t it, double) const override {
    double interval = static_cast<double>(it + 1) / static_cast<double>(p_.lr_range_test_step_size);
    if (p_.lr_range_test_staircase) interval = std::floor(interval);
    return p_.lr_range_test_min_lr * (1.0 + p_.lr_range_test_step_rate * interval);
  }

 private:
  config::LRRangeTestParams p_;
};

}  // namespace

std::vector<double> LrSchedule::lrs() const {
  std::vector<double> out;
  for (double base : base_lrs_) out.push_back(lr_at(iteration_, base));
  return out;
}

std::unique_ptr<LrSchedule> LrSchedule::from_config(const config::SchedulerConfig& config, std::vector<double> base_lrs) {
  ZT_CHECK(!base_lrs.empty(), ConfigError, "a learning-rate schedule needs at least one parameter group");
  switch (config.kind) {
    case config::SchedulerKind::kWarmupLR:
      return std::make_unique<WarmupLR>(std::get<config::WarmupLRParams>(config.params), std::move(base_lrs));
    case config::SchedulerKind::kWarmupDecayLR:
      return std::make_unique<WarmupDecayLR>(std::get<config::WarmupDecayLRParams>(config.params), std::move(base_lrs));
    case config::SchedulerKind::kWarmupCosineLR:
      return std::make_unique<WarmupCosineLR>(std::get<config::WarmupCosineLRParams>(config.params),
                                              std::move(base_lrs));
    case config::SchedulerKind::kOneCycle:
      return std::make_unique<OneCycle>(std::get<config::OneCycleParams>(config.params), std::move(base_lrs));
    case config::SchedulerKind::kLRRangeTest:
      return std::make_unique<LRRangeTest>(std::get<config::LRRangeTestParams>(config.params), std::move(base_lrs));
  }
  ZT_INTERNAL_ASSERT(false, "unknown scheduler kind");
}

}  // namespace zerotrain::optim
