// DeepSpeed's learning-rate schedules (deepspeed/runtime/lr_schedules.py) with the same
// formulas, defaults and quirks: WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle and
// LRRangeTest. No LibTorch: a schedule only computes numbers; the engine writes them into
// its parameter groups.
//
// As in DeepSpeed, a schedule starts at iteration -1 (the rate before the first optimizer
// step) and step() advances it once per optimizer step that was not skipped.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace zerotrain::config {
struct SchedulerConfig;
}

namespace zerotrain::optim {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;

  // `base_lrs`: each parameter group's lr from the optimizer (WarmupCosineLR scales them).
  // Throws ConfigError for values DeepSpeed rejects or divides by zero on.
  static std::unique_ptr<LrSchedule> from_config(const config::SchedulerConfig& config, std::vector<double> base_lrs);

  void step() { ++iteration_; }
  void set_iteration(int64_t iteration) { iteration_ = iteration; }   // DeepSpeed's last_batch_iteration
  int64_t iteration() const { return iteration_; }

  // Each group's lr at the current iteration.
  std::vector<double> lrs() const;
  // OneCycle with cycle_momentum: (beta1, beta2) for every group; nullopt otherwise.
  virtual std::optional<std::array<double, 2>> betas() const { return std::nullopt; }

 protected:
  explicit LrSchedule(std::vector<double> base_lrs) : base_lrs_(std::move(base_lrs)) {}
  // The lr of a group whose optimizer lr is `base_lr`, at `iteration` (>= -1).
  virtual double lr_at(int64_t iteration, double base_lr) const = 0;

 private:
  std::vector<double> base_lrs_;
  int64_t iteration_ = -1;
};

}  // namespace zerotrain::optim
