// The backward half of the engine: a post-hook on every parameter's AccumulateGrad node
// hands each gradient to the stage as soon as autograd produces it, and the bucket reducer
// (stages/bucket_reducer.h) launches a bucket's reduction once all its parameters are in.
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
  std::vector<std::vector<int>> params_per_bucket;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      auto accumulator = torch::autograd::impl::grad_accumulator(groups[g].params[i]);
      const uintptr_t key = accumulator->add_post_hook(std::make_unique<GradientReadyHook>(this, g, i));
      accumulators.emplace_back(std::move(accumulator), key);
    }
    auto& counts = params_per_bucket.emplace_back();
    for (const auto& b : groups[g].layout.buckets()) counts.push_back(static_cast<int>(b.params.size()));
  }
  // Without overlap_comm a bucket is finished before backward goes on (DeepSpeed reduces on
  // the compute stream then), which keeps one staging buffer alive. With it, at most two
  // buckets are in flight, as DeepSpeed's double ipg buffers: stage 2 must not hold every
  // bucket's full gradients until the end of backward.
  const size_t max_in_flight = stages::reductions_in_flight(overlap_comm);
  reducer = std::make_unique<stages::BucketReducer>(
      std::move(params_per_bucket), max_in_flight,
      [this](size_t g, size_t b) { return stage->reduce_bucket(groups[g], b); }, &meter);
}

EngineState::~EngineState() {
  for (auto& [accumulator, key] : accumulators) accumulator->del_post_hook(key);
  if (stage) stage->detach();
}

void EngineState::begin_backward() {
  ZT_CHECK(reducer->idle(), UsageError, "engine.backward() twice without engine.step() in between; call step() "
           "after every backward (it only counts the micro-step until the accumulation boundary)");
  const bool reducing = traits().reduces_every_backward || (at_boundary() && no_sync_depth == 0);
  if (at_boundary()) boundary_reduced = reducing;
  reducer->begin_backward(reducing);
  stage->begin_backward();
  for (GroupState& g : groups) std::fill(g.arrived.begin(), g.arrived.end(), false);
}

void EngineState::on_gradient(size_t group, size_t param) {
  GroupState& g = groups[group];
  at::Tensor& grad = g.params[param].mutable_grad();
  if (!grad.defined()) return;
  ZT_CHECK(!g.arrived[param], UsageError, "parameter ", g.param_names[param],
           " got a second gradient in one backward, after the first was handed on for reduction; call "
           "engine.backward once per micro-step. A parameter used in two reentrant activation-checkpointed "
           "regions gets one gradient per region (DeepSpeed refuses it too): use non-reentrant checkpointing "
           "(torch.utils.checkpoint(..., use_reentrant=False)), or checkpoint the regions as one");
  g.arrived[param] = true;
  stage->on_gradient(g, param, grad);
  grad.reset();   // the engine's buffers hold it now; the full gradient is freed at once
  reducer->arrive(group, g.layout.bucket_of(param));
}

void EngineState::end_backward() {
  // Parameters that got no gradient (unused in this forward) count as zero gradients.
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    GroupState& g = groups[gi];
    for (size_t i = 0; i < g.params.size(); ++i) {
      if (g.arrived[i]) continue;
      ZT_CHECK(ignore_unused_parameters, UsageError, "parameter ", g.param_names[i],
               " got no gradient in this backward (it was not used in the forward); set "
               "zero_optimization.ignore_unused_parameters to true, or freeze it (requires_grad false)");
      stage->on_unused(g, i);
      reducer->arrive(gi, g.layout.bucket_of(i));
    }
  }
  reducer->check_all_launched();
  // A stage that keeps only its shard finishes now, so the staging buffers go before the
  // next forward.
  if (traits().shards_gradients) reducer->wait_all();
  stage->end_backward();
}

void EngineState::wait_reductions() { reducer->wait_all(); }

}  // namespace zerotrain::engine::detail
