#include "zerotrain/config/trainer_blocks.h"

#include "zerotrain/core/error.h"

namespace zerotrain::config {
namespace {

template <class T>
Auto<T> pending() {
  Auto<T> field;
  field.is_auto = true;
  return field;
}

OptimizerConfig adamw() {
  AdamParams p;
  p.lr = pending<double>();
  p.betas = pending<std::array<double, 2>>();
  p.eps = pending<double>();
  p.weight_decay = pending<double>();
  OptimizerConfig o;
  o.type = "AdamW";
  o.kind = OptimizerKind::kAdamW;
  o.params = p;
  return o;
}

template <class Params>
void pend_warmup(Params& p) {
  p.warmup_min_lr = pending<double>();
  p.warmup_max_lr = pending<double>();
  p.warmup_num_steps = pending<int64_t>();
  p.warmup_type = WarmupType::kLinear;
}

std::optional<SchedulerConfig> schedule(const std::string& type) {
  SchedulerConfig s;
  if (type == "linear") {
    WarmupDecayLRParams p;
    pend_warmup(p);
    p.total_num_steps = pending<std::optional<int64_t>>();
    s.type = "WarmupDecayLR";
    s.kind = SchedulerKind::kWarmupDecayLR;
    s.params = p;
  } else if (type == "cosine") {
    WarmupCosineLRParams p;
    p.total_num_steps = pending<std::optional<int64_t>>();
    p.warmup_num_steps = pending<int64_t>();
    p.warmup_min_ratio = 0.0;
    p.cos_min_ratio = 0.0;
    p.warmup_type = WarmupType::kLinear;
    s.type = "WarmupCosineLR";
    s.kind = SchedulerKind::kWarmupCosineLR;
    s.params = p;
  } else if (type == "constant_with_warmup") {
    WarmupLRParams p;
    pend_warmup(p);
    s.type = "WarmupLR";
    s.kind = SchedulerKind::kWarmupLR;
    s.params = p;
  } else if (type == "constant") {
    return std::nullopt;
  } else {
    throw UsageError("--lr_scheduler_type " + type +
                     ": give linear, cosine, constant_with_warmup or constant (or put a scheduler block in the "
                     "DeepSpeed config)");
  }
  return s;
}

}  // namespace

void add_trainer_blocks(Config& config, const std::string& lr_scheduler_type) {
  auto wanted = schedule(lr_scheduler_type);   // checks the name even when the config has a schedule
  if (!config.optimizer) {
    config.optimizer = adamw();
    config.sources["optimizer"] = Source::kAuto;
  }
  if (!config.scheduler && wanted) {
    config.scheduler = std::move(wanted);
    config.sources["scheduler"] = Source::kAuto;
  }
}

}  // namespace zerotrain::config
