// What the Trainer tells the user as it trains, all from rank 0: the progress bar (or plain
// lines when stdout is not a terminal), evaluation lines, the --metrics_file JSON lines, and
// the --report_to / DeepSpeed monitor writers (TensorBoard, CSV, JSON lines).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zerotrain/config/config.h"
#include "zerotrain/core/output_file.h"
#include "zerotrain/trainer/callbacks.h"
#include "zerotrain/trainer/training_arguments.h"

namespace zerotrain::monitor {
class Monitor;
class ProgressBar;
}

namespace zerotrain::trainer {

struct RunLogOptions {
  bool leader = false;          // rank 0: the only rank that prints and writes
  int64_t max_steps = 0;
  int64_t steps_per_epoch = 0;
  std::string metrics_file;
};

class RunLog {
 public:
  RunLog(const TrainingArguments& args, const Config& config, RunLogOptions options);
  ~RunLog();

  // A line on stdout that does not garble the progress bar.
  void say(const std::string& text);
  // After every optimizer step: redraws the bar (a terminal only).
  void step(int64_t step, double epoch, double loss, double samples_per_s);
  // Every logging_steps: `line` is the --metrics_file object (step, loss, ...), `scalars` the
  // values for the writers, under HF's train/ tags.
  void train_log(int64_t step, const nlohmann::ordered_json& line, const Metrics& scalars);
  void eval_log(int64_t step, const Metrics& metrics);
  void event(const nlohmann::ordered_json& line);   // epoch_end, end: the metrics file only
  // DeepSpeed's wall_clock_breakdown: mean milliseconds per micro-step since the last call.
  void timers(int64_t step, double forward_ms, double backward_ms, double step_ms);
  void finish();
  // Where each output went, for the final summary.
  std::vector<std::string> destinations() const;

 private:
  RunLogOptions options_;
  std::optional<files::OutputFile> metrics_;
  std::unique_ptr<monitor::Monitor> monitor_;
  std::unique_ptr<monitor::ProgressBar> bar_;
  bool terminal_ = false;
};

}  // namespace zerotrain::trainer
