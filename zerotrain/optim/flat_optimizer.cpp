#include "zerotrain/optim/flat_optimizer.h"

#include <ATen/ATen.h>

#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"
#include "zerotrain/optim/fused_adam.h"

namespace zerotrain::optim {
namespace {

using config::OptimizerKind;

class Adam final : public FlatOptimizer {
 public:
  Adam(const config::AdamParams& p, bool always_decoupled)
      : FlatOptimizer({p.lr.value, p.weight_decay.value, p.betas.value}),
        eps_(p.eps.value),
        adamw_mode_(always_decoupled || p.adam_w_mode),
        bias_correction_(p.bias_correction) {}
  std::string name() const override { return adamw_mode_ ? "AdamW (fused)" : "Adam (fused)"; }
  void step(size_t group, const at::Tensor& params, const at::Tensor& grads, const GroupHyper& h,
            std::span<const int64_t>) override {
    auto& s = state_for(group, params, {"exp_avg", "exp_avg_sq"});
    const AdamOptions options = *fused_adam_options(h);
    if (aten_kernels(params)) {
      aten_adam_step(options, next_step(group), params, grads, s["exp_avg"], s["exp_avg_sq"]);
    } else {
      fused_adam_step(options, next_step(group), params, grads, s["exp_avg"], s["exp_avg_sq"]);
    }
  }
  std::optional<AdamOptions> fused_adam_options(const GroupHyper& h) const override {
    return AdamOptions{h.lr, h.betas[0], h.betas[1], eps_, h.weight_decay, adamw_mode_, bias_correction_};
  }

 private:
  double eps_;
  bool adamw_mode_, bias_correction_;
};

// torch.optim.SGD.
class Sgd final : public FlatOptimizer {
 public:
  explicit Sgd(const config::SgdParams& p)
      : FlatOptimizer({p.lr.value, p.weight_decay.value, {0.0, 0.0}}),
        momentum_(p.momentum),
        dampening_(p.dampening),
        nesterov_(p.nesterov) {
    ZT_CHECK(!nesterov_ || (momentum_ > 0 && dampening_ == 0), ConfigError,
             "optimizer.params: nesterov needs momentum > 0 and dampening 0 (as torch.optim.SGD)");
  }
  std::string name() const override { return "SGD"; }
  void step(size_t group, const at::Tensor& params, const at::Tensor& grads, const GroupHyper& h,
            std::span<const int64_t>) override {
    const int64_t t = next_step(group);
    at::Tensor d_p = h.weight_decay != 0 ? grads.add(params, h.weight_decay) : grads;
    if (momentum_ != 0) {
      auto& buf = state_for(group, params, {"momentum_buffer"})["momentum_buffer"];
      if (t == 1) {
        buf.copy_(d_p);
      } else {
        buf.mul_(momentum_).add_(d_p, 1 - dampening_);
      }
      d_p = nesterov_ ? d_p.add(buf, momentum_) : buf;
    }
    params.add_(d_p, -h.lr);
  }

 private:
  double momentum_, dampening_;
  bool nesterov_;
};

// torch.optim.Adagrad (DeepSpeedCPUAdagrad computes the same).
class Adagrad final : public FlatOptimizer {
 public:
  explicit Adagrad(const config::AdagradParams& p)
      : FlatOptimizer({p.lr.value, p.weight_decay.value, {0.0, 0.0}}),
        lr_decay_(p.lr_decay),
        initial_(p.initial_accumulator_value),
        eps_(p.eps.value) {}
  std::string name() const override { return "Adagrad"; }
  void step(size_t group, const at::Tensor& params, const at::Tensor& grads, const GroupHyper& h,
            std::span<const int64_t>) override {
    auto& s = state_for(group, params, {"sum"});
    const int64_t t = next_step(group);
    if (t == 1 && initial_ != 0) s["sum"].fill_(initial_);
    const at::Tensor g = h.weight_decay != 0 ? grads.add(params, h.weight_decay) : grads;
    const double clr = h.lr / (1 + static_cast<double>(t - 1) * lr_decay_);
    s["sum"].addcmul_(g, g, 1.0);
    params.addcdiv_(g, s["sum"].sqrt().add_(eps_), -clr);
  }

 private:
  double lr_decay_, initial_, eps_;
};

// FusedLion / DeepSpeedCPULion.
class Lion final : public FlatOptimizer {
 public:
  explicit Lion(const config::LionParams& p) : FlatOptimizer({p.lr.value, p.weight_decay.value, p.betas.value}) {}
  std::string name() const override { return "Lion"; }
  void step(size_t group, const at::Tensor& params, const at::Tensor& grads, const GroupHyper& h,
            std::span<const int64_t>) override {
    auto& m = state_for(group, params, {"exp_avg"})["exp_avg"];
    next_step(group);
    const at::Tensor update = m.mul(h.betas[0]).add_(grads, 1 - h.betas[0]).sign_();
    if (h.weight_decay != 0) params.mul_(1 - h.lr * h.weight_decay);
    params.add_(update, -h.lr);
    m.mul_(h.betas[1]).add_(grads, 1 - h.betas[1]);
  }
};

// FusedLamb: Adam's direction scaled per parameter by the trust ratio |w| / |update|,
// clamped to [min_coeff, max_coeff].
class Lamb final : public FlatOptimizer {
 public:
  explicit Lamb(const config::LambParams& p)
      : FlatOptimizer({p.lr.value, p.weight_decay.value, p.betas.value}),
        eps_(p.eps.value),
        bias_correction_(p.bias_correction),
        eps_inside_sqrt_(p.eps_inside_sqrt),
        max_coeff_(p.max_coeff),
        min_coeff_(p.min_coeff) {}
  std::string name() const override { return "Lamb"; }
  void step(size_t group, const at::Tensor& params, const at::Tensor& grads, const GroupHyper& h,
            std::span<const int64_t> segments) override {
    auto& s = state_for(group, params, {"exp_avg", "exp_avg_sq"});
    const double t = static_cast<double>(next_step(group));
    const auto [b1, b2] = h.betas;
    s["exp_avg"].mul_(b1).add_(grads, 1 - b1);
    s["exp_avg_sq"].mul_(b2).addcmul_(grads, grads, 1 - b2);
    const double bc1 = bias_correction_ ? 1 - std::pow(b1, t) : 1.0;
    const double bc2 = bias_correction_ ? 1 - std::pow(b2, t) : 1.0;
    const at::Tensor v_hat = s["exp_avg_sq"] / bc2;
    const at::Tensor denom = eps_inside_sqrt_ ? (v_hat + eps_).sqrt() : v_hat.sqrt() + eps_;
    at::Tensor update = s["exp_avg"] / bc1 / denom;
    if (h.weight_decay != 0) update.add_(params, h.weight_decay);
    int64_t offset = 0;
    const std::vector<int64_t> whole{params.numel()};
    const bool on_device = aten_kernels(params);
    for (int64_t n : segments.empty() ? std::span<const int64_t>(whole) : segments) {
      auto p = params.narrow(0, offset, n);
      auto u = update.narrow(0, offset, n);
      offset += n;
      if (on_device) {
        // The ratio stays a 0-dim tensor on the device: reading two norms back per parameter
        // would wait for the GPU twice per parameter. Its arithmetic is the host path's, in
        // float64; only the final multiply-add rounds differently (p += lr' u, not an axpy).
        const at::Tensor w_norm = p.norm().to(at::kDouble), u_norm = u.norm().to(at::kDouble);
        const at::Tensor trust = at::where(w_norm.gt(0).logical_and(u_norm.gt(0)), w_norm / u_norm,
                                           at::ones_like(w_norm))
                                     .clamp_(min_coeff_, max_coeff_);
        p.add_(u * (trust * -h.lr).to(at::kFloat));
        continue;
      }
      const double w_norm = p.norm().item<double>(), u_norm = u.norm().item<double>();
      double trust = w_norm > 0 && u_norm > 0 ? w_norm / u_norm : 1.0;
      trust = std::clamp(trust, min_coeff_, max_coeff_);
      p.add_(u, -h.lr * trust);
    }
  }

 private:
  double eps_;
  bool bias_correction_, eps_inside_sqrt_;
  double max_coeff_, min_coeff_;
};

std::unique_ptr<FlatOptimizer> make(const config::OptimizerConfig& c, bool partitioned) {
  switch (c.kind) {
    case OptimizerKind::kAdam: return std::make_unique<Adam>(std::get<config::AdamParams>(c.params), false);
    case OptimizerKind::kAdamW: return std::make_unique<Adam>(std::get<config::AdamParams>(c.params), true);
    case OptimizerKind::kSgd: return std::make_unique<Sgd>(std::get<config::SgdParams>(c.params));
    case OptimizerKind::kAdagrad: return std::make_unique<Adagrad>(std::get<config::AdagradParams>(c.params));
    case OptimizerKind::kLion: return std::make_unique<Lion>(std::get<config::LionParams>(c.params));
    case OptimizerKind::kLamb:
      // Lamb's trust ratio needs each parameter whole; DeepSpeed leaves FusedLamb out of
      // ZERO_SUPPORTED_OPTIMIZERS for that reason.
      ZT_CHECK(!partitioned, ConfigError, "optimizer.type ", c.type, ": Lamb needs every parameter whole for its "
               "trust ratio, so it runs without ZeRO only (zero_optimization.stage 0), as in DeepSpeed; use Adam or "
               "AdamW with ZeRO stages 1-3");
      return std::make_unique<Lamb>(std::get<config::LambParams>(c.params));
  }
  ZT_INTERNAL_ASSERT(false, "unknown optimizer kind");
}

}  // namespace

std::unique_ptr<FlatOptimizer> FlatOptimizer::from_config(const config::OptimizerConfig& c, bool partitioned,
                                                          OptimizerKernels kernels) {
  std::unique_ptr<FlatOptimizer> made = make(c, partitioned);
  made->kernels_ = kernels;
  return made;
}

int64_t FlatOptimizer::steps(size_t group) const { return group < steps_.size() ? steps_[group] : 0; }

const std::map<std::string, at::Tensor>& FlatOptimizer::state(size_t group) const {
  static const std::map<std::string, at::Tensor> kEmpty;
  return group < state_.size() ? state_[group] : kEmpty;
}

int64_t FlatOptimizer::state_nbytes() const {
  int64_t total = 0;
  for (const auto& group : state_) {
    for (const auto& [name, t] : group) total += static_cast<int64_t>(t.nbytes());
  }
  return total;
}

std::map<std::string, at::Tensor>& FlatOptimizer::state_for(size_t group, const at::Tensor& params,
                                                            std::initializer_list<const char*> names) {
  if (state_.size() <= group) state_.resize(group + 1);
  auto& s = state_[group];
  for (const char* name : names) {
    if (!s.count(name)) s[name] = at::zeros_like(params);
  }
  return s;
}

void FlatOptimizer::restore(size_t group, int64_t steps, std::map<std::string, at::Tensor> state) {
  if (state_.size() <= group) state_.resize(group + 1);
  if (steps_.size() <= group) steps_.resize(group + 1, 0);
  state_[group] = std::move(state);
  steps_[group] = steps;
}

int64_t FlatOptimizer::next_step(size_t group) {
  if (steps_.size() <= group) steps_.resize(group + 1, 0);
  return ++steps_[group];
}

}  // namespace zerotrain::optim
