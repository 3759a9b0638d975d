// What DeepSpeed does not do for fp16 users: notice that training has stopped making
// progress (steps skipped one after another, or a loss scale stuck at its floor while
// gradients keep overflowing) and stop with a diagnosis instead of skipping forever. The
// diagnosis names the parameters whose gradients overflowed first, shows the recent
// gradient-norm and loss-scale history, and says what to change. No LibTorch: the engine
// feeds it one record per optimizer step.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace zerotrain::precision {

struct OverflowWatchOptions {
  int64_t max_consecutive_skipped_steps = 50;   // 0: no limit
  int64_t max_steps_at_min_scale = 1000;        // 0: no limit
  double min_scale = 1.0;
  int64_t initial_scale_power = 16;             // for the advice
  size_t history = 16;                          // steps of history in the diagnosis
};

// One optimizer step as the engine saw it.
struct StepRecord {
  int64_t step = 0;                 // the global step it was (skipped or not)
  bool overflow = false;
  double attempted_scale = 1.0;     // the scale the gradients were computed with
  double next_scale = 1.0;          // the scale after the scaler's update
  std::optional<double> grad_norm;  // unscaled global L2 norm; unset on overflow
  // On overflow: the parameters with inf/nan gradients, in the order backward reached them.
  std::vector<std::string> overflowed_params;
};

class OverflowWatch {
 public:
  explicit OverflowWatch(const OverflowWatchOptions& options);

  // Throws NumericsError with the diagnosis when a limit is reached (and enforce).
  void record(StepRecord step, bool enforce = true);
  // The limits' check alone, for a caller that logs between recording and enforcing.
  void enforce_limits() const;

  // The diagnosis, headed by `headline`: also appended to the scaler's own "cannot
  // decrease scale anymore" error.
  std::string diagnosis(const std::string& headline) const;

  // One line after DeepSpeed's OVERFLOW line when the last step recorded overflowed: which
  // parameters, and whether that is the usual search for a scale at the start.
  std::optional<std::string> overflow_note() const;

  int64_t consecutive_skipped() const { return consecutive_skipped_; }
  // The counters a checkpoint keeps (the history of recent steps is for diagnosis only).
  struct Counts {
    int64_t consecutive_skipped = 0, steps_at_min_scale = 0, overflows_at_min_scale = 0, total_skipped = 0,
            good_steps = 0;
  };
  Counts counts() const {
    return {consecutive_skipped_, steps_at_min_scale_, overflows_at_min_scale_, total_skipped_, good_steps_};
  }
  void restore(const Counts& c) {
    consecutive_skipped_ = c.consecutive_skipped;
    steps_at_min_scale_ = c.steps_at_min_scale;
    overflows_at_min_scale_ = c.overflows_at_min_scale;
    total_skipped_ = c.total_skipped;
    good_steps_ = c.good_steps;
  }
  int64_t steps_at_min_scale() const { return steps_at_min_scale_; }

 private:
  struct ParamOverflows {
    std::string name;
    int64_t first_step = 0;
    int64_t steps = 0;
  };

  OverflowWatchOptions options_;
  std::deque<StepRecord> recent_;
  std::vector<ParamOverflows> params_;   // in the order they first overflowed
  int64_t consecutive_skipped_ = 0;
  int64_t steps_at_min_scale_ = 0;
  int64_t overflows_at_min_scale_ = 0;   // overflows attempted at the floor, since the scale got there
  int64_t total_skipped_ = 0;
  int64_t good_steps_ = 0;
};

}  // namespace zerotrain::precision
