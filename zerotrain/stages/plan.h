// The buffers one rank of the engine holds for a parameter group, per stage, in elements
// (no LibTorch). The engine allocates from this plan and the estimator counts it, so the
// two cannot drift apart (estimate_engine_test checks them to the byte).
#pragma once

#include <cstdint>

#include "zerotrain/partition/layout.h"
#include "zerotrain/stages/traits.h"

namespace zerotrain::stages {

// The dtypes that decide which copies exist.
struct PlanDtypes {
  bool half_model = false;        // bf16/fp16 parameters: an fp32 master copy exists
  bool accum_is_fp32 = true;      // gradients accumulate in fp32: the step needs no fp32 copy
  bool accum_is_comm = true;      // gradients accumulate in the dtype they travel in
};

struct GroupPlan {
  int64_t params_numel = 0;       // the model dtype's parameter buffer
  int64_t grad_full_numel = 0;    // accumulation dtype: gradients of every parameter
  int64_t grad_shard_numel = 0;   // accumulation dtype: the reduced gradients of this rank's shard
  int64_t master_numel = 0;       // fp32 weights the optimizer steps (0: it steps the parameters)
  int64_t optimizer_numel = 0;    // elements each optimizer state tensor has
  // Every bucket is copied into a staging buffer in the communication dtype while it fills
  // (gradients not kept whole); otherwise only a bucket accumulated in another dtype is.
  bool stages_every_bucket = false;
  int64_t step_copy_numel = 0;    // the step's fp32 copy of 16-bit gradients
};

GroupPlan plan_group(const StageTraits& stage, const partition::GroupLayout& layout, const PlanDtypes& dtypes);

}  // namespace zerotrain::stages
