// The internal interface of a ZeRO stage (docs/engine.md, "The stages"): which buffers a
// parameter group has, what happens to a gradient when autograd produces it, what reducing
// a bucket means, which gradients the optimizer steps with, and how the updated weights get
// back into the model. The engine drives the loop (accumulation, clipping, loss scaling,
// the optimizer); make_stage is the only place that picks a stage. Internal to engine/.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"
#include "zerotrain/config/stage_traits.h"
#include "zerotrain/precision/dtypes.h"
#include "zerotrain/stages/bucket_reducer.h"
#include "zerotrain/stages/group.h"
#include "zerotrain/stages/plan.h"
#include "zerotrain/stages/staging.h"

namespace torch::nn {
class Module;
}

namespace zerotrain::stages {

// A parameter's elements among the gradients the optimizer steps with.
struct GradientPiece {
  std::size_t param;
  int64_t offset;
  int64_t numel;
};

// A stretch of this rank's shard of a group (`numel` elements from `shard_offset`) and the
// model-dtype tensor its weights live in (stages 1-2: a bucket's chunk of the parameters;
// stage 3: the parameter shard). Optimizer offload writes the updated weights there
// directly. `weights` is undefined where they live on disk (stage 3 with offload_param
// nvme): the writer fills a tensor of its own and hands it to Stage::store_weight_piece.
struct ShardPiece {
  int64_t shard_offset = 0;
  int64_t numel = 0;
  at::ScalarType dtype = at::kFloat;
  at::Tensor weights;
};

namespace stage3 {
class ParamSwap;
}

struct StageContext {
  comm::Communicator comm;           // a handle: copies share one connection
  precision::Dtypes dtypes;
  StagingMeter* meter = nullptr;     // the engine's
  const config::ZeroConfig* zero = nullptr;   // the config's zero_optimization block
  // Stage 3 with offload_param "nvme": where the parameter shard lives (else in memory).
  std::shared_ptr<stage3::ParamSwap> param_swap;
  // Optimizer offload keeps the fp32 master itself (offload/optimizer_offload.h): the stage
  // makes none, so that a model whose master only fits on disk never has it in memory.
  bool master_offloaded = false;
};

class Stage {
 public:
  Stage(config::StageTraits traits, StageContext context) : traits_(traits), ctx_(std::move(context)) {}
  virtual ~Stage() = default;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  const config::StageTraits& traits() const { return traits_; }

  // Setting up, in this order: the model, before any group (stage 3 finds its units);
  // each group's layout (it may reorder g.params and g.param_names); its parameters moved
  // into the stage's buffers, rank 0's values on every rank (the model keeps views); and
  // the gradient and master buffers of the plan (stages/plan.h).
  virtual void attach(torch::nn::Module& model) {}
  virtual void arrange(GroupState& g, int64_t bucket_numel);
  virtual void place(GroupState& g);
  virtual void allocate(GroupState& g);
  // Every group is set up (parameters in no group stay as the model has them).
  virtual void finish_setup() {}
  // The engine no longer drives the model: a model that outlives it runs plain LibTorch
  // (at stage 3, its units that were left sharded refuse to run).
  virtual void detach() {}

  // Backward starts (every micro-step).
  virtual void begin_backward() {}
  // Backward: parameter `param` of `g` has its gradient (model dtype), or none at all
  // (unused in this forward: on_unused). The engine frees the gradient afterwards.
  virtual void on_gradient(GroupState& g, std::size_t param, const at::Tensor& grad) = 0;
  virtual void on_unused(GroupState& g, std::size_t param) {}
  // Backward is over and its reductions finished (stage 2 and 3) or launched.
  virtual void end_backward() {}
  // Launches the reduction of bucket `bucket` of `g` once all its gradients are in.
  virtual PendingReduce reduce_bucket(GroupState& g, std::size_t bucket) = 0;

  // The step: the gradients the optimizer steps `g.stepped_weights()` with (this rank's
  // shard, or all of them), each parameter's place among them, and the parameter sizes the
  // optimizer sees (Lamb's trust ratio needs them; empty where parameters are cut).
  at::Tensor& step_gradients(GroupState& g) { return traits_.shards_optimizer ? g.grad_shard : g.grad_full; }
  virtual std::vector<GradientPiece> gradient_pieces(const GroupState& g) const = 0;
  virtual std::vector<int64_t> optimizer_segments(const GroupState&) const { return {}; }
  // Where the weights of this rank's shard live (stages 1-3; optimizer offload writes them),
  // in shard order; and a piece without memory of its own, filled.
  virtual std::vector<ShardPiece> weight_pieces(GroupState& g) { return {}; }
  virtual void store_weight_piece(GroupState& g, std::size_t piece, const at::Tensor& weights) {}
  // This rank's weights [offset, offset + out.numel()) of its shard of `g`, as fp32 in `out`.
  virtual void copy_shard_weights(GroupState& g, int64_t offset, const at::Tensor& out);
  // After the optimizer stepped every group: the new weights into every rank's parameters.
  virtual void publish_weights(std::vector<GroupState>& groups) = 0;
  void zero_gradients(GroupState& g);

  // zerotrain::GatheredParameters: the parameters of `groups` among `params` (all of them
  // when empty) hold their full values until end_user_gather. With `modifier_rank`, that
  // rank's values (written in between) become every rank's, master weights included. Every
  // rank calls both, with the same parameters. Returns a token for end_user_gather.
  virtual std::vector<int> begin_user_gather(std::vector<GroupState>& groups, const std::vector<at::Tensor>& params) {
    return {};
  }
  virtual void end_user_gather(std::vector<GroupState>& groups, const std::vector<int>& token,
                               std::optional<int> modifier_rank);
  // The bytes of the parameters this rank holds for `g` (Engine::model_state_bytes).
  virtual int64_t param_nbytes(const GroupState& g) const;
  virtual int64_t gathered_peak_nbytes() const { return 0; }
  // Bytes of parameters this rank keeps on disk (stage 3 with offload_param nvme).
  virtual int64_t param_disk_nbytes() const { return 0; }

 protected:
  // The fp32 master copy, from the parameters (DeepSpeed's starts from the rounded 16-bit values).
  virtual void init_master(GroupState& g) = 0;
  // The master weights (in place) from the parameters, after a user changed them.
  virtual void refresh_master(GroupState& g) = 0;
  // Reductions average over the ranks. In 16 bits gradients are divided by the world size
  // before the sum, as DeepSpeed does: a backend that adds in fp16 would overflow on the
  // sum where the average fits. Returns the op to reduce with; divides `wire` if needed.
  comm::ReduceOp prepare_average(const at::Tensor& wire);

  config::StageTraits traits_;
  StageContext ctx_;
};

std::unique_ptr<Stage> make_stage(const config::StageTraits& traits, StageContext context);

}  // namespace zerotrain::stages
