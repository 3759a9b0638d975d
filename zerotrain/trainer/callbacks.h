// The Trainer's callbacks, as HF's TrainerCallback: each event sees the arguments, the
// state, and a control a callback sets to stop training or ask for an evaluation or save.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/trainer/training_arguments.h"

namespace zerotrain {

// Named values in the order they were logged: {"loss", 0.41}, {"learning_rate", 1e-3}, ...
// Evaluation results use HF's keys: eval_loss, eval_accuracy or eval_perplexity, ...
using Metrics = std::vector<std::pair<std::string, double>>;
std::optional<double> find_metric(const Metrics& metrics, const std::string& name);

struct TrainerState {
  int64_t global_step = 0;
  double epoch = 0;                 // fractional: 1.5 is half-way through the second epoch
  int64_t max_steps = 0;
  int64_t steps_per_epoch = 0;
  int64_t num_train_epochs = 0;
  std::vector<std::pair<int64_t, Metrics>> log_history;   // (step, what was logged), rank 0 and others alike
};

struct TrainerControl {
  bool should_training_stop = false;
  bool should_evaluate = false;
  bool should_save = false;
};

class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  virtual void on_train_begin(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
  virtual void on_epoch_begin(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
  virtual void on_step_end(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
  virtual void on_epoch_end(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
  virtual void on_log(const TrainingArguments&, const TrainerState&, TrainerControl&, const Metrics&) {}
  virtual void on_evaluate(const TrainingArguments&, const TrainerState&, TrainerControl&, const Metrics&) {}
  virtual void on_save(const TrainingArguments&, const TrainerState&, TrainerControl&, const std::string& /*folder*/) {}
  virtual void on_train_end(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
};

// HF's EarlyStoppingCallback: stops when `metric_for_best_model` (eval_ prefixed) has not
// improved by more than `threshold` for `patience` evaluations in a row. Every rank sees the
// same (all-reduced) metrics, so every rank stops at the same step.
class EarlyStoppingCallback : public TrainerCallback {
 public:
  explicit EarlyStoppingCallback(int64_t patience, double threshold = 0.0);
  void on_evaluate(const TrainingArguments& args, const TrainerState& state, TrainerControl& control,
                   const Metrics& metrics) override;
  int64_t evaluations_without_improvement() const { return waiting_; }

 private:
  int64_t patience_;
  double threshold_;
  std::optional<double> best_;
  int64_t waiting_ = 0;
};

}  // namespace zerotrain
