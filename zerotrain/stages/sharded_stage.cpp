// What stages 1 and 2 share: rank r owns chunk r of every bucket (partition/layout.h); its
// fp32 master and optimizer state cover those chunks, and after the step every rank's
// updated chunks are all-gathered back into everyone's parameters.
#include <ATen/ATen.h>

#include <utility>

#include "zerotrain/stages/stage_impls.h"

namespace zerotrain::stages {

std::vector<GradientPiece> ShardedStage::gradient_pieces(const GroupState& g) const {
  std::vector<GradientPiece> pieces;
  for (const auto& piece : g.layout.shard_pieces()) pieces.push_back({piece.param, piece.shard_offset, piece.in_param.numel});
  return pieces;
}

std::vector<ShardPiece> ShardedStage::weight_pieces(GroupState& g) {
  std::vector<ShardPiece> pieces;
  for (const auto& b : g.layout.buckets()) {
    pieces.push_back({b.shard_offset, b.chunk.numel, g.flat.scalar_type(),
                      g.flat.narrow(0, b.flat.offset + b.chunk.offset, b.chunk.numel)});
  }
  return pieces;
}

void ShardedStage::publish_weights(std::vector<GroupState>& groups) {
  std::vector<comm::Work> gathers;
  for (GroupState& g : groups) {
    for (const auto& b : g.layout.buckets()) {
      // The all-gather's input is a copy: with offload it would otherwise alias its output.
      const at::Tensor mine = g.weights_in_place
                                  ? g.flat.narrow(0, b.flat.offset + b.chunk.offset, b.chunk.numel).clone()
                                  : g.master.narrow(0, b.shard_offset, b.chunk.numel).to(g.flat.scalar_type());
      gathers.push_back(ctx_.comm.all_gather(mine, g.flat.narrow(0, b.flat.offset, b.flat.numel)));
    }
  }
  comm::wait_all(gathers);
}

void ShardedStage::init_master(GroupState& g) {
  g.master = at::empty({g.layout.shard_numel()}, g.options(at::kFloat));
  refresh_master(g);
}

void ShardedStage::refresh_master(GroupState& g) {
  for (const auto& b : g.layout.buckets()) {
    g.master.narrow(0, b.shard_offset, b.chunk.numel).copy_(g.flat.narrow(0, b.flat.offset + b.chunk.offset, b.chunk.numel));
  }
}

// Stage 1: full gradients accumulate locally; at the boundary each bucket is reduce-scattered
// so that a rank receives the averaged gradients of its own chunk.
void Stage1::on_gradient(GroupState& g, std::size_t param, const at::Tensor& grad) {
  const partition::Range where = g.layout.param(param);
  g.grad_full.narrow(0, where.offset, where.numel).add_(grad.reshape(-1));
}

PendingReduce Stage1::reduce_bucket(GroupState& g, std::size_t bucket) {
  const partition::Bucket& b = g.layout.buckets()[bucket];
  const at::ScalarType wire = ctx_.dtypes.comm;
  PendingReduce r;
  const at::Tensor full = g.grad_full.narrow(0, b.flat.offset, b.flat.numel);
  at::Tensor input = full;
  if (full.scalar_type() != wire) input = r.keep_alive = ctx_.meter->track(full.to(wire));
  const comm::ReduceOp op = prepare_average(input);
  const at::Tensor out = g.grad_shard.narrow(0, b.shard_offset, b.chunk.numel);
  if (out.scalar_type() == wire) {
    r.work = ctx_.comm.reduce_scatter(input, out, op);
  } else {
    r.result = at::empty({b.chunk.numel}, g.options(wire));
    r.write_back = out;
    r.work = ctx_.comm.reduce_scatter(input, r.result, op);
  }
  return r;
}

// Stage 2: a bucket's gradients are staged in the wire's dtype, reduce-scattered in every
// backward and accumulated into this rank's shard; the full gradients go at once. Staging
// buffers come from a pool kept across steps (staging_pool.h): each parameter's range is
// written (its gradient, or zeros when it had none), so a reused buffer needs no zeroing.
Stage2::Stage2(config::StageTraits traits, StageContext context)
    : ShardedStage(traits, std::move(context)),
      pool_(staging_buffers_kept(ctx_.zero != nullptr && ctx_.zero->effective_overlap_comm()), ctx_.meter) {}

at::Tensor& Stage2::staging_for(GroupState& g, std::size_t bucket) {
  StagingPool::Loan& loan = g.staging[bucket];
  if (!loan.buffer.defined()) loan = pool_.take(g.layout.buckets()[bucket].flat.numel, g.options(ctx_.dtypes.comm));
  return loan.buffer;
}

at::Tensor Stage2::staged_range(GroupState& g, std::size_t param) {
  const partition::Range where = g.layout.param(param);
  const std::size_t b = g.layout.bucket_of(param);
  return staging_for(g, b).narrow(0, where.offset - g.layout.buckets()[b].flat.offset, where.numel);
}

void Stage2::on_gradient(GroupState& g, std::size_t param, const at::Tensor& grad) {
  staged_range(g, param).copy_(grad.reshape(-1));
}

void Stage2::on_unused(GroupState& g, std::size_t param) { staged_range(g, param).zero_(); }

PendingReduce Stage2::reduce_bucket(GroupState& g, std::size_t bucket) {
  const partition::Bucket& b = g.layout.buckets()[bucket];
  PendingReduce r;
  StagingPool::Loan loan = std::exchange(g.staging[bucket], {});
  const at::Tensor input = loan.buffer;
  r.done = [this, lent = std::move(loan.lent)]() mutable { pool_.give_back(std::move(lent)); };
  const comm::ReduceOp op = prepare_average(input);
  const at::Tensor out = g.grad_shard.narrow(0, b.shard_offset, b.chunk.numel);
  if (g.shard_chunk_zero[bucket] && out.scalar_type() == input.scalar_type()) {
    // The first reduction since the gradients were zeroed: straight into the shard.
    r.work = ctx_.comm.reduce_scatter(input, out, op);
  } else {
    r.result = at::empty({b.chunk.numel}, g.options(ctx_.dtypes.comm));
    r.write_back = out;
    r.accumulate = !g.shard_chunk_zero[bucket];   // over the micro-steps of an accumulation
    r.work = ctx_.comm.reduce_scatter(input, r.result, op);
  }
  g.shard_chunk_zero[bucket] = false;
  return r;
}

}  // namespace zerotrain::stages
