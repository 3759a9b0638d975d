// The buffers one rank of the engine holds for a parameter group, per stage, in elements
// (no LibTorch). The engine allocates from this plan and the estimator counts it, so the
// two cannot drift apart (estimate_engine_test checks them to the byte).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "zerotrain/config/stage_traits.h"
#include "zerotrain/partition/layout.h"

namespace zerotrain::stages {

// The dtypes that decide which copies exist.
struct PlanDtypes {
  bool half_model = false;        // bf16/fp16 parameters: an fp32 master copy exists
  bool accum_is_fp32 = true;      // gradients accumulate in fp32: the step needs no fp32 copy
  bool accum_is_comm = true;      // gradients accumulate in the dtype they travel in
};

struct GroupPlan {
  // The model dtype's parameter buffers: all parameters, or at stage 3 the resident unit
  // and, in 16 bits, this rank's parameter shard (in fp32 the master shard is that shard).
  int64_t params_numel = 0;
  int64_t grad_full_numel = 0;    // accumulation dtype: gradients of every parameter
  int64_t grad_shard_numel = 0;   // accumulation dtype: the reduced gradients of this rank's shard
  int64_t master_numel = 0;       // fp32 weights the optimizer steps (0: it steps the parameters)
  int64_t optimizer_numel = 0;    // elements each optimizer state tensor has
  // Every bucket is copied into a staging buffer in the communication dtype while it fills
  // (gradients not kept whole); otherwise only a bucket accumulated in another dtype is.
  bool stages_every_bucket = false;
  int64_t step_copy_numel = 0;    // the step's fp32 copy of 16-bit gradients
};

// `resident_numel`: at stage 3, the elements of the unit that stays gathered (stages/unit_plan.h).
GroupPlan plan_group(const config::StageTraits& stage, const partition::GroupLayout& layout, const PlanDtypes& dtypes,
                     int64_t resident_numel = 0);

// Gradient reductions in flight at once: two with overlap_comm (DeepSpeed's double ipg
// buffers), none without (a bucket is finished before backward goes on).
inline std::size_t reductions_in_flight(bool overlap_comm) { return overlap_comm ? 2 : 0; }
// Stage 2-3 staging buffers that may exist at once: those in flight and the bucket filling.
inline std::size_t staging_buffers_kept(bool overlap_comm) { return reductions_in_flight(overlap_comm) + 1; }

// The most staging elements a stage 2-3 engine holds (lent or kept, buffer_pool.h) over
// backwards that fill and reduce buckets of `bucket_numels` in that order, one at a time.
int64_t simulate_staging_peak(const std::vector<int64_t>& bucket_numels, bool overlap_comm);

}  // namespace zerotrain::stages
