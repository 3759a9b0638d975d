#include "zerotrain/stages/stage.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "zerotrain/core/error.h"

namespace zerotrain::stages {

void Stage::arrange(GroupState& g, int64_t bucket_numel) {
  std::vector<int64_t> numels;
  for (const auto& p : g.params) numels.push_back(p.numel());
  g.layout = partition::GroupLayout(numels, bucket_numel, ctx_.comm.world_size(), ctx_.comm.rank());
}

void Stage::place(GroupState& g) {
  // The parameters move into one flat buffer; the model keeps views of it.
  g.flat = at::empty({g.layout.numel()}, g.options(ctx_.dtypes.model));
  {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < g.params.size(); ++i) {
      const auto r = g.layout.param(i);
      auto view = g.flat.narrow(0, r.offset, r.numel);
      view.copy_(g.params[i].detach().reshape(-1));
      g.params[i].set_data(view.view(g.params[i].sizes()));
    }
  }
  // Every rank starts from rank 0's weights, as DeepSpeed's engine broadcasts them.
  if (g.layout.numel() > 0) ctx_.comm.broadcast(g.flat, 0).wait();
}

int64_t Stage::param_nbytes(const GroupState& g) const {
  return g.flat.defined() ? static_cast<int64_t>(g.flat.nbytes()) : 0;
}

void Stage::allocate(GroupState& g) {
  const precision::Dtypes& d = ctx_.dtypes;
  const GroupPlan plan = plan_group(traits_, g.layout,
                                    {d.half(), d.accum == at::kFloat, d.accum == d.comm});
  g.arrived.assign(g.params.size(), false);
  g.staging.resize(g.layout.buckets().size());
  g.shard_chunk_zero.assign(g.layout.buckets().size(), true);
  if (plan.grad_full_numel > 0) g.grad_full = at::zeros({plan.grad_full_numel}, g.options(d.accum));
  if (plan.grad_shard_numel > 0) g.grad_shard = at::zeros({plan.grad_shard_numel}, g.options(d.accum));
  if (plan.master_numel > 0 && !ctx_.master_offloaded) {
    init_master(g);
    ZT_INTERNAL_ASSERT(g.master.numel() == plan.master_numel, "master weights differ from the plan");
  }
}

void Stage::copy_shard_weights(GroupState& g, int64_t offset, const at::Tensor& out) {
  const int64_t end = offset + out.numel();
  for (const ShardPiece& piece : weight_pieces(g)) {
    const int64_t begin = std::max(offset, piece.shard_offset), stop = std::min(end, piece.shard_offset + piece.numel);
    if (begin >= stop) continue;
    ZT_INTERNAL_ASSERT(piece.weights.defined(), "copy_shard_weights over weights without memory");
    out.narrow(0, begin - offset, stop - begin).copy_(piece.weights.narrow(0, begin - piece.shard_offset, stop - begin));
  }
}

void Stage::zero_gradients(GroupState& g) {
  if (g.grad_full.defined()) g.grad_full.zero_();
  if (g.grad_shard.defined()) g.grad_shard.zero_();
  std::fill(g.shard_chunk_zero.begin(), g.shard_chunk_zero.end(), true);
}

void Stage::end_user_gather(std::vector<GroupState>& groups, const std::vector<int>&, std::optional<int> modifier_rank) {
  if (!modifier_rank) return;
  for (GroupState& g : groups) {
    if (g.layout.numel() == 0) continue;
    ctx_.comm.broadcast(g.flat, *modifier_rank).wait();
    if (g.master.defined()) refresh_master(g);
  }
}

comm::ReduceOp Stage::prepare_average(const at::Tensor& wire) {
  const bool pre_divide = wire.scalar_type() == at::kHalf || wire.scalar_type() == at::kBFloat16;
  if (!pre_divide) return comm::ReduceOp::kAvg;
  wire.div_(static_cast<double>(ctx_.comm.world_size()));
  return comm::ReduceOp::kSum;
}

}  // namespace zerotrain::stages
