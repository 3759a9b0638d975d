// The parity oracle shared by the in-process and multi-process engine tests: a small MLP,
// fixed data, and plain single-process LibTorch training of it (torch::optim::AdamW on the
// whole batch), which every stage, world size and accumulation must reproduce.
#pragma once

#include <torch/torch.h>

#include <ostream>
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
};

// fp16 parity runs use a static scale, so that the reference applies the same one.
inline constexpr double kParityLossScale = 1024;

inline torch::ScalarType torch_dtype(const std::string& name) {
  return name == "bf16" ? torch::kBFloat16 : name == "fp16" ? torch::kHalf : torch::kFloat;
}

// For test names and failure messages.
inline void PrintTo(const ParityCase& c, std::ostream* os) {
  *os << "stage " << c.stage << ", world " << c.world_size << ", accumulation " << c.accumulation << ", clip " << c.clip
      << (c.overlap ? "" : ", no overlap") << (c.freeze ? ", fc1.bias frozen" : "") << ", " << c.dtype;
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

// Mixed precision done by hand in plain LibTorch, as DeepSpeed defines it: the model in
// bf16/fp16, fp32 master copies stepped by AdamW with the gradients unscaled, then copied back.
inline std::vector<torch::Tensor> parity_reference_mixed(const ParityCase& c, const ParityData& data) {
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
  torch::optim::AdamW opt(master, torch::optim::AdamWOptions(0.01).weight_decay(0.0));
  for (int s = 0; s < kSteps; ++s) {
    for (auto& p : trainable) p.mutable_grad().reset();
    auto out = net->forward(data.x[s].to(dtype)).to(torch::kFloat);
    (torch::mse_loss(out, data.y[s]) * scale).backward();
    for (size_t i = 0; i < master.size(); ++i) {   // `unused` gets no gradient: AdamW still decays it
      const auto& g = trainable[i].grad();
      master[i].mutable_grad() = g.defined() ? g.to(torch::kFloat) / scale : torch::zeros_like(master[i]);
    }
    if (c.clip > 0) torch::nn::utils::clip_grad_norm_(master, c.clip);
    opt.step();
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < master.size(); ++i) trainable[i].copy_(master[i]);
  }
  std::vector<torch::Tensor> result;
  for (auto& p : net->parameters()) result.push_back(p.detach().to(torch::kFloat));
  return result;
}

// Plain LibTorch on the whole batch: the final parameters every engine run must reach.
inline std::vector<torch::Tensor> parity_reference(const ParityCase& c, const ParityData& data) {
  if (c.dtype != "fp32") return parity_reference_mixed(c, data);
  ParityNet net = make_parity_net(c.freeze);
  std::vector<torch::Tensor> trainable;
  for (auto& p : net->parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  torch::optim::AdamW opt(trainable, torch::optim::AdamWOptions(0.01).weight_decay(0.0));
  for (int s = 0; s < kSteps; ++s) {
    opt.zero_grad();
    auto loss = torch::mse_loss(net->forward(data.x[s]), data.y[s]);
    loss.backward();
    if (c.clip > 0) torch::nn::utils::clip_grad_norm_(trainable, c.clip);
    opt.step();
  }
  std::vector<torch::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

inline Config parity_config(const ParityCase& c) {
  std::string json = R"({"train_batch_size": 16, "gradient_accumulation_steps": )" + std::to_string(c.accumulation) +
                     R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.0}},
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
inline double parity_tolerance(const ParityCase& c) {
  if (c.dtype == "bf16") return 1.0 / 32;
  if (c.dtype == "fp16") return 1.0 / 64;
  return kParityTolerance;
}

// Rank `rank`'s rows of micro-step `k` of a step: every sample once, equal weights.
inline torch::Tensor rank_rows(const torch::Tensor& batch, const ParityCase& c, int rank, int k) {
  const int64_t micro = kGlobalBatch / (c.world_size * c.accumulation);
  return batch.narrow(0, (k * c.world_size + rank) * micro, micro);
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
