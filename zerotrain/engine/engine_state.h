// The Engine's internals, shared by engine.cpp (setup, step) and grad_sync.cpp (the
// backward hooks and the gradient buckets). Internal to engine/.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/optim/flat_optimizer.h"
#include "zerotrain/optim/lr_schedule.h"
#include "zerotrain/partition/layout.h"
#include "zerotrain/precision/loss_scaler.h"
#include "zerotrain/precision/overflow_watch.h"

namespace zerotrain::engine::detail {

struct GroupState {
  std::string name;
  std::vector<at::Tensor> params;          // the model's parameters: views of `flat`
  std::vector<std::string> param_names;
  partition::GroupLayout layout;
  optim::GroupHyper hyper;                 // this step's lr, weight decay, betas
  at::Tensor flat;        // (numel,) model dtype: the parameters, in model order
  at::Tensor grad_full;   // (numel,) accumulation dtype, stages 0-1: gradients summed over micro-steps
  // fp32 weights the optimizer steps: this rank's chunks of `flat` (stages 1-2), or all of
  // it at stage 0 in half precision; unset at stage 0 in fp32 (the optimizer steps `flat`).
  at::Tensor master;
  at::Tensor grad_shard;  // (shard_numel,) accumulation dtype, stages 1-2: the reduced gradients of `master`
  std::vector<at::Tensor> staging;   // stage 2, per bucket: (bucket numel,) comm dtype while it fills
  std::vector<int> pending;          // per bucket: parameters whose gradient has not arrived
  std::vector<bool> arrived;         // per parameter, in this backward
  at::Tensor client_param;           // with a client optimizer: a leaf alias of the shard it steps
};

// A reduction in flight. When it is done, `result` is added into `write_back` (stage 2
// accumulates over micro-steps) or copied there (a reduction in another dtype).
struct PendingReduce {
  comm::Work work;
  at::Tensor result;
  at::Tensor write_back;
  bool accumulate = false;
  at::Tensor keep_alive;   // a staging buffer the backend reads, counted in staging_nbytes
};

// The dtypes of a step (docs/precision.md), from the fp16/bf16 blocks as DeepSpeed reads them.
struct Precision {
  at::ScalarType model = at::kFloat;   // parameters, activations, the gradients autograd makes
  at::ScalarType comm = at::kFloat;    // gradients on the wire: communication_data_type
  at::ScalarType accum = at::kFloat;   // gradients summed over micro-steps: data_types.grad_accum_dtype
  bool auto_cast = false;              // fp16.auto_cast: floating inputs cast to fp16
  bool half() const { return model != at::kFloat; }
};
Precision precision_from_config(const Config& config);

// The gradients of a step, checked: their global L2 norm (still scaled) and whether any
// rank's hold an inf or nan, agreed over all ranks.
struct GradCheck {
  double sum_squares = 0;
  bool overflow = false;
};

struct EngineState {
  std::shared_ptr<torch::nn::Module> model;
  Config config;
  comm::Communicator comm;
  int stage = 0;
  Precision precision;
  std::optional<precision::LossScaler> scaler;    // fp16 only
  std::optional<precision::OverflowWatch> watch;  // with the scaler
  int64_t accumulation_steps = 1;
  bool overlap_comm = false;
  bool ignore_unused_parameters = true;
  std::vector<GroupState> groups;
  std::unique_ptr<optim::FlatOptimizer> optimizer;            // from the config, or
  std::shared_ptr<torch::optim::Optimizer> client_optimizer;  // the user's
  std::unique_ptr<optim::LrSchedule> schedule;
  // The AccumulateGrad nodes carrying our hooks (autograd only holds them weakly), with each
  // hook's key: the hooks point at this state and are removed with it.
  std::vector<std::pair<c10::intrusive_ptr<torch::autograd::Node>, uintptr_t>> accumulators;

  int64_t micro_steps = 0;
  int64_t global_steps = 0;
  int64_t global_samples = 0;
  int64_t skipped_steps = 0;
  std::optional<double> global_grad_norm;
  int no_sync_depth = 0;

  // This backward: whether its buckets are reduced, and the next bucket to launch in the
  // fixed (group, bucket) order every rank follows.
  bool reducing = false;
  bool boundary_reduced = false;   // the last boundary micro-step's backward reduced its buckets
  std::vector<std::pair<size_t, size_t>> launch_order;
  size_t next_launch = 0;
  std::deque<PendingReduce> in_flight;   // oldest first
  int64_t staging_nbytes = 0;
  int64_t peak_staging_nbytes = 0;

  bool at_boundary() const { return (micro_steps + 1) % accumulation_steps == 0; }
  double loss_scale() const { return scaler ? scaler->scale() : 1.0; }
  // The gradients the optimizer steps with, per group (stage 0: full; 1-2: this rank's shard).
  at::Tensor& grads_of(GroupState& g) { return stage == 0 ? g.grad_full : g.grad_shard; }
  // A buffer that lives for part of a step, for the peak in model_state_bytes().
  void note_temporary(int64_t nbytes) { peak_staging_nbytes = std::max(peak_staging_nbytes, staging_nbytes + nbytes); }

  EngineState(std::shared_ptr<torch::nn::Module> model_in, Config config_in, comm::Communicator comm_in)
      : model(std::move(model_in)), config(std::move(config_in)), comm(std::move(comm_in)) {}
  EngineState(const EngineState&) = delete;
  EngineState& operator=(const EngineState&) = delete;
  // A model that outlives its engine must not call into it from backward.
  ~EngineState();

  // grad_sync.cpp
  void install_hooks();
  void begin_backward();
  void on_gradient(size_t group, size_t param);
  void end_backward();
  void wait_reductions();

  // mixed_precision.cpp
  GradCheck check_gradients();
  // The parameters whose gradients hold an inf or nan on any rank (a collective), in the
  // order backward produces them.
  std::vector<std::string> overflowed_parameters();
  // fp16: updates the scale and logs DeepSpeed's line; the overflow watch may stop training.
  void update_loss_scale(const GradCheck& check);

 private:
  at::Tensor& staging_for(GroupState& g, size_t bucket);
  at::Tensor track_staging(at::Tensor buffer);   // counts it in staging_nbytes until finished
  void launch_ready_buckets();
  void launch(size_t group, size_t bucket);
  void finish_oldest();
};

}  // namespace zerotrain::engine::detail
