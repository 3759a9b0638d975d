// A DeepSpeed `ds_config.json`, read strictly into typed blocks with DeepSpeed's defaults.
//
//   auto config = zerotrain::Config::from_file("ds_config.json");  // throws ConfigError
//   zerotrain::config::resolve_auto(config, trainer_args);           // HF-style "auto" values
//   zerotrain::config::finalize(config, world_size);                 // batch triangle
//
// Every key is checked at every depth: unknown keys (with "did you mean"), types, ranges,
// deprecated spellings (accepted with a warning), removed keys, and features zerotrain does
// not implement (a clear "not supported yet" as soon as a block asks for one). One load
// reports every problem in the file. docs/config.md is the user-facing reference.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/config/diagnostics.h"
#include "zerotrain/config/field.h"
#include "zerotrain/config/schema_misc.h"
#include "zerotrain/config/schema_optim.h"
#include "zerotrain/config/schema_precision.h"
#include "zerotrain/config/schema_zero.h"

namespace zerotrain::config {

struct LoadOptions {
  // Unknown keys become warnings instead of errors, for configs written for a newer
  // DeepSpeed. Also switched on by ZEROTRAIN_ALLOW_UNKNOWN_KEYS=1.
  bool allow_unknown_keys = false;
  // Names the config in messages; from_file uses the file name.
  std::string origin = "<config>";
};

struct Config {
  static constexpr bool kIsBlock = true;

  // The batch triangle: train_batch_size = micro_batch * gradient_accumulation * world_size.
  // Unset values are derived by finalize() exactly as DeepSpeed does.
  Auto<std::optional<int64_t>> train_batch_size;
  Auto<std::optional<int64_t>> train_micro_batch_size_per_gpu;
  Auto<std::optional<int64_t>> gradient_accumulation_steps;

  std::optional<int64_t> steps_per_print;   // DeepSpeed's default is now None: no progress lines
  bool wall_clock_breakdown = false;
  bool memory_breakdown = false;
  bool dump_state = false;
  Auto<double> gradient_clipping = 1.0;     // global L2 norm; 0 disables (DeepSpeed 0.19: 1.0)
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  std::optional<DType> communication_data_type;   // unset: the training dtype
  std::string seq_parallel_comm_data_type = "fp32";
  bool sparse_gradients = false;
  bool disable_allgather = false;
  bool zero_allow_untested_optimizer = false;
  bool zero_force_ds_cpu_optimizer = true;
  bool graph_harvesting = false;
  std::optional<int64_t> vocabulary_size;
  bool dataloader_drop_last = false;
  bool use_data_before_expert_parallelism = false;

  Fp16Config fp16;
  Bf16Config bf16;
  std::optional<OptimizerConfig> optimizer;
  std::optional<SchedulerConfig> scheduler;
  ZeroConfig zero_optimization;
  AioConfig aio;
  DataTypesConfig data_types;
  ActivationCheckpointingConfig activation_checkpointing;
  FlopsProfilerConfig flops_profiler;
  CommsLoggerConfig comms_logger;
  MonitorConfig tensorboard;
  MonitorConfig csv_monitor;
  WandbConfig wandb;
  CheckpointConfig checkpoint;
  TimersConfig timers;
  ProgressiveLayerDropConfig progressive_layer_drop;
  CommConfig comm;   // zerotrain's extension: backend, timeout, fingerprint checks

  // Blocks of DeepSpeed features zerotrain does not implement, kept verbatim: accepted while
  // they ask for nothing (see Reader::feature_block).
  Json amp, comet, pipeline, hybrid_engine, tensor_parallel, autotuning, compression_training,
      quantize_training, eigenvalue, sparse_attention, curriculum_learning, data_efficiency,
      nebula, weight_quantization;

  // What the load found besides errors (deprecations, ignored keys), and where each effective
  // value came from (JSON path -> Source; a path not listed inherits its parent's source).
  Diagnostics diagnostics;
  SourceMap sources;

  static Config from_file(const std::filesystem::path& path, LoadOptions options = {});
  static Config from_json(const Json& json, const LoadOptions& options = {});
  static Config from_string(std::string_view text, const LoadOptions& options = {});

  bool fp16_enabled() const { return fp16.enabled.value; }
  bool bf16_enabled() const { return bf16.enabled.value; }
  Source source_of(std::string_view path) const;
  // The effective config: every key with its value, defaults included.
  Json to_json() const;
  // JSON paths still set to "auto".
  std::vector<std::string> unresolved_auto_keys() const;

  template <class V> void visit(V& v);
};

// Reads without throwing: every problem, warnings included, lands in config.diagnostics.
// `zerotrain config check` uses this to list every error at once.
Config load_config(const Json& json, const LoadOptions& options = {});

// Checks that span blocks (fp16 with bf16, offload with stage, ...); called by load_config.
void check_consistency(const Config& config, Diagnostics& diags);

// Every key path the schema knows (for "did you mean" across levels, and docs).
const std::vector<std::string>& schema_paths();

}  // namespace zerotrain::config

namespace zerotrain {
using Config = config::Config;
}

#include "zerotrain/config/config_visit.h"
