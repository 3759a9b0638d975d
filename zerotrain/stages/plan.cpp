#include "zerotrain/stages/plan.h"

#include <algorithm>
#include <deque>

#include "zerotrain/stages/buffer_pool.h"

namespace zerotrain::stages {

GroupPlan plan_group(const config::StageTraits& stage, const partition::GroupLayout& layout, const PlanDtypes& dtypes,
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

namespace {
struct Size {
  int64_t n;
  int64_t numel() const { return n; }
};
}  // namespace

int64_t simulate_staging_peak(const std::vector<int64_t>& bucket_numels, bool overlap_comm) {
  BufferPool<Size> pool(staging_buffers_kept(overlap_comm));
  int64_t held = 0, peak = 0;
  const auto make = [&](int64_t n) {
    held += n;
    peak = std::max(peak, held);
    return Size{n};
  };
  const auto dropped = [&](const Size& s) { held -= s.n; };
  // As engine/grad_sync.cpp runs them: bucket k's buffer is taken when it starts filling,
  // then it launches and the oldest reductions beyond those allowed in flight finish. The
  // pool settles after a few backwards: once one leaves it as the one before did, every
  // later backward repeats it.
  std::vector<int64_t> before;
  for (int backward = 0; backward < 64; ++backward) {
    std::deque<Size> in_flight;
    for (int64_t n : bucket_numels) {
      in_flight.push_back(pool.take(n, make, dropped));
      while (in_flight.size() > reductions_in_flight(overlap_comm)) {
        pool.give_back(in_flight.front(), dropped);
        in_flight.pop_front();
      }
    }
    for (const Size& s : in_flight) pool.give_back(s, dropped);
    std::vector<int64_t> after = pool.spare_numels();
    if (backward > 0 && after == before) break;
    before = std::move(after);
  }
  return peak;
}

}  // namespace zerotrain::stages
