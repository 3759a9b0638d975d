// The writers a run asks for: DeepSpeed's `tensorboard` and `csv_monitor` blocks, and the
// Trainer's --report_to names (docs/monitoring.md). Call on rank 0 only.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "zerotrain/config/schema_misc.h"
#include "zerotrain/monitor/monitor.h"

namespace zerotrain::monitor {

// Where DeepSpeed's monitor block writes: output_path/job_name. An empty output_path (the
// default) gives job_name relative to the current directory, as DeepSpeed's
// os.path.join("", job_name) does.
std::filesystem::path monitor_dir(const config::MonitorConfig& block);

// Adds a TensorBoard writer for `tensorboard` and a CSV writer for `csv_monitor` where the
// block is enabled; both may share one folder, as in DeepSpeed.
void add_from_config(Monitor& monitor, const config::MonitorConfig& tensorboard,
                     const config::MonitorConfig& csv_monitor);

// Adds the writers of --report_to: "tensorboard" (event files in `logging_dir`), "csv" (one
// file per tag in `logging_dir`), "jsonl" (`logging_dir`/metrics.jsonl); "none" adds
// nothing; "all" is "tensorboard" (HF's "all": every integration it finds, and TensorBoard is
// the only one of HF's that zerotrain has). A name given twice is written once. Other names throw: UsageError for a typo,
// NotSupported for HF integrations zerotrain lacks (wandb, mlflow, ...).
void add_report_to(Monitor& monitor, const std::vector<std::string>& names, const std::filesystem::path& logging_dir);

inline constexpr const char* kJsonlFileName = "metrics.jsonl";

}  // namespace zerotrain::monitor
