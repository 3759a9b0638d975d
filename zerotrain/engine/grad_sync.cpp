// The backward half of the engine: a post-hook on every parameter's AccumulateGrad node
// moves each gradient into the engine's buffers as soon as autograd produces it, and a
// bucket is reduced (stage 0: all_reduce, stages 1-2: reduce_scatter into the owners'
// chunks) once all its parameters are in. Buckets launch in one fixed order on every rank,
// so ranks whose backward visits parameters in a different order still issue the same
// collectives in the same order.
#include "zerotrain/engine/engine_state.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "zerotrain/core/error.h"

namespace zerotrain::engine::detail {
namespace {

class GradientReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradientReadyHook(EngineState* state, size_t group, size_t param) : state_(state), group_(group), param_(param) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    state_->on_gradient(group_, param_);
    return outputs;
  }

 private:
  EngineState* state_;
  size_t group_, param_;
};

}  // namespace

void EngineState::install_hooks() {
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      auto accumulator = torch::autograd::impl::grad_accumulator(groups[g].params[i]);
      const uintptr_t key = accumulator->add_post_hook(std::make_unique<GradientReadyHook>(this, g, i));
      accumulators.emplace_back(std::move(accumulator), key);
    }
    for (size_t b = 0; b < groups[g].layout.buckets().size(); ++b) launch_order.emplace_back(g, b);
  }
}

EngineState::~EngineState() {
  for (auto& [accumulator, key] : accumulators) accumulator->del_post_hook(key);
}

void EngineState::begin_backward() {
  ZT_CHECK(in_flight.empty(), UsageError, "engine.backward() twice without engine.step() in between; call step() "
           "after every backward (it only counts the micro-step until the accumulation boundary)");
  reducing = stage == 2 || (at_boundary() && no_sync_depth == 0);
  if (at_boundary()) boundary_reduced = reducing;
  next_launch = 0;
  for (GroupState& g : groups) {
    for (size_t b = 0; b < g.layout.buckets().size(); ++b) {
      g.pending[b] = static_cast<int>(g.layout.buckets()[b].params.size());
    }
    std::fill(g.arrived.begin(), g.arrived.end(), false);
  }
}

at::Tensor EngineState::track_staging(at::Tensor buffer) {
  staging_nbytes += static_cast<int64_t>(buffer.nbytes());
  peak_staging_nbytes = std::max(peak_staging_nbytes, staging_nbytes);
  return buffer;
}

at::Tensor& EngineState::staging_for(GroupState& g, size_t bucket) {
  at::Tensor& buffer = g.staging[bucket];
  if (!buffer.defined()) {
    buffer = track_staging(at::zeros({g.layout.buckets()[bucket].flat.numel}, precision.comm));
  }
  return buffer;
}

void EngineState::on_gradient(size_t group, size_t param) {
  GroupState& g = groups[group];
  at::Tensor& grad = g.params[param].mutable_grad();
  if (!grad.defined()) return;
  ZT_CHECK(!g.arrived[param], UsageError, "parameter ", g.param_names[param],
           " got a second gradient in one backward; call engine.backward once per micro-step");
  g.arrived[param] = true;
  const partition::Range where = g.layout.param(param);
  const size_t b = g.layout.bucket_of(param);
  if (stage <= 1) {
    g.grad_full.narrow(0, where.offset, where.numel).add_(grad.reshape(-1));
  } else {
    staging_for(g, b).narrow(0, where.offset - g.layout.buckets()[b].flat.offset, where.numel).copy_(grad.reshape(-1));
  }
  grad.reset();   // the engine's buffers hold it now; the full gradient is freed at once
  if (--g.pending[b] == 0) launch_ready_buckets();
}

void EngineState::end_backward() {
  // Parameters that got no gradient (unused in this forward) count as zero gradients.
  for (GroupState& g : groups) {
    for (size_t i = 0; i < g.params.size(); ++i) {
      if (g.arrived[i]) continue;
      ZT_CHECK(ignore_unused_parameters, UsageError, "parameter ", g.param_names[i],
               " got no gradient in this backward (it was not used in the forward); set "
               "zero_optimization.ignore_unused_parameters to true, or freeze it (requires_grad false)");
      const size_t b = g.layout.bucket_of(i);
      if (stage == 2) staging_for(g, b);
      --g.pending[b];
    }
  }
  launch_ready_buckets();
  ZT_INTERNAL_ASSERT(!reducing || next_launch == launch_order.size(), "buckets left unlaunched");
  // Stage 2 keeps only its shard: finish now so the staging buffers go before the next forward.
  if (stage == 2) wait_reductions();
}

void EngineState::launch_ready_buckets() {
  if (!reducing) return;
  while (next_launch < launch_order.size()) {
    const auto [g, b] = launch_order[next_launch];
    if (groups[g].pending[b] > 0) return;
    launch(g, b);
    ++next_launch;
  }
}

void EngineState::launch(size_t group, size_t bucket) {
  GroupState& g = groups[group];
  const partition::Bucket& b = g.layout.buckets()[bucket];
  PendingReduce r;
  // Gradients travel in the communication dtype: a bucket accumulated in another one is
  // reduced through a copy, and the result comes back when the reduction is done. In 16
  // bits they are divided by the world size before the sum, as DeepSpeed does: a backend
  // that adds in fp16 would overflow on the sum where the average fits.
  const at::ScalarType wire = precision.comm;
  const bool pre_divide = wire == at::kHalf || wire == at::kBFloat16;
  const comm::ReduceOp op = pre_divide ? comm::ReduceOp::kSum : comm::ReduceOp::kAvg;
  const double world = static_cast<double>(comm.world_size());
  if (stage <= 1) {
    const at::Tensor full = g.grad_full.narrow(0, b.flat.offset, b.flat.numel);
    at::Tensor input = full;
    if (full.scalar_type() != wire) input = r.keep_alive = track_staging(full.to(wire));
    if (pre_divide) input.div_(world);
    if (stage == 0) {
      r.work = comm.all_reduce(input, op);
      if (r.keep_alive.defined()) {
        r.result = input;
        r.write_back = full;
      }
    } else {
      const at::Tensor out = g.grad_shard.narrow(0, b.shard_offset, b.chunk.numel);
      if (out.scalar_type() == wire) {
        r.work = comm.reduce_scatter(input, out, op);
      } else {
        r.result = at::empty({b.chunk.numel}, wire);
        r.write_back = out;
        r.work = comm.reduce_scatter(input, r.result, op);
      }
    }
  } else {
    r.keep_alive = std::move(g.staging[bucket]);
    g.staging[bucket] = at::Tensor();
    if (pre_divide) r.keep_alive.div_(world);
    r.result = at::empty({b.chunk.numel}, wire);
    r.write_back = g.grad_shard.narrow(0, b.shard_offset, b.chunk.numel);
    r.accumulate = true;   // over the micro-steps of an accumulation
    r.work = comm.reduce_scatter(r.keep_alive, r.result, op);
  }
  in_flight.push_back(std::move(r));
  // Without overlap_comm a bucket is finished before backward goes on (DeepSpeed reduces on
  // the compute stream then), which keeps one staging buffer alive. With it, at most two
  // buckets are in flight, as DeepSpeed's double ipg buffers: stage 2 must not hold every
  // bucket's full gradients until the end of backward.
  const size_t max_in_flight = overlap_comm ? 2 : 0;
  while (in_flight.size() > max_in_flight) finish_oldest();
}

void EngineState::finish_oldest() {
  PendingReduce& r = in_flight.front();
  r.work.wait();
  if (r.write_back.defined()) {
    if (r.accumulate) {
      r.write_back.add_(r.result);
    } else {
      r.write_back.copy_(r.result);
    }
  }
  if (r.keep_alive.defined()) staging_nbytes -= static_cast<int64_t>(r.keep_alive.nbytes());
  in_flight.pop_front();
}

void EngineState::wait_reductions() {
  while (!in_flight.empty()) finish_oldest();
}

}  // namespace zerotrain::engine::detail
