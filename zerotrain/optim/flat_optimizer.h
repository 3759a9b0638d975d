// DeepSpeed's optimizers over flat fp32 tensors: each parameter group of a rank is one
// contiguous shard (of the master weights under ZeRO), and its state tensors have the
// same layout, on the shard's device. Adam/AdamW use the fused SIMD kernel on a CPU shard
// and ATen's fused multi-tensor kernel on a GPU's; SGD, Adagrad, Lion and Lamb use ATen's
// elementwise ops (any device) with the formulas of torch.optim / DeepSpeed.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zerotrain/optim/fused_adam.h"

namespace zerotrain::config {
struct OptimizerConfig;
}

namespace zerotrain::optim {

// What may differ between parameter groups and change from step to step (schedules).
struct GroupHyper {
  double lr = 1e-3;
  double weight_decay = 0.0;
  std::array<double, 2> betas{0.9, 0.999};
};

// Which kernels step a shard.
enum class OptimizerKernels {
  // A CPU shard: the SIMD Adam with DeepSpeedCPUAdam's bits, and Lamb's trust ratios read on
  // the host. Any other device: ATen's kernels (aten_adam_step), nothing read back.
  kByDevice,
  // ATen's on every device: how the tests check the GPU path's arithmetic on a CPU.
  kAten,
};

class FlatOptimizer {
 public:
  // `partitioned`: the optimizer steps a shard of each group, so Lamb, which needs every
  // parameter whole for its trust ratio, is refused (as DeepSpeed refuses it under ZeRO).
  static std::unique_ptr<FlatOptimizer> from_config(const config::OptimizerConfig& config, bool partitioned,
                                                    OptimizerKernels kernels = OptimizerKernels::kByDevice);
  virtual ~FlatOptimizer() = default;

  virtual std::string name() const = 0;
  // The config's lr, weight_decay and betas: the hyper-parameters of a group that sets none.
  const GroupHyper& defaults() const { return defaults_; }

  // One step of group `group` on its flat fp32 shard. `segment_numels` lists the sizes of
  // the parameters the shard is made of, in order (Lamb's per-parameter trust ratio); the
  // others ignore it. State is created on a group's first step.
  virtual void step(size_t group, const at::Tensor& params, const at::Tensor& grads, const GroupHyper& hyper,
                    std::span<const int64_t> segment_numels = {}) = 0;

  // Optimizer offload (zerotrain/offload/) runs Adam's update itself, a sub-group at a time,
  // on states it keeps: the options of a step with `hyper` (none: not an Adam), and the
  // step's number for `group`, counted as step() counts it.
  virtual std::optional<AdamOptions> fused_adam_options(const GroupHyper& hyper) const { return std::nullopt; }
  int64_t count_step(size_t group) { return next_step(group); }

  // Steps taken by a group, and its state tensors by name ("exp_avg", ...).
  int64_t steps(size_t group) const;
  const std::map<std::string, at::Tensor>& state(size_t group) const;
  int64_t state_nbytes() const;
  // From a checkpoint: group `group`'s step count and state tensors (fp32, laid out like its
  // shard), replacing what it had.
  void restore(size_t group, int64_t steps, std::map<std::string, at::Tensor> state);

 protected:
  explicit FlatOptimizer(GroupHyper defaults) : defaults_(defaults) {}
  // The state of `group`, created with zeros like `params` for each name on first use.
  std::map<std::string, at::Tensor>& state_for(size_t group, const at::Tensor& params,
                                               std::initializer_list<const char*> names);
  int64_t next_step(size_t group);
  // Whether `params` is stepped with ATen's kernels (OptimizerKernels).
  bool aten_kernels(const at::Tensor& params) const {
    return kernels_ == OptimizerKernels::kAten || !params.device().is_cpu();
  }

 private:
  GroupHyper defaults_;
  OptimizerKernels kernels_ = OptimizerKernels::kByDevice;
  std::vector<std::map<std::string, at::Tensor>> state_;
  std::vector<int64_t> steps_;
};

}  // namespace zerotrain::optim
