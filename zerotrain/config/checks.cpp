// Checks that span more than one block. Each mirrors a DeepSpeed assertion (named in the
// comment) or closes a case DeepSpeed lets through silently.
#include <algorithm>
#include <cmath>
#include <string>

#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"

namespace zerotrain::config {
namespace {

// The stage numbers DeepSpeed's assertions name, in traits: its stage_1_and_2.py optimizer
// (stages 1 and 2) shards the optimizer but not the parameters, and stage 2 of those also
// shards the gradients. A stage outside 0..3 is neither (the reader reports it).
bool stage_1_or_2(const ZeroConfig& z) {
  const auto t = z.traits();
  return t && t->shards_optimizer && !t->shards_parameters;
}
bool stage_2(const ZeroConfig& z) { return stage_1_or_2(z) && z.traits()->shards_gradients; }

void check_precision(const Config& c, Diagnostics& diags) {
  // config.py: 'bfloat16 and fp16 modes cannot be simultaneously enabled'
  if (c.fp16_enabled() && c.bf16_enabled()) {
    diags.error("bf16.enabled", "fp16 and bf16 cannot both be enabled", "enable one of them");
  }
  // config.py: fp16_master_weights_and_grads needs ZeRO-2 with CPU optimizer offload
  const auto& z = c.zero_optimization;
  if (c.fp16.fp16_master_weights_and_grads &&
      !(stage_2(z) && z.offload_optimizer && z.offload_optimizer->device == OffloadDevice::kCpu)) {
    diags.error("fp16.fp16_master_weights_and_grads",
                "only supported with ZeRO stage 2 and offload_optimizer.device \"cpu\"",
                "set zero_optimization.stage to 2 with CPU optimizer offload, or remove the key");
  }
}

void check_zero(const Config& c, Diagnostics& diags) {
  const auto& z = c.zero_optimization;
  // DeepSpeed ignores offload_param below stage 3; asking for it there is a mistake.
  if (z.offload_param && z.offload_param->enabled() && !z.shards_parameters()) {
    diags.error("zero_optimization.offload_param", "parameter offload needs ZeRO stage 3, but stage is " +
                                                       std::to_string(z.stage),
                "set zero_optimization.stage to 3, or remove offload_param");
  }
  if (z.offload_optimizer && z.offload_optimizer->enabled() && z.traits() && !z.enabled()) {
    diags.error("zero_optimization.offload_optimizer", "optimizer offload needs ZeRO stage 1, 2 or 3",
                "set zero_optimization.stage, or remove offload_optimizer");
  }
  if (z.offload_optimizer && z.offload_optimizer->ratio < 1.0 && !z.shards_parameters()) {
    diags.error("zero_optimization.offload_optimizer.ratio", "Partial offloading only supported for ZeRO Stage 3",
                "set ratio to 1.0");
  }
  for (const auto& [name, device, nvme_path] :
       {std::tuple{"offload_param", z.offload_param ? z.offload_param->device : OffloadDevice::kNone,
                   z.offload_param ? z.offload_param->nvme_path : std::nullopt},
        std::tuple{"offload_optimizer", z.offload_optimizer ? z.offload_optimizer->device : OffloadDevice::kNone,
                   z.offload_optimizer ? z.offload_optimizer->nvme_path : std::nullopt}}) {
    if (device == OffloadDevice::kNvme && (!nvme_path || nvme_path->empty())) {
      diags.error(std::string("zero_optimization.") + name + ".nvme_path", "required with device \"nvme\"",
                  "give a directory on a fast local disk");
    }
  }
  // NVMe offload reads and writes with O_DIRECT, in requests of aio.block_size bytes: they
  // must be whole 4096-byte blocks (io/from_config.cpp refuses the same at start-up).
  const bool nvme = (z.offload_optimizer && z.offload_optimizer->device == OffloadDevice::kNvme) ||
                    (z.offload_param && z.offload_param->device == OffloadDevice::kNvme);
  if (nvme && c.aio.block_size % 4096 != 0) {
    diags.error("aio.block_size", "must be a multiple of 4096 bytes for NVMe offload (O_DIRECT), got " +
                                      std::to_string(c.aio.block_size),
                "use 1048576 (DeepSpeed's default) or run `zerotrain io-bench --path DIR` to pick one");
  }
  // stage_1_and_2.py: allgather_bucket_size must be a multiple of nccl_start_alignment_factor, 2
  if (stage_1_or_2(z) && z.allgather_bucket_size % 2 != 0) {
    diags.error("zero_optimization.allgather_bucket_size",
                "must be a multiple of 2 for stages 1 and 2, got " + std::to_string(z.allgather_bucket_size));
  }
  // stage_1_and_2.py asserts postscale and no predivide when gradients are reduce-scattered.
  if (stage_2(z) && z.reduce_scatter) {
    if (c.prescale_gradients) {
      diags.error("prescale_gradients", "not supported with ZeRO stage 2 and reduce_scatter",
                  "set prescale_gradients to false (gradients are averaged after the reduce-scatter)");
    }
    if (c.gradient_predivide_factor != 1.0) {
      diags.error("gradient_predivide_factor", "must be 1.0 with ZeRO stage 2 and reduce_scatter");
    }
  }
}

void check_optimizer(const Config& c, Diagnostics& diags) {
  if (!c.optimizer || c.optimizer->type.empty()) return;
  // engine.py: ZeRO with an optimizer outside ZERO_SUPPORTED_OPTIMIZERS needs the opt-in.
  auto kind = c.optimizer->kind;
  bool zero_tested = kind == OptimizerKind::kAdam || kind == OptimizerKind::kAdamW ||
                     kind == OptimizerKind::kAdagrad || kind == OptimizerKind::kLion;
  if (c.zero_optimization.enabled() && !zero_tested && !c.zero_allow_untested_optimizer) {
    diags.error("optimizer.type", "\"" + c.optimizer->type + "\" is not a ZeRO-tested optimizer",
                "add \"zero_allow_untested_optimizer\": true to use it with ZeRO (DeepSpeed requires the same)");
  }
}

void check_scheduler(const Config& c, Diagnostics& diags) {
  if (!c.scheduler) return;
  if (const auto* p = std::get_if<WarmupCosineLRParams>(&c.scheduler->params)) {
    const auto& total = p->total_num_steps.value;
    // DeepSpeed warms up for at least 2 steps (lr_schedules.py: max(2, warmup_num_steps)), and
    // so does optim/lr_schedule.cpp, which refuses the same at start-up.
    const int64_t warmup = std::max<int64_t>(2, p->warmup_num_steps.value);
    if (!p->total_num_steps.is_auto && !p->warmup_num_steps.is_auto && total && *total <= warmup) {
      diags.error("scheduler.params.total_num_steps",
                  "must be greater than warmup_num_steps (" + std::to_string(p->warmup_num_steps.value) +
                      (warmup != p->warmup_num_steps.value ? ", warmed up for at least 2 steps" : "") +
                      "); DeepSpeed would divide by zero or decay from a negative span");
    }
  }
  if (const auto* p = std::get_if<OneCycleParams>(&c.scheduler->params)) {
    if (p->cycle_min_lr && p->cycle_max_lr && *p->cycle_min_lr > *p->cycle_max_lr) {
      diags.error("scheduler.params.cycle_min_lr", "is greater than cycle_max_lr", "swap them");
    }
  }
}

// What this build runs: a valid DeepSpeed config that asks for more is "not supported"
// here, so that `config check` and the engine's start-up (finalize) say the same.
void check_runnable(const Config& c, Diagnostics& diags) {
  const auto& z = c.zero_optimization;
  // The offloaded step is DeepSpeedCPUAdam's fused update; DeepSpeed also has CPU Adagrad
  // and Lion for offload, which this engine does not.
  if (z.offload_optimizer && z.offload_optimizer->enabled() && c.optimizer && !c.optimizer->type.empty() &&
      c.optimizer->kind != OptimizerKind::kAdam && c.optimizer->kind != OptimizerKind::kAdamW) {
    diags.not_supported("zero_optimization.offload_optimizer.device",
                        "optimizer offload with " + c.optimizer->type + " (the offloaded step is Adam's)",
                        "use Adam or AdamW, or set offload_optimizer.device to \"none\"");
  }
}

}  // namespace

void check_consistency(const Config& config, Diagnostics& diags) {
  check_runnable(config, diags);
  check_precision(config, diags);
  check_zero(config, diags);
  check_optimizer(config, diags);
  check_scheduler(config, diags);
  if (config.vocabulary_size && *config.vocabulary_size % 8 != 0) {
    diags.warning("vocabulary_size", "not a multiple of 8", "pad the vocabulary for faster matrix multiplies");
  }
}

}  // namespace zerotrain::config
