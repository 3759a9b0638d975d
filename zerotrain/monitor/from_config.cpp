#include "zerotrain/monitor/from_config.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "zerotrain/core/error.h"

namespace zerotrain::monitor {

std::filesystem::path monitor_dir(const config::MonitorConfig& block) {
  return std::filesystem::path(block.output_path) / block.job_name;
}

void add_from_config(Monitor& monitor, const config::MonitorConfig& tensorboard,
                     const config::MonitorConfig& csv_monitor) {
  if (tensorboard.enabled) monitor.add(make_tensorboard_writer(monitor_dir(tensorboard).string()));
  if (csv_monitor.enabled) monitor.add(make_csv_writer(monitor_dir(csv_monitor).string()));
}

namespace {
const std::string kTensorboard = "tensorboard";
}  // namespace

void add_report_to(Monitor& monitor, const std::vector<std::string>& names, const std::filesystem::path& logging_dir) {
  // HF's integrations that zerotrain does not write (transformers' integration names).
  constexpr std::array<std::string_view, 12> kHfOnly = {"wandb",   "mlflow",  "comet_ml", "clearml", "dagshub",
                                                        "neptune", "dvclive", "azure_ml", "codecarbon",
                                                        "flyte",   "swanlab", "trackio"};
  std::vector<std::string> done;
  for (const std::string& name : names) {
    // HF's "all" is every integration installed; of zerotrain's, only TensorBoard is one of
    // HF's (csv and jsonl are zerotrain's names), so "all" is what HF would write here.
    const std::string& what = name == "all" ? kTensorboard : name;
    if (what == "none" || std::find(done.begin(), done.end(), what) != done.end()) continue;
    if (what == "tensorboard") {
      monitor.add(make_tensorboard_writer(logging_dir.string()));
    } else if (what == "csv") {
      monitor.add(make_csv_writer(logging_dir.string()));
    } else if (what == "jsonl") {
      monitor.add(make_jsonl_writer((logging_dir / kJsonlFileName).string()));
    } else if (std::find(kHfOnly.begin(), kHfOnly.end(), name) != kHfOnly.end()) {
      throw NotSupported(detail::str("--report_to ", name,
                                     ": zerotrain writes tensorboard, csv and jsonl only; use those, or none"));
    } else {
      throw UsageError(detail::str("--report_to: unknown destination \"", name,
                                   "\"; use tensorboard, csv, jsonl or none (several may be given)"));
    }
    done.push_back(what);
  }
}

}  // namespace zerotrain::monitor
