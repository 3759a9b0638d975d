// Each flat optimizer against LibTorch's own implementation of the same algorithm
// (torch::optim), or against its formula where LibTorch has none (Lion, Lamb).
#include <gtest/gtest.h>
#include <torch/optim.h>

#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"
#include "zerotrain/optim/flat_optimizer.h"

namespace zo = zerotrain::optim;

namespace {

std::unique_ptr<zo::FlatOptimizer> make(const std::string& optimizer, int stage = 1) {
  auto c = zerotrain::Config::from_string(R"({"train_batch_size": 8, "optimizer": )" + optimizer + "}");
  return zo::FlatOptimizer::from_config(*c.optimizer, stage);
}

// Runs `steps` steps of ours and of torch's on the same parameters and gradients.
template <class TorchOptimizer, class Options>
double max_difference(zo::FlatOptimizer& ours, Options torch_options, int steps = 5) {
  torch::manual_seed(0);
  auto initial = torch::randn({1037});
  auto mine = initial.clone();
  auto theirs = initial.clone().requires_grad_(true);
  TorchOptimizer reference({theirs}, torch_options);
  for (int s = 0; s < steps; ++s) {
    auto grad = torch::randn({1037}) * 0.1;
    ours.step(0, mine, grad, ours.defaults());
    theirs.mutable_grad() = grad.clone();
    reference.step();
  }
  return (mine - theirs.detach()).abs().max().item<double>();
}

TEST(FlatOptimizer, AdamWMatchesTorch) {
  auto ours = make(R"({"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}})");
  EXPECT_LT((max_difference<torch::optim::AdamW>(*ours, torch::optim::AdamWOptions(0.01).weight_decay(0.1))), 1e-6);
  EXPECT_EQ(ours->steps(0), 5);
  EXPECT_EQ(ours->state_nbytes(), 2 * 1037 * 4);
}

TEST(FlatOptimizer, AdamL2ModeMatchesTorchAdam) {
  auto ours = make(R"({"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.1, "adam_w_mode": false}})");
  EXPECT_LT((max_difference<torch::optim::Adam>(*ours, torch::optim::AdamOptions(0.01).weight_decay(0.1))), 1e-6);
}

TEST(FlatOptimizer, SgdMatchesTorch) {
  auto plain = make(R"({"type": "SGD", "params": {"lr": 0.1}})");
  EXPECT_LT((max_difference<torch::optim::SGD>(*plain, torch::optim::SGDOptions(0.1))), 1e-6);
  auto momentum = make(R"({"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "dampening": 0.1}})");
  EXPECT_LT((max_difference<torch::optim::SGD>(
                *momentum, torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01).dampening(0.1))),
            1e-6);
  auto nesterov = make(R"({"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "nesterov": true}})");
  EXPECT_LT((max_difference<torch::optim::SGD>(*nesterov, torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true))),
            1e-6);
  EXPECT_THROW(make(R"({"type": "SGD", "params": {"lr": 0.1, "nesterov": true}})"), zerotrain::ConfigError);
}

TEST(FlatOptimizer, AdagradMatchesTorch) {
  auto ours = make(R"({"type": "Adagrad", "params": {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.01,
                      "initial_accumulator_value": 0.1}})");
  EXPECT_LT((max_difference<torch::optim::Adagrad>(
                *ours, torch::optim::AdagradOptions(0.1).lr_decay(0.01).weight_decay(0.01).initial_accumulator_value(0.1).eps(1e-10))),
            1e-6);
}

TEST(FlatOptimizer, LionFollowsItsFormula) {
  auto ours = make(R"({"type": "Lion", "params": {"lr": 0.01, "betas": [0.9, 0.99], "weight_decay": 0.1}})");
  auto p = torch::tensor({1.0f, -2.0f, 0.5f});
  auto g = torch::tensor({0.3f, 0.1f, -0.2f});
  ours->step(0, p, g, ours->defaults());
  // m starts at 0: update = sign(0.1 g) = sign(g); p = p (1 - lr wd) - lr sign(g); m = 0.01 g.
  auto want_p = torch::tensor({1.0f, -2.0f, 0.5f}) * (1 - 0.001f) - 0.01f * torch::tensor({1.0f, 1.0f, -1.0f});
  EXPECT_TRUE(torch::allclose(p, want_p));
  EXPECT_TRUE(torch::allclose(ours->state(0).at("exp_avg"), g * 0.01f));
}

TEST(FlatOptimizer, LambTrustRatioPerSegment) {
  auto ours = make(R"({"type": "Lamb", "params": {"lr": 0.01, "max_coeff": 10.0, "min_coeff": 0.01}})", /*stage=*/0);
  auto p = torch::tensor({3.0f, 4.0f, 0.0f, 1.0f});
  auto g = torch::tensor({1.0f, 1.0f, 1.0f, -1.0f});
  const std::vector<int64_t> segments{2, 2};
  ours->step(0, p, g, ours->defaults(), segments);
  // Step 1: the Adam direction is g / (|g| + eps) = sign(g) (within eps). Segment 0:
  // |w| = 5, |u| = sqrt(2), trust = 5 / sqrt(2); segment 1: |w| = 1, trust = 1 / sqrt(2).
  const float t0 = 5.0f / std::sqrt(2.0f), t1 = 1.0f / std::sqrt(2.0f);
  auto want = torch::tensor({3.0f - 0.01f * t0, 4.0f - 0.01f * t0, 0.0f - 0.01f * t1, 1.0f + 0.01f * t1});
  EXPECT_TRUE(torch::allclose(p, want, 1e-5, 1e-6)) << p;
  EXPECT_THROW(make(R"({"type": "Lamb", "params": {"lr": 0.01}})", /*stage=*/2), zerotrain::ConfigError);
}

}  // namespace
