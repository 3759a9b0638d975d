// zerotrain::Sharded<M>: marks a unit of ZeRO stage 3 (docs/stage3.md). LibTorch modules have
// no forward hooks, so a unit is a wrapper whose forward gathers the unit's parameters, runs
// the wrapped module, releases them, and arms its outputs so that backward gathers them
// again. Under stages 0-2, or before zerotrain::initialize, it only forwards.
//
//   struct GptImpl : torch::nn::Module {
//     zerotrain::Sharded<Block> block{Block(768, 12)};   // in place of `Block block{...}`
//     ...  x = block(x);
//   };
//
// The wrapped module registers as the child "module" (FSDP and DeepSpeed name theirs too).
// zerotrain::wrap_sequential wraps the children of a Sequential.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace zerotrain {

namespace stages::stage3 {
class UnitHooks;
struct PreSharded;
}

// The part of every Sharded<M> the engine sees.
class ShardedModule : public torch::nn::Module {
 public:
  // Stage 3 attaches its hooks at initialize and detaches them when the engine goes;
  // `left_sharded`: its parameters are left without memory.
  void attach(std::shared_ptr<stages::stage3::UnitHooks> hooks, int unit);
  void detach(bool left_sharded = false);
  bool attached() const { return hooks_ != nullptr; }
  int unit() const { return unit_; }

  // Built under zerotrain::ZeroInit: this rank's chunks of the unit's parameters, until the
  // engine places them (and drops them).
  const std::shared_ptr<stages::stage3::PreSharded>& presharded() const { return presharded_; }
  void drop_presharded() { presharded_.reset(); }
  // For models cut elsewhere (the Python zero.Init): their chunks, for the engine to place.
  void adopt_presharded(std::shared_ptr<stages::stage3::PreSharded> cut) { presharded_ = std::move(cut); }

  // For a unit whose forward runs outside C++ (a Python module's forward hooks, python/): the
  // steps of run_unit one at a time. Every enter_forward is followed by one leave_forward,
  // also when the forward fails; arm_output passes each output the forward returns.
  void enter_forward();
  void leave_forward();
  at::Tensor arm_output(const at::Tensor& out) { return hooks_ ? arm(out) : out; }

  // DeepSpeed's register_external_parameter: a parameter of another unit that this unit's
  // forward uses, so it is gathered with this unit. Before initialize.
  void add_external_parameter(at::Tensor param) { external_params_.push_back(std::move(param)); }
  const std::vector<at::Tensor>& external_parameters() const { return external_params_; }

 protected:
  // Every unit's constructor calls it once its module is built: under ZeroInit, cuts it.
  void on_built();

  // Runs `forward` inside the unit (a pass-through when nothing is attached).
  template <class F>
  auto run_unit(F&& forward) {
    if (!hooks_) {
      check_runnable();
      return forward();
    }
    Inside inside(*this);
    auto out = forward();
    inside.leave();
    return arm_all(std::move(out));
  }

 private:
  class Inside {   // gathered while alive; released on leave() or an exception
   public:
    explicit Inside(ShardedModule& m);
    ~Inside();
    void leave();

   private:
    ShardedModule* m_;
  };

  // Outputs that need a gradient are passed through an autograd node whose backward
  // gathers the unit again before the unit's own backward runs.
  at::Tensor arm(const at::Tensor& out);
  at::Tensor arm_all(at::Tensor out) { return arm(out); }
  std::vector<at::Tensor> arm_all(std::vector<at::Tensor> outs) {
    for (auto& t : outs) t = arm(t);
    return outs;
  }
  template <class... T>
  std::tuple<T...> arm_all(std::tuple<T...> outs) {
    std::apply([this](auto&... t) { ((t = arm_all(std::move(t))), ...); }, outs);
    return outs;
  }
  template <class T>
  T arm_all(T other) {   // anything else passes unchanged
    return other;
  }

  // Throws for a unit whose parameters have no memory and that no engine drives (cut by
  // ZeroInit before initialize, or left sharded by an engine that is gone).
  void check_runnable() const;

  std::shared_ptr<stages::stage3::UnitHooks> hooks_;
  int unit_ = -1;
  std::shared_ptr<stages::stage3::PreSharded> presharded_;
  std::vector<at::Tensor> external_params_;
  bool left_sharded_ = false;
};

template <class Inner>   // a ModuleHolder: torch::nn::Linear, Block, ...
class ShardedImpl : public ShardedModule {
 public:
  explicit ShardedImpl(Inner inner_module) : inner(register_module("module", std::move(inner_module))) { on_built(); }
  template <class... Args>
  auto forward(Args&&... args) {
    return run_unit([&] { return inner->forward(std::forward<Args>(args)...); });
  }
  Inner inner;
};

template <class Inner>
class Sharded : public torch::nn::ModuleHolder<ShardedImpl<Inner>> {
 public:
  using torch::nn::ModuleHolder<ShardedImpl<Inner>>::ModuleHolder;
  // ModuleHolder's own call operator cannot see a forward that is a template.
  template <class... Args>
  auto operator()(Args&&... args) {
    return this->get()->forward(std::forward<Args>(args)...);
  }
};

// A Sequential whose children that hold at least `min_params` parameters (and compute
// tensor -> tensor) are each a unit; the others stay as they are. The children are the same
// modules, so their parameters are the same tensors.
torch::nn::Sequential wrap_sequential(const torch::nn::Sequential& sequential, int64_t min_params = 1);

}  // namespace zerotrain
