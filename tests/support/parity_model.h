// The parity oracle shared by the in-process and multi-process engine tests: a small MLP,
// fixed data, and plain single-process LibTorch training of it (torch::optim::AdamW, or plain
// SGD, on the whole batch), which every stage, world size and accumulation must reproduce:
// the final parameters, and every step's global gradient norm.
//
// Why the norms too: Adam's update is nearly invariant to a common scale of the gradients,
// and clipping normalises it, so a gradient summed over ranks instead of averaged (or an
// accumulation divide missed or done twice) can still reach the reference's parameters.
// The norm before clipping sees the scale directly; plain SGD's parameters do too.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "zerotrain/config/config.h"

namespace zerotrain::test {

inline constexpr int64_t kGlobalBatch = 16;
inline constexpr int kSteps = 20;
inline constexpr double kParityTolerance = 1e-5;   // fp32, 20 steps: reduction order and Adam's rounding

struct ParityNetImpl : torch::nn::Module {
  ParityNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 4));
    unused = register_module("unused", torch::nn::Linear(2, 2));   // never in the forward
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, unused{nullptr};
};
TORCH_MODULE(ParityNet);

struct ParityCase {
  int stage = 0;
  int world_size = 1;
  int accumulation = 1;
  double clip = 0.0;
  bool overlap = true;
  bool freeze = false;   // fc1.bias frozen
  std::string dtype = "fp32";   // "bf16" or "fp16": the engine trains with that block enabled
  std::string optimizer = "AdamW";   // or "SGD": plain SGD (no momentum), whose step is linear in the gradient
  double weight_decay = 0.0;
};

inline constexpr double kParityAdamLr = 0.01;
inline constexpr double kParitySgdLr = 0.1;

// fp16 parity runs use a static scale, so that the reference applies the same one.
inline constexpr double kParityLossScale = 1024;

inline torch::ScalarType torch_dtype(const std::string& name) {
  return name == "bf16" ? torch::kBFloat16 : name == "fp16" ? torch::kHalf : torch::kFloat;
}

// For test names and failure messages.
inline void PrintTo(const ParityCase& c, std::ostream* os) {
  *os << "stage " << c.stage << ", world " << c.world_size << ", accumulation " << c.accumulation << ", clip " << c.clip
      << (c.overlap ? "" : ", no overlap") << (c.freeze ? ", fc1.bias frozen" : "") << ", " << c.dtype << ", "
      << c.optimizer << (c.weight_decay > 0 ? ", weight decay" : "");
}

inline ParityNet make_parity_net(bool freeze_fc1_bias) {
  torch::manual_seed(42);
  ParityNet net;
  if (freeze_fc1_bias) net->fc1->bias.set_requires_grad(false);
  return net;
}

struct ParityData {
  torch::Tensor x, y;   // (steps, global batch, 8), (steps, global batch, 4)
};

inline ParityData make_parity_data() {
  torch::manual_seed(7);
  return {torch::randn({kSteps, kGlobalBatch, 8}), torch::randn({kSteps, kGlobalBatch, 4})};
}

// What the reference (and an engine run) produced: the final parameters (fp32) and each
// step's global L2 norm of the unscaled gradients before clipping.
struct ParityRun {
  std::vector<torch::Tensor> params;
  std::vector<double> grad_norms;   // (kSteps,)
};

inline std::unique_ptr<torch::optim::Optimizer> make_reference_optimizer(const ParityCase& c,
                                                                         std::vector<torch::Tensor> params) {
  if (c.optimizer == "SGD") {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(kParitySgdLr).momentum(0).weight_decay(c.weight_decay));
  }
  return std::make_unique<torch::optim::AdamW>(params,
                                               torch::optim::AdamWOptions(kParityAdamLr).weight_decay(c.weight_decay));
}

// The L2 norm of all gradients, summed in double.
inline double global_grad_norm(const std::vector<torch::Tensor>& params) {
  double squares = 0;
  for (const auto& p : params) {
    if (p.grad().defined()) squares += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(squares);
}

// Mixed precision done by hand in plain LibTorch, as DeepSpeed defines it: the model in
// bf16/fp16, fp32 master copies stepped by the optimizer with the gradients unscaled, then
// copied back.
inline ParityRun parity_reference_mixed(const ParityCase& c, const ParityData& data) {
  const auto dtype = torch_dtype(c.dtype);
  const double scale = c.dtype == "fp16" ? kParityLossScale : 1.0;
  ParityNet net = make_parity_net(c.freeze);
  net->to(dtype);
  std::vector<torch::Tensor> trainable, master;
  for (auto& p : net->parameters()) {
    if (!p.requires_grad()) continue;
    trainable.push_back(p);
    master.push_back(p.detach().to(torch::kFloat).requires_grad_(true));
  }
  auto opt = make_reference_optimizer(c, master);
  ParityRun run;
  for (int s = 0; s < kSteps; ++s) {
    for (auto& p : trainable) p.mutable_grad().reset();
    auto out = net->forward(data.x[s].to(dtype)).to(torch::kFloat);
    (torch::mse_loss(out, data.y[s]) * scale).backward();
    for (size_t i = 0; i < master.size(); ++i) {   // `unused` gets no gradient: the engine still steps it
      const auto& g = trainable[i].grad();
      master[i].mutable_grad() = g.defined() ? g.to(torch::kFloat) / scale : torch::zeros_like(master[i]);
    }
    run.grad_norms.push_back(global_grad_norm(master));
    if (c.clip > 0) torch::nn::utils::clip_grad_norm_(master, c.clip);
    opt->step();
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < master.size(); ++i) trainable[i].copy_(master[i]);
  }
  for (auto& p : net->parameters()) run.params.push_back(p.detach().to(torch::kFloat));
  return run;
}

// Plain LibTorch on the whole batch: the parameters and norms every engine run must reach.
inline ParityRun parity_reference_run(const ParityCase& c, const ParityData& data) {
  if (c.dtype != "fp32") return parity_reference_mixed(c, data);
  ParityNet net = make_parity_net(c.freeze);
  std::vector<torch::Tensor> trainable;
  for (auto& p : net->parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  auto opt = make_reference_optimizer(c, trainable);
  ParityRun run;
  for (int s = 0; s < kSteps; ++s) {
    opt->zero_grad();
    auto loss = torch::mse_loss(net->forward(data.x[s]), data.y[s]);
    loss.backward();
    // `unused` gets no gradient; the engine steps it with a zero one, which weight decay sees.
    for (auto& p : trainable) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    }
    run.grad_norms.push_back(global_grad_norm(trainable));
    if (c.clip > 0) torch::nn::utils::clip_grad_norm_(trainable, c.clip);
    opt->step();
  }
  for (auto& p : net->parameters()) run.params.push_back(p.detach().clone());
  return run;
}

// The final parameters alone.
inline std::vector<torch::Tensor> parity_reference(const ParityCase& c, const ParityData& data) {
  return parity_reference_run(c, data).params;
}

// The config's optimizer keys, which the reference's optimizer mirrors: `"optimizer": {...}`
// (SGD is not one of DeepSpeed's ZeRO-tested optimizers, so it needs the opt-in).
inline std::string parity_optimizer_keys(const ParityCase& c) {
  std::ostringstream json;
  json.precision(17);
  if (c.optimizer == "SGD") {
    json << R"("optimizer": {"type": "SGD", "params": {"lr": )" << kParitySgdLr << R"(, "momentum": 0, "weight_decay": )"
         << c.weight_decay << R"(}}, "zero_allow_untested_optimizer": true)";
  } else {
    json << R"("optimizer": {"type": "AdamW", "params": {"lr": )" << kParityAdamLr << R"(, "weight_decay": )"
         << c.weight_decay << "}}";
  }
  return json.str();
}

inline Config parity_config(const ParityCase& c) {
  std::string json = R"({"train_batch_size": 16, "gradient_accumulation_steps": )" + std::to_string(c.accumulation) +
                     ", " + parity_optimizer_keys(c) + R"(,
                     "zero_optimization": {"stage": )" + std::to_string(c.stage) +
                     R"(, "reduce_bucket_size": 50, "overlap_comm": )" + (c.overlap ? "true" : "false") +
                     // Stage 3: every parameter sharded, none small enough to stay gathered.
                     (c.stage == 3 ? R"(, "stage3_param_persistence_threshold": 0)" : "") + "}";
  if (c.clip > 0) json += R"(, "gradient_clipping": )" + std::to_string(c.clip);
  if (c.dtype == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (c.dtype == "fp16") json += R"(, "fp16": {"enabled": true, "loss_scale": )" + std::to_string(kParityLossScale) + "}";
  return Config::from_string(json + "}");
}

// Half precision: the same oracle done by hand (parity_reference_mixed). Ranks sum partial
// gradients that were rounded to bf16/fp16 and average them on the wire in that dtype,
// where the oracle's single backward rounds the whole-batch gradient once. Adam turns
// rounding noise on a near-zero gradient into a whole step of lr (0.01), so a few weights
// can differ by about one lr step. Measured after 20 steps: at most 0.0176 in bf16 (world 4,
// accumulation 2) and 0.0093 in fp16 (stage 2, world 4, accumulation 2, reduced in fp16;
// 2^-12 elsewhere); the bounds are 2^-5 and 2^-6 (fp32: 1e-5).
//
// Plain SGD has no such amplifier: rounding stays rounding. Measured after 20 steps: 9.8e-4 in
// bf16, 2.4e-4 in fp16, 6e-8 in fp32; the bounds are 2^-8, 2^-10 and 1e-6.
inline double parity_tolerance(const ParityCase& c) {
  if (c.optimizer == "SGD") return c.dtype == "bf16" ? 1.0 / 256 : c.dtype == "fp16" ? 1.0 / 1024 : 1e-6;
  if (c.dtype == "bf16") return 1.0 / 32;
  if (c.dtype == "fp16") return 1.0 / 64;
  return kParityTolerance;
}

// Rank `rank`'s rows of micro-step `k` of a step: every sample once, equal weights.
inline torch::Tensor rank_rows(const torch::Tensor& batch, const ParityCase& c, int rank, int k) {
  const int64_t micro = kGlobalBatch / (c.world_size * c.accumulation);
  return batch.narrow(0, (k * c.world_size + rank) * micro, micro);
}

// The global gradient norms of an engine run (each step's get_global_grad_norm()) against
// the reference's, relative to the reference's. The bound is far below the factors a scale
// error makes (the world size, the accumulation, the loss scale), and above the rounding:
// measured over the whole matrix (stages 0-3, AdamW and SGD), the worst step is 2.8e-3 off
// in bf16, 9.5e-4 in fp16 and 1.1e-6 in fp32.
inline double grad_norm_tolerance(const ParityCase& c) {
  if (c.dtype == "bf16") return 0.02;
  if (c.dtype == "fp16") return 0.005;
  return 1e-5;
}

// "" when every step's norm is within `relative` of the reference's; otherwise what differs.
inline std::string grad_norm_mismatch(const std::vector<double>& got, const std::vector<double>& want, double relative) {
  std::ostringstream out;
  if (got.size() != want.size()) {
    out << got.size() << " gradient norms, want " << want.size();
    return out.str();
  }
  for (size_t s = 0; s < want.size(); ++s) {
    if (!(std::abs(got[s] - want[s]) <= relative * want[s])) {
      out << "step " << s << ": global gradient norm " << got[s] << ", single-process training's " << want[s]
          << " (ratio " << got[s] / want[s] << ", bound " << relative << " relative)";
      return out.str();
    }
  }
  return "";
}

// The largest difference between two lists of parameters.
inline double max_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, (a[i].to(torch::kFloat) - b[i].to(torch::kFloat)).abs().max().item<double>());
  }
  return a.size() == b.size() ? worst : 1e30;
}

}  // namespace zerotrain::test
