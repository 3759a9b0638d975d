#include "zerotrain/trainer/run_log.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "zerotrain/monitor/from_config.h"
#include "zerotrain/monitor/monitor.h"
#include "zerotrain/monitor/progress_bar.h"

namespace zerotrain::trainer {
namespace {

// HF's default logging_dir: <output_dir>/runs/<Mon>DD_HH-MM-SS_<host>.
std::string default_logging_dir(const std::string& output_dir) {
  char stamp[64];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(stamp, sizeof stamp, "%b%d_%H-%M-%S", &local);
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  const std::string runs = output_dir.empty() ? "runs" : output_dir + "/runs";
  return runs + "/" + stamp + "_" + host;
}

std::vector<monitor::Scalar> scalars_of(const std::string& prefix, const Metrics& metrics) {
  std::vector<monitor::Scalar> out;
  for (const auto& [key, value] : metrics) out.push_back({prefix + key, value});
  return out;
}

std::string format_metrics(const Metrics& metrics) {
  std::ostringstream out;
  for (const auto& [key, value] : metrics) {
    out << (out.tellp() > 0 ? "  " : "") << key << " " << std::setprecision(5) << value;
  }
  return out.str();
}

}  // namespace

RunLog::RunLog(const TrainingArguments& args, const Config& config, RunLogOptions options)
    : options_(std::move(options)) {
  if (!options_.leader) return;
  if (!options_.metrics_file.empty()) {
    // A metrics file of an earlier run is not truncated silently: HF's flag for replacing
    // what is in the way of a run's outputs allows it.
    metrics_.emplace(options_.metrics_file, files::OutputCheck{
                                                .what = "--metrics_file",
                                                .may_replace = args.overwrite_output_dir,
                                                .replace_hint = "add --overwrite_output_dir, or choose another path"});
  }
  monitor_ = std::make_unique<monitor::Monitor>();
  monitor::add_from_config(*monitor_, config.tensorboard, config.csv_monitor);
  const bool reports = std::any_of(args.report_to.begin(), args.report_to.end(), [](const auto& r) { return r != "none"; });
  if (reports) {
    monitor::add_report_to(*monitor_, args.report_to,
                           args.logging_dir.empty() ? default_logging_dir(args.output_dir) : args.logging_dir);
  }
  if (!args.disable_tqdm) {
    bar_ = std::make_unique<monitor::ProgressBar>(
        monitor::ProgressBarOptions{.total_steps = options_.max_steps, .steps_per_epoch = options_.steps_per_epoch},
        std::cout);
    terminal_ = bar_->is_terminal();
  }
}

RunLog::~RunLog() = default;

void RunLog::say(const std::string& text) {
  if (!options_.leader) return;
  if (bar_ && terminal_) {
    bar_->message(text);
  } else {
    std::cout << text << std::endl;
  }
}

void RunLog::step(int64_t step, double epoch, double loss, double samples_per_s) {
  if (bar_) bar_->update(step, epoch, loss, samples_per_s);
}

void RunLog::train_log(int64_t step, const nlohmann::ordered_json& line, const Metrics& scalars) {
  if (!options_.leader) return;
  if (metrics_) metrics_->write(line.dump() + "\n");
  if (!monitor_->empty()) monitor_->write(step, scalars_of("train/", scalars));
  // A plain line per log where no bar is redrawn (a log file, or --disable_tqdm).
  if (bar_ && !terminal_) {
    bar_->line();
  } else if (!bar_) {
    std::cout << "step " << step << "/" << options_.max_steps << "  " << format_metrics(scalars) << std::endl;
  }
}

void RunLog::eval_log(int64_t step, const Metrics& metrics) {
  if (!options_.leader) return;
  nlohmann::ordered_json line{{"step", step}};
  Metrics shown;
  for (const auto& [key, value] : metrics) {
    line[key] = value;
    if (key.rfind("eval_", 0) == 0) shown.emplace_back(key.substr(5), value);
  }
  if (metrics_) metrics_->write(line.dump() + "\n");
  if (!monitor_->empty()) monitor_->write(step, scalars_of("eval/", shown));
  Metrics said;
  for (const auto& [key, value] : metrics) {
    if (key != "eval_runtime" && key != "eval_samples_per_second") said.emplace_back(key, value);
  }
  say("evaluation at step " + std::to_string(step) + ": " + format_metrics(said));
}

void RunLog::event(const nlohmann::ordered_json& line) {
  if (options_.leader && metrics_) metrics_->write(line.dump() + "\n");
}

void RunLog::timers(int64_t step, double forward_ms, double backward_ms, double step_ms) {
  if (!options_.leader) return;
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << "time (ms) | forward: " << forward_ms << " | backward: " << backward_ms
       << " | step: " << step_ms;
  say(text.str());
  if (!monitor_->empty()) {
    monitor_->write(step, {{"timers/forward_ms", forward_ms}, {"timers/backward_ms", backward_ms},
                           {"timers/step_ms", step_ms}});
  }
}

void RunLog::finish() {
  if (!options_.leader) return;
  if (bar_) bar_->finish();
  if (monitor_) monitor_->flush();
  if (metrics_) metrics_->close();
  metrics_.reset();
}

std::vector<std::string> RunLog::destinations() const {
  std::vector<std::string> out;
  if (!options_.metrics_file.empty()) out.push_back("metrics: " + options_.metrics_file);
  if (monitor_) {
    for (const auto& d : monitor_->destinations()) out.push_back("logs: " + d);
  }
  return out;
}

}  // namespace zerotrain::trainer
