// The smaller top-level blocks: activation checkpointing, profilers, monitors, checkpoint
// options and timers (deepspeed/runtime/*/config.py, monitor/config.py, profiling/constants.py).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "zerotrain/config/field.h"

namespace zerotrain::config {

struct ActivationCheckpointingConfig {
  static constexpr bool kIsBlock = true;
  bool partition_activations = false;
  std::optional<int64_t> number_checkpoints;
  bool contiguous_memory_optimization = false;
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
  bool cpu_checkpointing = false;

  // Read by zerotrain/activation (docs/activation-checkpointing.md) for the models that
  // checkpoint (the gpt's --gradient_checkpointing).
  template <class V> void visit(V& v) {
    v.field("partition_activations", partition_activations,
            {.unsupported = "partitioned activations (they split each checkpoint over a model-parallel group, and "
                            "zerotrain has no model parallelism; set it to false)"});
    v.field("number_checkpoints", number_checkpoints, {.min = 0});
    v.field("contiguous_memory_optimization", contiguous_memory_optimization);
    v.field("synchronize_checkpoint_boundary", synchronize_checkpoint_boundary);
    v.field("profile", profile);
    v.field("cpu_checkpointing", cpu_checkpointing);
  }
};

struct FlopsProfilerConfig {
  static constexpr bool kIsBlock = true;
  bool enabled = false;
  double recompute_fwd_factor = 0.0;
  int64_t profile_step = 1;
  int64_t module_depth = -1;
  int64_t top_modules = 1;
  bool detailed = true;
  std::optional<std::string> output_file;

  template <class V> void visit(V& v) {
    v.field("enabled", enabled, {.unsupported = "the flops profiler"});
    v.field("recompute_fwd_factor", recompute_fwd_factor, {.min = 0.0});
    v.field("profile_step", profile_step, {.min = 1});
    v.field("module_depth", module_depth);
    v.field("top_modules", top_modules, {.min = 1});
    v.field("detailed", detailed);
    v.field("output_file", output_file);
  }
};

struct MonitorConfig {       // tensorboard and csv_monitor
  static constexpr bool kIsBlock = true;
  bool enabled = false;
  std::string output_path;
  std::string job_name = "DeepSpeedJobName";

  template <class V> void visit(V& v) {
    v.field("enabled", enabled);   // written by zerotrain/monitor (docs/monitoring.md)
    v.field("output_path", output_path);
    v.field("job_name", job_name);
  }
};

struct WandbConfig {
  static constexpr bool kIsBlock = true;
  bool enabled = false;
  std::optional<std::string> group;
  std::optional<std::string> team;
  std::string project = "deepspeed";

  template <class V> void visit(V& v) {
    v.field("enabled", enabled, {.unsupported = "the wandb monitor (zerotrain writes --metrics_file JSON lines)"});
    v.field("group", group);
    v.field("team", team);
    v.field("project", project);
  }
};

struct CommsLoggerConfig {
  static constexpr bool kIsBlock = true;
  bool enabled = false;
  bool verbose = false;
  bool prof_all = true;
  bool debug = false;
  Json prof_ops = Json::array();

  template <class V> void visit(V& v) {
    v.field("enabled", enabled, {.unsupported = "the communication logger"});
    v.field("verbose", verbose);
    v.field("prof_all", prof_all);
    v.field("debug", debug);
    v.field("prof_ops", prof_ops);
  }
};

enum class TagValidation { kWarn, kIgnore, kFail };
template <> struct EnumNames<TagValidation> {
  static constexpr std::array<const char*, 3> names{"Warn", "Ignore", "Fail"};
};

struct CheckpointParallelWriteConfig {
  static constexpr bool kIsBlock = true;
  bool pipeline_stage = false;
  template <class V> void visit(V& v) {
    v.field("pipeline_stage", pipeline_stage, {.unsupported = "pipeline-parallel checkpoint writing"});
  }
};

struct CheckpointConfig {
  static constexpr bool kIsBlock = true;
  TagValidation tag_validation = TagValidation::kWarn;
  bool load_universal = false;
  bool use_node_local_storage = false;
  // zerotrain's own: the rank files are written by a background thread from a snapshot of the
  // state (docs/checkpoints.md "Asynchronous saves").
  bool async_save = false;
  CheckpointParallelWriteConfig parallel_write;

  template <class V> void visit(V& v) {
    v.field("tag_validation", tag_validation);
    v.field("load_universal", load_universal);
    v.field("use_node_local_storage", use_node_local_storage);
    v.field("async_save", async_save);
    v.field("parallel_write", parallel_write);
  }
};

struct ThroughputTimerConfig {
  static constexpr bool kIsBlock = true;
  bool enabled = true;
  bool synchronized = true;
  template <class V> void visit(V& v) {
    v.field("enabled", enabled);
    v.field("synchronized", synchronized);
  }
};

struct TimersConfig {
  static constexpr bool kIsBlock = true;
  ThroughputTimerConfig throughput;
  template <class V> void visit(V& v) { v.field("throughput", throughput); }
};

// zerotrain's own block (DeepSpeed has none): the communication layer. The environment
// (ZEROTRAIN_COMM_BACKEND, ZEROTRAIN_COMM_TIMEOUT_S, ZEROTRAIN_COMM_DEBUG) overrides it,
// and `zerotrain launch --backend/--timeout_s` sets the environment. See docs/comm.md.
// No "auto" spelling: in a ds_config "auto" means "filled by HF's Trainer". Leaving the key
// out means automatic (mpi under mpirun, gloo otherwise; shared memory between the ranks
// of one host either way). "shm" insists on shared memory.
enum class CommBackend { kGloo, kMpi, kNccl, kShm };
template <> struct EnumNames<CommBackend> {
  static constexpr std::array<const char*, 4> names{"gloo", "mpi", "nccl", "shm"};
};

struct CommConfig {
  static constexpr bool kIsBlock = true;
  std::optional<CommBackend> backend;   // unset: automatic
  double timeout_s = 300;            // every collective's wait
  bool check_fingerprints = false;   // compare (op, dtype, numel) across ranks before each collective
  template <class V> void visit(V& v) {
    v.field("backend", backend);
    // A year: a longer wait is a hung job, and its milliseconds must fit the int64 the
    // communicator counts them in.
    v.field("timeout_s", timeout_s, {.min = 0.001, .max = 31'536'000});
    v.field("check_fingerprints", check_fingerprints);
  }
};

struct ProgressiveLayerDropConfig {
  static constexpr bool kIsBlock = true;
  bool enabled = false;
  double theta = 1.0;
  double gamma = 0.001;
  template <class V> void visit(V& v) {
    v.field("enabled", enabled, {.unsupported = "progressive layer drop"});
    v.field("theta", theta);
    v.field("gamma", gamma);
  }
};

}  // namespace zerotrain::config
