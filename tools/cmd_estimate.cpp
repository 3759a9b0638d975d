// `zerotrain estimate` and `zerotrain advise` (docs/estimator.md):
//   estimate zero2|zero3   DeepSpeed's estimators, digit for digit;
//   estimate --detailed    what this engine holds per rank, piece by piece;
//   advise                 DeepSpeed's procedure for picking a stage, on our numbers.
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <optional>

#include "tools/commands.h"
#include "zerotrain/config/stage_traits.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/estimate/deepspeed_estimator.h"
#include "zerotrain/estimate/detailed.h"
#include "zerotrain/models/models.h"

namespace zerotrain::tools {
namespace {

// The runtime's own resident memory per rank: `zerotrain train` measures about 126 MiB
// before any model exists (baseline_rss_bytes in its metrics, 2 ranks under zerotrain
// launch), and its first steps add about 25 MiB whatever the model (kernel libraries'
// workspaces, communication buffers, per-thread allocator arenas): docs/estimator.md.
// Override with --runtime_bytes.
constexpr int64_t kDefaultRuntimeBytes = 150LL << 20;

struct ModelOptions {
  std::string model;
  std::string model_config;
  std::string params;
  std::string largest_layer_params;
};

struct EstimateOptions {
  CLI::App* cmd = nullptr;
  ModelOptions m;
  std::string stage;   // zero2 | zero3
  bool detailed = false;
  bool json = false;
  estimate::Cluster cluster;
  estimate::Setup setup;
  std::string runtime_bytes;
  std::string sub_group_size;
};

struct AdviseOptions {
  ModelOptions m;
  estimate::Setup setup;
  std::string precision = "bf16";
  std::string memory_per_rank;
  std::string host_memory;
  std::string disk_bytes;
  std::optional<int> ranks_per_node;
  std::string runtime_bytes;
  std::string sub_group_size;
};

const char* const kSetupFlags[] = {"--world_size",     "--micro_batch",    "--seq_len",
                                   "--reduce_bucket_size", "--overlap_comm", "--runtime_bytes",
                                   "--activation_checkpointing", "--sub_group_size", "--buffer_count",
                                   "--pipeline_read", "--pipeline_write"};
const char* const kClusterFlags[] = {"--num_gpus_per_node", "--num_nodes", "--additional_buffer_factor"};

int64_t runtime_of(const std::string& text) {
  return text.empty() ? kDefaultRuntimeBytes : strings::parse_bytes(text, "--runtime_bytes");
}

void add_model_options(CLI::App* cmd, ModelOptions& m) {
  cmd->add_option("--model", m.model, "A built-in model (gpt, mlp or convnet), or hf:DIR: a Hugging Face model folder, counted from its config.json");
  cmd->add_option("--model_config", m.model_config, "preset=NAME,key=value,... (as zerotrain train)");
}

void add_setup_options(CLI::App* cmd, estimate::Setup& s, std::string& runtime_bytes, std::string& sub_group_size) {
  // Every number is range-checked where it is parsed, as the config reader checks the keys.
  cmd->add_option("--world_size", s.world_size, "Ranks")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--micro_batch", s.micro_batch, "Samples per rank per micro-step")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--seq_len", s.seq_len, "Tokens per sample (gpt or hf:DIR; default: the block size)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--reduce_bucket_size", s.reduce_bucket_size, "Elements per gradient bucket")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--overlap_comm", s.overlap_comm, "Two buckets in flight (DeepSpeed's double buffering)");
  cmd->add_option("--param_persistence_threshold", s.param_persistence_threshold,
                  "Stage 3: parameters this small stay gathered (stage3_param_persistence_threshold)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefetch_bucket_size", s.prefetch_bucket_size,
                  "Stage 3: elements gathered ahead of use (stage3_prefetch_bucket_size)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max_live_parameters", s.max_live_parameters,
                  "Stage 3: the most elements prefetching and reuse keep gathered (stage3_max_live_parameters)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max_reuse_distance", s.max_reuse_distance,
                  "Stage 3: a unit left stays gathered if its next use is within this many elements "
                  "(stage3_max_reuse_distance)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--runtime_bytes", runtime_bytes, "The runtime's own memory per rank (default 150MiB, measured)");
  cmd->add_flag("--activation_checkpointing", s.activation_checkpointing,
                "Estimate with activation checkpointing (each block keeps only its input)");
  cmd->add_flag("--async_save", s.async_save,
                "Count checkpoint.async_save's snapshot: a copy of each rank's saved state while it is written");
  // NVMe offload (docs/offload.md): what sizes the optimizer store's buffers.
  cmd->add_option("--sub_group_size", sub_group_size,
                  "NVMe offload: elements stepped at a time (zero_optimization.sub_group_size; default 1e9, capped at "
                  "the shard)");
  cmd->add_option("--buffer_count", s.buffer_count, "NVMe offload: offload_optimizer.buffer_count")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_flag("--pipeline_read", s.pipeline_read, "NVMe offload: read the next sub-groups while one is stepped");
  cmd->add_flag("--pipeline_write", s.pipeline_write, "NVMe offload: write a stepped sub-group while the next is stepped");
}

// The setup's numbers given as text: sizes and counts as people write them.
void finish_setup(estimate::Setup& s, const std::string& runtime_bytes, const std::string& sub_group_size) {
  s.runtime_bytes = runtime_of(runtime_bytes);
  if (sub_group_size.empty()) return;
  const double n = strings::parse_count(sub_group_size, "--sub_group_size");
  ZT_CHECK(n >= 1 && n < 9007199254740992.0, UsageError, "--sub_group_size ", sub_group_size,
           " must be at least 1 element (and below 2^53)");
  s.sub_group_size = static_cast<int64_t>(n);
}

// The parameter counts and, for a built-in model or a Hugging Face folder, its shape (counted
// from its fields or config.json; the model is not built).
estimate::ModelShape model_shape(const ModelOptions& m, bool need_model) {
  if (!m.model.empty()) {
    ZT_CHECK(m.params.empty() && m.largest_layer_params.empty(), UsageError,
             "give --model or --params/--largest_layer_params, not both");
    return models::shape_of(m.model, m.model_config);
  }
  ZT_CHECK(!need_model, UsageError, "this estimate needs a model for its activations: --model gpt "
           "[--model_config preset=small], mlp, or hf:DIR (a Hugging Face model folder)");
  ZT_CHECK(!m.params.empty(), UsageError, "give the model: --params N [--largest_layer_params L], or --model gpt "
           "[--model_config ...]");
  estimate::ModelShape shape;
  shape.name = "a model";
  const double params = strings::parse_count(m.params, "--params");
  ZT_CHECK(params < 9007199254740992.0, UsageError, "--params ", m.params, " is more than 2^53");
  shape.param_numels = {static_cast<int64_t>(params)};
  if (!m.largest_layer_params.empty()) {
    const double largest = strings::parse_count(m.largest_layer_params, "--largest_layer_params");
    ZT_CHECK(largest <= params, UsageError, "--largest_layer_params is larger than --params");
    shape.largest_layer_params = static_cast<int64_t>(largest);
  }
  return shape;
}

// --detailed --json: every setup with its breakdown, for scripts. "offload_optimizer" and
// "offload_param" say whether that offload is on; "..._device" where to.
nlohmann::ordered_json detailed_json(const estimate::ModelShape& shape, const estimate::Setup& base) {
  using estimate::Offload;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (auto precision : {estimate::Precision::kFp32, estimate::Precision::kBf16, estimate::Precision::kFp16}) {
    for (int stage : {0, 1, 2, 3}) {
      for (Offload param : {Offload::kNone, Offload::kCpu, Offload::kNvme}) {
        for (Offload optimizer : {Offload::kNone, Offload::kCpu, Offload::kNvme}) {
          estimate::Setup s = base;
          s.precision = precision;
          s.stage = stage;
          s.offload_optimizer = optimizer;
          s.offload_param = param;
          const auto traits = config::traits_of(stage);
          if ((optimizer != Offload::kNone && !traits.shards_optimizer) ||
              (param != Offload::kNone && !traits.shards_parameters)) {
            continue;
          }
          const auto b = estimate::estimate(shape, s);
          s.activation_checkpointing = true;
          const auto ck = estimate::estimate(shape, s);
          rows.push_back({{"precision", estimate::to_string(precision)}, {"stage", stage},
                          {"offload_optimizer", optimizer != Offload::kNone},
                          {"offload_optimizer_device", estimate::to_string(optimizer)},
                          {"offload_param", param != Offload::kNone}, {"offload_param_device", estimate::to_string(param)},
                          {"params", b.params}, {"grads", b.grads}, {"master", b.master}, {"optimizer", b.optimizer},
                          {"buffers", b.buffers}, {"model_states", b.model_states()}, {"host", b.host},
                          {"disk", b.disk}, {"snapshot", b.snapshot}, {"activations", b.activations},
                          {"activations_checkpointed", ck.activations}, {"backward_transient", b.backward_transient},
                          {"runtime", b.runtime}, {"peak", b.peak()}, {"peak_checkpointed", ck.peak()}});
        }
      }
    }
  }
  return {{"model", shape.name}, {"params", shape.total_params()}, {"largest_layer_params", shape.largest_layer_params},
          {"world_size", base.world_size}, {"micro_batch", base.micro_batch}, {"rows", rows}};
}

int run_estimate(const EstimateOptions& o) {
  if (o.detailed) {
    ZT_CHECK(o.stage.empty(), UsageError, "--detailed covers every stage; leave out ", o.stage);
    for (const char* flag : kClusterFlags) {
      ZT_CHECK(o.cmd->count(flag) == 0, UsageError, flag, " is for DeepSpeed's estimators (zero2, zero3); --detailed "
               "counts ranks with --world_size");
    }
    estimate::Setup setup = o.setup;
    finish_setup(setup, o.runtime_bytes, o.sub_group_size);
    const auto shape = model_shape(o.m, true);
    if (o.json) {
      std::cout << detailed_json(shape, setup).dump(2) << "\n";
    } else {
      std::cout << estimate::detailed_report(shape, setup);
    }
    return 0;
  }
  ZT_CHECK(!o.json, UsageError, "--json goes with --detailed");
  for (const char* flag : kSetupFlags) {
    ZT_CHECK(o.cmd->count(flag) == 0, UsageError, flag, " applies to --detailed; DeepSpeed's estimators take "
             "--num_gpus_per_node, --num_nodes and --additional_buffer_factor");
  }
  ZT_CHECK(o.stage == "zero2" || o.stage == "zero3", UsageError, "zerotrain estimate zero2|zero3 (DeepSpeed's "
           "estimators) or zerotrain estimate --detailed (ours); got '", o.stage, "'");
  const estimate::ModelShape shape = model_shape(o.m, false);
  // DeepSpeed counts every parameter, trainable or not; the shape lists trainable ones only
  // when built from a module, which for the built-in models is all of them.
  const double total = static_cast<double>(shape.total_params() + shape.frozen_params);
  if (o.stage == "zero2") {
    std::cout << estimate::zero2_report(total, o.cluster);
  } else {
    ZT_CHECK(!o.m.model.empty() || !o.m.largest_layer_params.empty(), UsageError,
             "zero3 needs --largest_layer_params L (the largest single module's parameters), or --model");
    std::cout << estimate::zero3_report(total, static_cast<double>(shape.largest_layer_params), o.cluster);
  }
  return 0;
}

int run_advise(const AdviseOptions& o) {
  ZT_CHECK(!o.memory_per_rank.empty(), UsageError, "--memory_per_rank BYTES is required (e.g. 16GiB)");
  estimate::Setup setup = o.setup;
  finish_setup(setup, o.runtime_bytes, o.sub_group_size);
  if (o.precision == "bf16") {
    setup.precision = estimate::Precision::kBf16;
  } else if (o.precision == "fp16") {
    setup.precision = estimate::Precision::kFp16;
  } else {
    ZT_CHECK(o.precision == "fp32", UsageError, "--precision ", o.precision, ": fp32, bf16 or fp16");
  }
  const estimate::ModelShape shape = model_shape(o.m, true);
  const int64_t per_rank = strings::parse_bytes(o.memory_per_rank, "--memory_per_rank");
  const std::optional<int64_t> host =
      o.host_memory.empty() ? std::nullopt : std::optional(strings::parse_bytes(o.host_memory, "--host_memory"));
  const std::optional<int64_t> disk =
      o.disk_bytes.empty() ? std::nullopt : std::optional(strings::parse_bytes(o.disk_bytes, "--disk_bytes"));
  ZT_CHECK(!o.ranks_per_node || *o.ranks_per_node >= 1, UsageError, "--ranks_per_node must be at least 1");
  const int per_node = o.ranks_per_node.value_or(setup.world_size);
  const auto advice = estimate::advise(shape, setup, {per_rank, host, disk, per_node});
  std::cout << "Fastest first, " << shape.name << " on " << setup.world_size << " rank(s), "
            << estimate::to_string(setup.precision) << ", micro-batch " << setup.micro_batch << ":\n"
            << advice.why;
  if (!advice.fits) {
    std::cout << "Nothing fits in " << o.memory_per_rank << " per rank"
              << (host ? " and " + o.host_memory + " of host memory" : std::string())
              << (disk ? " and " + o.disk_bytes + " of disk" : std::string()) << ". Add ranks (--world_size), "
              << "lower --micro_batch or --seq_len"
              << (setup.activation_checkpointing ? "" : ", see what activation checkpointing would save "
                                                         "(--activation_checkpointing)")
              << (setup.precision == estimate::Precision::kFp32 ? ", train in bf16 (--precision bf16)" : "")
              << (disk ? "" : ", or give the free space of a local disk (--disk_bytes) to consider NVMe offload")
              << ".\n";
    return 1;
  }
  const auto& s = advice.setup;
  using estimate::Offload;
  std::string offload;
  if (s.offload_optimizer != Offload::kNone) {
    offload = std::string(" with optimizer") + (s.offload_param != Offload::kNone ? " and parameter" : "") +
              " offload to " + (s.offload_optimizer == Offload::kNvme ? "NVMe" : "host memory");
  } else if (s.offload_param != Offload::kNone) {
    offload = " with parameter offload to host memory";
  }
  std::cout << "\nUse ZeRO stage " << s.stage << offload << ": the fastest setup that fits.\n\n"
            << advice.config_json << "\n";
  if (!advice.note.empty()) std::cout << "\n" << advice.note << "\n";
  return 0;
}

}  // namespace

Command add_estimate_command(CLI::App& app) {
  auto o = std::make_shared<EstimateOptions>();
  CLI::App* cmd = app.add_subcommand("estimate", "Memory needed: DeepSpeed's estimators (zero2, zero3) or ours (--detailed)");
  o->cmd = cmd;
  cmd->add_option("stage", o->stage, "zero2 or zero3: DeepSpeed's estimate_zero{2,3}_model_states_mem_needs");
  add_model_options(cmd, o->m);
  cmd->add_option("--params", o->m.params, "Total parameters (2783959040, 2.78e9)");
  cmd->add_option("--largest_layer_params", o->m.largest_layer_params, "The largest single module's parameters (zero3)");
  cmd->add_option("--num_gpus_per_node", o->cluster.num_gpus_per_node)->capture_default_str();
  cmd->add_option("--num_nodes", o->cluster.num_nodes)->capture_default_str();
  cmd->add_option("--additional_buffer_factor", o->cluster.additional_buffer_factor)->capture_default_str();
  cmd->add_flag("--detailed", o->detailed, "This engine's bytes per rank: every stage, offload option and precision");
  cmd->add_flag("--json", o->json, "With --detailed: the breakdowns as JSON");
  add_setup_options(cmd, o->setup, o->runtime_bytes, o->sub_group_size);
  return {cmd, [o] { return run_estimate(*o); }};
}

Command add_advise_command(CLI::App& app) {
  auto a = std::make_shared<AdviseOptions>();
  CLI::App* cmd = app.add_subcommand("advise", "Which ZeRO stage and offload fit a memory budget, and the config");
  add_model_options(cmd, a->m);
  cmd->add_option("--memory_per_rank", a->memory_per_rank, "Memory one rank may use (17179869184, 16GiB)");
  cmd->add_option("--host_memory", a->host_memory, "Host memory offload may use on a node (e.g. 64GiB)");
  cmd->add_option("--disk_bytes", a->disk_bytes,
                  "Free space of the local disk for nvme_path (e.g. 500GiB): lets the advisor pick NVMe offload");
  cmd->add_option("--ranks_per_node", a->ranks_per_node, "Ranks sharing the host memory and disk (default: all)");
  cmd->add_option("--precision", a->precision, "fp32, bf16 or fp16")->capture_default_str();
  add_setup_options(cmd, a->setup, a->runtime_bytes, a->sub_group_size);
  return {cmd, [a] { return run_advise(*a); }};
}

}  // namespace zerotrain::tools
