// One parameter group as the engine and its stage hold it: the model's parameters as views
// of one flat buffer, and the gradient and master buffers the stage's plan asks for.
// Internal to engine/ and stages/.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "zerotrain/optim/flat_optimizer.h"
#include "zerotrain/partition/layout.h"
#include "zerotrain/stages/staging_pool.h"

namespace zerotrain::stages {

struct GroupState {
  std::size_t index = 0;                   // among the engine's groups
  std::string name;
  std::vector<at::Tensor> params;          // the model's parameters: views of `flat`
  std::vector<std::string> param_names;
  // Where the parameters are, and so every buffer and state of the group (the engine's
  // device): allocations take it from here, never from a default.
  at::Device device{at::kCPU};
  partition::GroupLayout layout;
  optim::GroupHyper hyper;                 // this step's lr, weight decay, betas
  at::Tensor flat;        // (numel,) model dtype: the parameters, in model order
  at::Tensor grad_full;   // (numel,) accumulation dtype, stages 0-1: gradients summed over micro-steps
  // fp32 weights the optimizer steps: this rank's chunks of `flat` (stages 1-2), or all of
  // it at stage 0 in half precision; unset at stage 0 in fp32 (the optimizer steps `flat`).
  at::Tensor master;
  at::Tensor grad_shard;  // (shard_numel,) accumulation dtype, stages 1-2: the reduced gradients of `master`
  // Per bucket, while it fills (stages 2-3): its (bucket numel,) buffer in the comm dtype,
  // lent by the stage's pool.
  std::vector<StagingPool::Loan> staging;
  // Per bucket: its chunk of `grad_shard` holds zeros (no reduction since the gradients were
  // zeroed), so the next reduction can write there instead of adding a result.
  std::vector<bool> shard_chunk_zero;
  std::vector<bool> arrived;         // per parameter, in this backward
  at::Tensor client_param;           // with a client optimizer: a leaf alias of the weights it steps
  // Optimizer offload (zerotrain/offload/): the step wrote this rank's updated weights into
  // the parameters itself, from a master that lives in the offload store; publish_weights
  // only spreads them. False while the master is in `master` (before a step, checkpoints).
  bool weights_in_place = false;

  // A new buffer of the group's: `dtype` on the group's device.
  at::TensorOptions options(at::ScalarType dtype) const { return at::TensorOptions().dtype(dtype).device(device); }

  // The weights an optimizer steps: the fp32 master, or the parameters themselves.
  at::Tensor& stepped_weights() { return master.defined() ? master : flat; }
};

}  // namespace zerotrain::stages
