#include "zerotrain/trainer/callbacks.h"

#include <cmath>

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain {

std::optional<double> find_metric(const Metrics& metrics, const std::string& name) {
  for (const auto& [key, value] : metrics) {
    if (key == name) return value;
  }
  return std::nullopt;
}

EarlyStoppingCallback::EarlyStoppingCallback(int64_t patience, double threshold)
    : patience_(patience), threshold_(threshold) {
  ZT_CHECK(patience >= 1, UsageError, "early stopping: patience must be at least 1, got ", patience);
}

void EarlyStoppingCallback::on_evaluate(const TrainingArguments& args, const TrainerState&, TrainerControl& control,
                                        const Metrics& metrics) {
  const std::string name =
      args.metric_for_best_model.rfind("eval_", 0) == 0 ? args.metric_for_best_model : "eval_" + args.metric_for_best_model;
  const auto value = find_metric(metrics, name);
  if (!value) {
    std::string have;
    for (const auto& [key, v] : metrics) have += (have.empty() ? "" : ", ") + key;
    throw UsageError("--metric_for_best_model " + args.metric_for_best_model + ": the evaluation reports no " + name +
                     " (it has " + have + ")");
  }
  const bool greater = args.greater_is_better.value_or(name != "eval_loss" && name.find("loss") == std::string::npos);
  const bool improved =
      !best_ || ((greater ? *value > *best_ : *value < *best_) && std::abs(*value - *best_) > threshold_);
  if (improved) {
    best_ = *value;
    waiting_ = 0;
    return;
  }
  if (++waiting_ >= patience_) {
    ZT_LOG_INFO("early stopping: ", name, " has not improved on ", *best_, " for ", waiting_, " evaluations");
    control.should_training_stop = true;
  }
}

}  // namespace zerotrain
