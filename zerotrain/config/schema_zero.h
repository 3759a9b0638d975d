// `zero_optimization`, its offload blocks, and the top-level `aio` block, with DeepSpeed's
// defaults (deepspeed/runtime/zero/config.py, offload_config.py, swap_tensor/aio_config.py).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "zerotrain/config/field.h"
#include "zerotrain/config/stage_traits.h"

namespace zerotrain::config {

enum class OffloadDevice { kNone, kCpu, kNvme };
template <> struct EnumNames<OffloadDevice> {
  static constexpr std::array<const char*, 3> names{"none", "cpu", "nvme"};
};

struct OffloadParamConfig {
  static constexpr bool kIsBlock = true;
  OffloadDevice device = OffloadDevice::kNone;
  std::optional<std::string> nvme_path;
  int64_t buffer_count = 5;
  int64_t buffer_size = 100'000'000;       // elements per swap buffer
  int64_t max_in_cpu = 1'000'000'000;      // elements kept in host memory with nvme
  bool pin_memory = false;

  // Whether parameters are offloaded at all ("cpu" or "nvme"): the one test for it.
  bool enabled() const { return device != OffloadDevice::kNone; }

  template <class V> void visit(V& v) {
    v.field("device", device);
    v.field("nvme_path", nvme_path);
    v.field("buffer_count", buffer_count, {.min = 0});
    v.field("buffer_size", buffer_size, {.min = 0});
    v.field("max_in_cpu", max_in_cpu, {.min = 0});
    v.field("pin_memory", pin_memory);
  }
};

struct OffloadOptimizerConfig {
  static constexpr bool kIsBlock = true;
  OffloadDevice device = OffloadDevice::kNone;
  std::optional<std::string> nvme_path;
  int64_t buffer_count = 4;
  bool pin_memory = false;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0;                       // fraction offloaded (ZeRO-3 "Twin-Flow")
  static constexpr int64_t kMaxBufferCount = 1024;

  bool pipeline() const { return pipeline_read || pipeline_write; }
  // Whether the optimizer is offloaded at all ("cpu" or "nvme"): the one test for it.
  bool enabled() const { return device != OffloadDevice::kNone; }

  template <class V> void visit(V& v) {
    v.field("device", device);
    v.field("nvme_path", nvme_path);
    // Every 3 buffers hold one sub-group's states in memory (estimate/offload_bytes.h): the
    // bound keeps the engine from being asked for more buffer sets than it can count.
    v.field("buffer_count", buffer_count, {.min = 0, .max = kMaxBufferCount});
    v.field("pin_memory", pin_memory);
    v.field("pipeline_read", pipeline_read);
    v.field("pipeline_write", pipeline_write);
    v.field("fast_init", fast_init);
    v.field("ratio", ratio, {.min = 0.0, .max = 1.0, .unsupported = "partial optimizer offload (ratio < 1)"});
  }
};

struct ZeroConfig {
  static constexpr bool kIsBlock = true;
  int64_t stage = 0;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  Auto<int64_t> reduce_bucket_size = 500'000'000;     // elements
  bool use_multi_rank_bucket_allreduce = true;
  bool allgather_partitions = true;
  int64_t allgather_bucket_size = 500'000'000;        // elements
  std::optional<bool> overlap_comm;                   // unset: true for stage 3 only
  bool load_from_fp32_weights = true;
  bool elastic_checkpoint = false;
  std::optional<OffloadParamConfig> offload_param;
  std::optional<OffloadOptimizerConfig> offload_optimizer;
  int64_t sub_group_size = 1'000'000'000;
  Auto<int64_t> prefetch_bucket_size = 50'000'000;
  Auto<int64_t> param_persistence_threshold = 100'000;
  int64_t model_persistence_threshold = INT64_MAX;
  int64_t max_live_parameters = 1'000'000'000;
  int64_t max_reuse_distance = 1'000'000'000;
  bool gather_16bit_weights_on_model_save = false;
  int64_t module_granularity_threshold = 0;
  bool use_all_reduce_for_fetch_params = false;
  bool ignore_unused_parameters = true;
  bool round_robin_gradients = false;
  int64_t zero_hpz_partition_size = 1;
  bool zero_quantized_weights = false;
  bool zero_quantized_nontrainable_weights = false;
  bool zero_quantized_gradients = false;
  Json zeropp_loco_param;
  int64_t mics_shard_size = -1;
  bool mics_hierarchical_params_gather = false;
  bool memory_efficient_linear = true;
  bool pipeline_loading_checkpoint = false;
  bool override_module_apply = true;
  bool log_trace_cache_warnings = false;

  // The traits of `stage`; none when it is outside 0..3, which the reader reports.
  std::optional<StageTraits> traits() const { return find_traits(stage); }

  // DeepSpeed's zero_enabled: a ZeRO optimizer wraps the optimizer (stage 0 uses the plain
  // FP16_Optimizer/BF16_Optimizer wrappers, with their own loss scaler and accumulation dtype).
  bool enabled() const {
    const auto t = traits();
    return t && t->shards_optimizer;
  }
  // Stage 3: what the stage-3 keys (prefetch, persistence, parameter offload) apply to.
  bool shards_parameters() const {
    const auto t = traits();
    return t && t->shards_parameters;
  }

  // DeepSpeed: overlap_comm defaults to True for stage 3 and False otherwise.
  bool effective_overlap_comm() const { return overlap_comm.value_or(shards_parameters()); }

  template <class V> void visit(V& v) {
    v.field("stage", stage, {.min = 0, .max = 3});
    v.field("contiguous_gradients", contiguous_gradients);
    v.field("reduce_scatter", reduce_scatter);
    v.field("reduce_bucket_size", reduce_bucket_size, {.min = 0});
    v.field("use_multi_rank_bucket_allreduce", use_multi_rank_bucket_allreduce);
    v.field("allgather_partitions", allgather_partitions);
    v.field("allgather_bucket_size", allgather_bucket_size, {.min = 0});
    v.field("overlap_comm", overlap_comm);
    v.field("load_from_fp32_weights", load_from_fp32_weights);
    v.field("elastic_checkpoint", elastic_checkpoint);
    v.field("offload_param", offload_param);
    v.field("offload_optimizer", offload_optimizer);
    v.field("sub_group_size", sub_group_size, {.min = 0});
    v.field("prefetch_bucket_size", prefetch_bucket_size, {.alias = "stage3_prefetch_bucket_size", .min = 0});
    v.field("param_persistence_threshold", param_persistence_threshold,
            {.alias = "stage3_param_persistence_threshold", .min = 0});
    v.field("model_persistence_threshold", model_persistence_threshold,
            {.alias = "stage3_model_persistence_threshold", .min = 0});
    v.field("max_live_parameters", max_live_parameters, {.alias = "stage3_max_live_parameters", .min = 0});
    v.field("max_reuse_distance", max_reuse_distance, {.alias = "stage3_max_reuse_distance", .min = 0});
    v.field("gather_16bit_weights_on_model_save", gather_16bit_weights_on_model_save,
            {.alias = "stage3_gather_16bit_weights_on_model_save",
             .deprecated_alias = "stage3_gather_fp16_weights_on_model_save"});
    v.field("module_granularity_threshold", module_granularity_threshold,
            {.alias = "stage3_module_granularity_threshold", .unsupported = "leaf-module grouping"});
    v.field("use_all_reduce_for_fetch_params", use_all_reduce_for_fetch_params,
            {.alias = "stage3_use_all_reduce_for_fetch_params", .unsupported = "all-reduce parameter fetch"});
    v.field("ignore_unused_parameters", ignore_unused_parameters);
    // DeepSpeed's round robin spreads the copies of gradients to host memory over the ranks
    // (a speed-up of its GPU-to-CPU offload); the numbers do not change, and here gradients
    // are in host memory already, so it is accepted and has nothing to do.
    v.field("round_robin_gradients", round_robin_gradients);
    v.field("zero_hpz_partition_size", zero_hpz_partition_size, {.min = 0, .unsupported = "ZeRO++ hierarchical partitioning"});
    v.field("zero_quantized_weights", zero_quantized_weights, {.unsupported = "ZeRO++ quantized weights"});
    v.field("zero_quantized_nontrainable_weights", zero_quantized_nontrainable_weights,
            {.unsupported = "ZeRO++ quantized weights"});
    v.field("zero_quantized_gradients", zero_quantized_gradients, {.unsupported = "ZeRO++ quantized gradients"});
    v.feature_block("zeropp_loco_param", zeropp_loco_param, "ZeRO++ LoCo");
    v.field("mics_shard_size", mics_shard_size, {.unsupported = "MiCS sharding"});
    v.field("mics_hierarchical_params_gather", mics_hierarchical_params_gather, {.unsupported = "MiCS sharding"});
    v.field("memory_efficient_linear", memory_efficient_linear);
    v.field("pipeline_loading_checkpoint", pipeline_loading_checkpoint, {.unsupported = "pipeline checkpoint loading"});
    v.field("override_module_apply", override_module_apply);
    v.field("log_trace_cache_warnings", log_trace_cache_warnings);
    v.removed("legacy_stage1",
              "the old ZeRO stage 1 was removed in DeepSpeed 0.5.9; delete the key to use the "
              "current stage 1", /*only_if_true=*/true);
    v.deprecated("cpu_offload", "offload_optimizer", [this](const Json& j) {
      if (j.is_boolean() && j.get<bool>()) offload_optimizer = OffloadOptimizerConfig{.device = OffloadDevice::kCpu};
    });
    v.deprecated("cpu_offload_param", "offload_param", [this](const Json& j) {
      if (j.is_boolean() && j.get<bool>()) offload_param = OffloadParamConfig{.device = OffloadDevice::kCpu};
    });
    // DeepSpeed ignores its value too; pin_memory is set in the offload blocks now.
    v.deprecated("cpu_offload_use_pin_memory", "offload_optimizer.pin_memory", [](const Json&) {},
                 /*apply_sets_replacement=*/false);
  }
};

struct AioConfig {
  static constexpr bool kIsBlock = true;
  // The IO engine's bounds, declared here so that `config check` refuses what `train` would:
  // io/make_engine.cpp refuses the same numbers from these constants. A piece is at least
  // one O_DIRECT block and at most 1 GiB; at most 4096 pieces in flight per thread, 256 threads.
  static constexpr int64_t kMinBlockSizeBytes = 4096;
  static constexpr int64_t kMaxBlockSizeBytes = int64_t{1} << 30;
  static constexpr int64_t kMaxQueueDepth = 4096;
  static constexpr int64_t kMaxThreads = 256;
  int64_t block_size = 1'048'576;     // bytes per request
  int64_t queue_depth = 8;
  int64_t intra_op_parallelism = 1;   // IO threads
  bool single_submit = false;
  bool overlap_events = true;
  bool use_gds = false;

  template <class V> void visit(V& v) {
    v.field("block_size", block_size, {.min = kMinBlockSizeBytes, .max = kMaxBlockSizeBytes});
    v.field("queue_depth", queue_depth, {.min = 1, .max = kMaxQueueDepth});
    // DeepSpeed renamed thread_count in Feb 2025 and now silently ignores the old name; we map it.
    v.field("intra_op_parallelism", intra_op_parallelism,
            {.deprecated_alias = "thread_count", .min = 1, .max = kMaxThreads});
    v.field("single_submit", single_submit);
    v.field("overlap_events", overlap_events);
    v.field("use_gds", use_gds, {.unsupported = "GPUDirect Storage"});
  }
};

}  // namespace zerotrain::config
