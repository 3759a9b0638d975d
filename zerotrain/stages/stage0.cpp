// Stage 0, DeepSpeed without ZeRO (DDP): full gradients, all-reduced bucket by bucket at the
// accumulation boundary; the optimizer steps every parameter on every rank.
#include <ATen/ATen.h>

#include "zerotrain/stages/stage_impls.h"

namespace zerotrain::stages {

void Stage0::on_gradient(GroupState& g, std::size_t param, const at::Tensor& grad) {
  const partition::Range where = g.layout.param(param);
  g.grad_full.narrow(0, where.offset, where.numel).add_(grad.reshape(-1));
}

PendingReduce Stage0::reduce_bucket(GroupState& g, std::size_t bucket) {
  const partition::Bucket& b = g.layout.buckets()[bucket];
  PendingReduce r;
  const at::Tensor full = g.grad_full.narrow(0, b.flat.offset, b.flat.numel);
  at::Tensor input = full;
  // Gradients accumulated in another dtype travel through a copy in the wire's dtype.
  if (full.scalar_type() != ctx_.dtypes.comm) {
    input = r.keep_alive = ctx_.meter->track(full.to(ctx_.dtypes.comm));
    r.result = input;
    r.write_back = full;
  }
  const comm::ReduceOp op = prepare_average(input);
  r.work = ctx_.comm.all_reduce(input, op);
  return r;
}

std::vector<GradientPiece> Stage0::gradient_pieces(const GroupState& g) const {
  std::vector<GradientPiece> pieces;
  for (std::size_t i = 0; i < g.params.size(); ++i) pieces.push_back({i, g.layout.param(i).offset, g.layout.param(i).numel});
  return pieces;
}

std::vector<int64_t> Stage0::optimizer_segments(const GroupState& g) const {
  std::vector<int64_t> segments;
  for (std::size_t i = 0; i < g.params.size(); ++i) segments.push_back(g.layout.param(i).numel);
  return segments;
}

void Stage0::publish_weights(std::vector<GroupState>& groups) {
  for (GroupState& g : groups) {
    if (g.master.defined()) g.flat.copy_(g.master);   // fp32 master -> half parameters
  }
}

void Stage0::init_master(GroupState& g) { g.master = g.flat.to(at::kFloat); }

void Stage0::refresh_master(GroupState& g) { g.master.copy_(g.flat); }

}  // namespace zerotrain::stages
