#include "zerotrain/stages/stage3/sharded.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>
#include <torch/nn/modules/container/any.h>

#include "zerotrain/core/error.h"
#include "zerotrain/stages/stage3/preshard.h"
#include "zerotrain/stages/stage3/unit_hooks.h"

namespace zerotrain {
namespace {

// Carries the hooks into the autograd graph; a graph that outlives the engine finds them gone.
struct HooksRef : torch::CustomClassHolder {
  explicit HooksRef(std::weak_ptr<stages::stage3::UnitHooks> h) : hooks(std::move(h)) {}
  std::weak_ptr<stages::stage3::UnitHooks> hooks;
};

// Identity forward; its backward gathers the unit before the unit's own backward (autograd
// reaches an output's node before the nodes that made the output).
struct PreBackward : torch::autograd::Function<PreBackward> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& out, c10::IValue hooks,
                            int64_t unit) {
    ctx->saved_data["hooks"] = std::move(hooks);
    ctx->saved_data["unit"] = unit;
    // A new tensor on the same storage, as DeepSpeed's PreBackwardFunction returns
    // outputs.detach(): no copy, and not a view, so in-place use stays allowed.
    return out.detach();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto ref = c10::static_intrusive_pointer_cast<HooksRef>(ctx->saved_data["hooks"].toCapsule());
    if (auto hooks = ref->hooks.lock()) hooks->pre_backward(static_cast<int>(ctx->saved_data["unit"].toInt()));
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

class ShardedAnyImpl : public ShardedModule {
 public:
  explicit ShardedAnyImpl(torch::nn::AnyModule inner) : inner_(std::move(inner)) {
    register_module("module", inner_.ptr());
    on_built();
  }
  at::Tensor forward(const at::Tensor& x) {
    return run_unit([&] { return inner_.forward<at::Tensor>(x); });
  }

 private:
  torch::nn::AnyModule inner_;
};
TORCH_MODULE(ShardedAny);

int64_t count_params(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

void ShardedModule::attach(std::shared_ptr<stages::stage3::UnitHooks> hooks, int unit) {
  ZT_CHECK(!left_sharded_, UsageError, "a zerotrain::Sharded unit's parameters were sharded by a ZeRO stage 3 engine "
           "that is gone, so this rank no longer has them; build the model again for a new engine");
  ZT_CHECK(!hooks_, UsageError, "a zerotrain::Sharded unit is already driven by another engine; build one engine "
           "per model");
  hooks_ = std::move(hooks);
  unit_ = unit;
}

void ShardedModule::on_built() { presharded_ = stages::stage3::preshard_if_active(*this); }

void ShardedModule::check_runnable() const {
  ZT_CHECK(!presharded_, UsageError, "a zerotrain::Sharded unit built under zerotrain::ZeroInit holds only this "
           "rank's part of its parameters until zerotrain::initialize places them; initialize the engine with "
           "the model (at stage 3) before running it");
  ZT_CHECK(!left_sharded_, UsageError, "this zerotrain::Sharded unit's parameters were sharded by a ZeRO stage 3 "
           "engine that is gone, so this rank no longer has them; keep the engine alive while the model runs, or "
           "take the weights first (engine.consolidated_16bit_state_dict(), or zerotrain::GatheredParameters)");
}

void ShardedModule::detach(bool left_sharded) {
  left_sharded_ = left_sharded;
  hooks_.reset();
  unit_ = -1;
}

void ShardedModule::enter_forward() {
  if (!hooks_) {
    check_runnable();
    return;
  }
  hooks_->pre_forward(unit_);
}

void ShardedModule::leave_forward() {
  if (hooks_) hooks_->post_forward(unit_);
}

ShardedModule::Inside::Inside(ShardedModule& m) : m_(&m) { m_->hooks_->pre_forward(m_->unit_); }

ShardedModule::Inside::~Inside() {
  if (!m_) return;
  try {
    m_->hooks_->post_forward(m_->unit_);
  } catch (...) {
    // Unwinding from the forward's own error, which is the one to report.
  }
}

void ShardedModule::Inside::leave() {
  ShardedModule* m = std::exchange(m_, nullptr);
  m->hooks_->post_forward(m->unit_);
}

at::Tensor ShardedModule::arm(const at::Tensor& out) {
  if (!out.defined() || !out.requires_grad() || !at::GradMode::is_enabled()) return out;
  auto ref = c10::make_intrusive<HooksRef>(hooks_);
  return PreBackward::apply(out, c10::IValue::make_capsule(std::move(ref)), static_cast<int64_t>(unit_));
}

torch::nn::Sequential wrap_sequential(const torch::nn::Sequential& sequential, int64_t min_params) {
  torch::nn::Sequential wrapped;
  const auto names = sequential->named_children().keys();
  size_t i = 0;
  for (const auto& child : *sequential) {
    const std::string& name = names.at(i++);
    if (count_params(*child.ptr()) >= min_params && min_params > 0) {
      wrapped->push_back(std::string(name), torch::nn::AnyModule(ShardedAny(child)));
    } else {
      wrapped->push_back(std::string(name), child);
    }
  }
  return wrapped;
}

}  // namespace zerotrain
