#include "zerotrain/stages/plan.h"

namespace zerotrain::stages {

GroupPlan plan_group(const StageTraits& stage, const partition::GroupLayout& layout, const PlanDtypes& dtypes,
                     int64_t resident_numel) {
  const int64_t full = layout.numel(), shard = layout.shard_numel();
  GroupPlan p;
  p.params_numel = stage.shards_parameters ? resident_numel + (dtypes.half_model ? shard : 0) : full;
  p.grad_full_numel = stage.shards_gradients ? 0 : full;
  p.grad_shard_numel = stage.shards_optimizer ? shard : 0;
  // Without sharding, fp32 parameters are stepped in place; otherwise the optimizer owns an
  // fp32 master copy (all of it, or this rank's shard).
  p.master_numel = stage.shards_optimizer ? shard : dtypes.half_model ? full : 0;
  p.optimizer_numel = stage.shards_optimizer ? shard : full;
  p.stages_every_bucket = stage.shards_gradients;
  p.step_copy_numel = dtypes.accum_is_fp32 ? 0 : (stage.shards_optimizer ? shard : full);
  return p;
}

}  // namespace zerotrain::stages
