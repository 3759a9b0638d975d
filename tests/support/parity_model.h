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
};

// For test names and failure messages.
inline void PrintTo(const ParityCase& c, std::ostream* os) {
  *os << "stage " << c.stage << ", world " << c.world_size << ", accumulation " << c.accumulation << ", clip " << c.clip
      << (c.overlap ? "" : ", no overlap") << (c.freeze ? ", fc1.bias frozen" : "");
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

// Plain LibTorch on the whole batch: the final parameters every engine run must reach.
inline std::vector<torch::Tensor> parity_reference(const ParityCase& c, const ParityData& data) {
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
                     R"(, "reduce_bucket_size": 50, "overlap_comm": )" + (c.overlap ? "true" : "false") + "}";
  if (c.clip > 0) json += R"(, "gradient_clipping": )" + std::to_string(c.clip);
  return Config::from_string(json + "}");
}

// Rank `rank`'s rows of micro-step `k` of a step: every sample once, equal weights.
inline torch::Tensor rank_rows(const torch::Tensor& batch, const ParityCase& c, int rank, int k) {
  const int64_t micro = kGlobalBatch / (c.world_size * c.accumulation);
  return batch.narrow(0, (k * c.world_size + rank) * micro, micro);
}

// The largest difference between two lists of parameters.
inline double max_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return a.size() == b.size() ? worst : 1e30;
}

}  // namespace zerotrain::test
