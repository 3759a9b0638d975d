// The Engine's internals, shared by engine.cpp (setup, step) and grad_sync.cpp (the
// backward hooks and the gradient buckets). Internal to engine/.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/optim/optimizer.h>

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

namespace zerotrain::engine::detail {

struct GroupState {
  std::string name;
  std::vector<at::Tensor> params;          // the model's parameters: views of `flat`
  std::vector<std::string> param_names;
  partition::GroupLayout layout;
  optim::GroupHyper hyper;                 // this step's lr, weight decay, betas
  at::Tensor flat;        // (numel,) fp32: the parameters, in model order
  at::Tensor grad_full;   // (numel,) fp32, stages 0-1: gradients accumulated over micro-steps
  at::Tensor master;      // (shard_numel,) fp32, stages 1-2: this rank's chunks of `flat`
  at::Tensor grad_shard;  // (shard_numel,) fp32, stages 1-2: the reduced gradients of `master`
  std::vector<at::Tensor> staging;   // stage 2, per bucket: (bucket numel,) fp32 while it fills
  std::vector<int> pending;          // per bucket: parameters whose gradient has not arrived
  std::vector<bool> arrived;         // per parameter, in this backward
  at::Tensor client_param;           // with a client optimizer: a leaf alias of the shard it steps
};

// A reduction in flight; stage 2 adds `result` into `accumulate_into` when it is done.
struct PendingReduce {
  comm::Work work;
  at::Tensor result;
  at::Tensor accumulate_into;
  at::Tensor keep_alive;   // the staging buffer the backend reads
};

struct EngineState {
  std::shared_ptr<torch::nn::Module> model;
  Config config;
  comm::Communicator comm;
  int stage = 0;
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

 private:
  at::Tensor& staging_for(GroupState& g, size_t bucket);
  void launch_ready_buckets();
  void launch(size_t group, size_t bucket);
  void finish_oldest();
};

}  // namespace zerotrain::engine::detail
