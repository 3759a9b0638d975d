// `zerotrain estimate` and `zerotrain advise` (docs/estimator.md):
//   estimate zero2|zero3   DeepSpeed's estimators, digit for digit;
//   estimate --detailed    what this engine holds per rank, piece by piece;
//   advise                 DeepSpeed's procedure for picking a stage, on our numbers.
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <optional>

#include "tools/commands.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/estimate/deepspeed_estimator.h"
#include "zerotrain/estimate/detailed.h"
#include "zerotrain/models/models.h"
#include "zerotrain/stages/traits.h"

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
};

struct AdviseOptions {
  ModelOptions m;
  estimate::Setup setup;
  std::string precision = "bf16";
  std::string memory_per_rank;
  std::string host_memory;
  std::optional<int> ranks_per_node;
  std::string runtime_bytes;
};

const char* const kSetupFlags[] = {"--world_size", "--micro_batch", "--seq_len", "--reduce_bucket_size",
                                   "--overlap_comm", "--runtime_bytes", "--activation_checkpointing"};
const char* const kClusterFlags[] = {"--num_gpus_per_node", "--num_nodes", "--additional_buffer_factor"};

void add_model_options(CLI::App* cmd, ModelOptions& m) {
  cmd->add_option("--model", m.model, "A built-in model: gpt, mlp or convnet (its activations are not estimated)");
  cmd->add_option("--model_config", m.model_config, "preset=NAME,key=value,... (as zerotrain train)");
}

void add_setup_options(CLI::App* cmd, estimate::Setup& s, std::string& runtime_bytes) {
  // Every number is range-checked where it is parsed, as the config reader checks the keys.
  cmd->add_option("--world_size", s.world_size, "Ranks")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--micro_batch", s.micro_batch, "Samples per rank per micro-step")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--seq_len", s.seq_len, "Tokens per sample (gpt; default: the block size)")
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
}

// The parameter counts and, for a built-in model, its shape (counted from its fields; the
// model is not built).
estimate::ModelShape model_shape(const ModelOptions& m, bool need_model) {
  if (!m.model.empty()) {
    ZT_CHECK(m.params.empty() && m.largest_layer_params.empty(), UsageError,
             "give --model or --params/--largest_layer_params, not both");
    return models::shape_of(m.model, m.model_config);
  }
  ZT_CHECK(!need_model, UsageError, "this estimate needs a built-in model for its activations: --model gpt "
           "[--model_config preset=small] (or mlp)");
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

int64_t runtime_of(const std::string& text) {
  return text.empty() ? kDefaultRuntimeBytes : strings::parse_bytes(text, "--runtime_bytes");
}

// --detailed --json: every implemented-or-not setup with its breakdown, for scripts.
nlohmann::ordered_json detailed_json(const estimate::ModelShape& shape, const estimate::Setup& base) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (auto precision : {estimate::Precision::kFp32, estimate::Precision::kBf16, estimate::Precision::kFp16}) {
    for (int stage : {0, 1, 2, 3}) {
      for (int offload = 0; offload < 3; ++offload) {
        estimate::Setup s = base;
        s.precision = precision;
        s.stage = stage;
        s.offload_optimizer = offload >= 1;
        s.offload_param = offload == 2;
        const auto traits = stages::traits_of(stage);
        if ((s.offload_optimizer && !traits.shards_optimizer) || (s.offload_param && !traits.shards_parameters)) continue;
        const auto b = estimate::estimate(shape, s);
        s.activation_checkpointing = true;
        const auto ck = estimate::estimate(shape, s);
        rows.push_back({{"precision", estimate::to_string(precision)}, {"stage", stage},
                        {"offload_optimizer", s.offload_optimizer}, {"offload_param", s.offload_param},
                        {"implemented", b.implemented}, {"params", b.params}, {"grads", b.grads},
                        {"master", b.master}, {"optimizer", b.optimizer}, {"buffers", b.buffers},
                        {"model_states", b.model_states()}, {"host", b.host}, {"activations", b.activations},
                        {"activations_checkpointed", ck.activations}, {"backward_transient", b.backward_transient},
                        {"runtime", b.runtime}, {"peak", b.peak()}, {"peak_checkpointed", ck.peak()}});
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
    setup.runtime_bytes = runtime_of(o.runtime_bytes);
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
  setup.runtime_bytes = runtime_of(o.runtime_bytes);
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
  ZT_CHECK(!o.ranks_per_node || *o.ranks_per_node >= 1, UsageError, "--ranks_per_node must be at least 1");
  const int per_node = o.ranks_per_node.value_or(setup.world_size);
  const auto advice = estimate::advise(shape, setup, per_rank, host, per_node);
  std::cout << "Fastest first, " << shape.name << " on " << setup.world_size << " rank(s), "
            << estimate::to_string(setup.precision) << ", micro-batch " << setup.micro_batch << ":\n"
            << advice.why;
  if (!advice.fits) {
    std::cout << "Nothing fits in " << o.memory_per_rank << " per rank"
              << (host ? " and " + o.host_memory + " of host memory" : std::string()) << ". Add ranks (--world_size), "
              << "lower --micro_batch or --seq_len"
              << (setup.activation_checkpointing ? "" : ", see what activation checkpointing would save "
                                                         "(--activation_checkpointing)")
              << (setup.precision == estimate::Precision::kFp32 ? ", or train in bf16 (--precision bf16)" : "")
              << ".\n";
    return 1;
  }
  const auto& s = advice.setup;
  std::cout << "\nUse ZeRO stage " << s.stage
            << (s.offload_optimizer ? (s.offload_param ? " with optimizer and parameter offload" : " with optimizer offload")
                                    : "")
            << ": the fastest setup that fits"
            << (advice.breakdown.implemented ? "." : " (this engine does not run offload yet).")
            << "\n\n"
            << advice.config_json << "\n";
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
  add_setup_options(cmd, o->setup, o->runtime_bytes);
  return {cmd, [o] { return run_estimate(*o); }};
}

Command add_advise_command(CLI::App& app) {
  auto a = std::make_shared<AdviseOptions>();
  CLI::App* cmd = app.add_subcommand("advise", "Which ZeRO stage and offload fit a memory budget, and the config");
  add_model_options(cmd, a->m);
  cmd->add_option("--memory_per_rank", a->memory_per_rank, "Memory one rank may use (17179869184, 16GiB)");
  cmd->add_option("--host_memory", a->host_memory, "Host memory offload may use on a node (e.g. 64GiB)");
  cmd->add_option("--ranks_per_node", a->ranks_per_node, "Ranks sharing the host memory (default: all)");
  cmd->add_option("--precision", a->precision, "fp32, bf16 or fp16")->capture_default_str();
  add_setup_options(cmd, a->setup, a->runtime_bytes);
  return {cmd, [a] { return run_advise(*a); }};
}

}  // namespace zerotrain::tools
