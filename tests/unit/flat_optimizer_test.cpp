// Each flat optimizer against LibTorch's own implementation of the same algorithm
// (torch::optim), or against its formula where LibTorch has none (Lion, Lamb).
#include <gtest/gtest.h>
#include <torch/optim.h>

#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"
#include "zerotrain/optim/flat_optimizer.h"

namespace zo = zerotrain::optim;

namespace {

std::unique_ptr<zo::FlatOptimizer> make(const std::string& optimizer, int stage = 1,
                                        zo::OptimizerKernels kernels = zo::OptimizerKernels::kByDevice) {
  auto c = zerotrain::Config::from_string(R"({"train_batch_size": 8, "optimizer": )" + optimizer + "}");
  return zo::FlatOptimizer::from_config(*c.optimizer, stage, kernels);
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

// The kernels a GPU shard is stepped with (ATen's, here on the CPU) against the CPU's
// (the SIMD kernel with DeepSpeedCPUAdam's bits), over the same steps: the largest
// difference of the weights and of each moment, relative to that tensor's largest element
// (element by element, a moment that sums to about zero has no relative precision to keep).
struct KernelDifference {
  double weights = 0, exp_avg = 0, exp_avg_sq = 0;
};

KernelDifference aten_against_cpu_kernels(const std::string& optimizer, int steps = 10, int stage = 1,
                                          std::vector<int64_t> segments = {}, torch::Tensor initial = {}) {
  auto simd = make(optimizer, stage, zo::OptimizerKernels::kByDevice);
  auto aten = make(optimizer, stage, zo::OptimizerKernels::kAten);
  torch::manual_seed(0);
  // Not a multiple of any SIMD width, so the kernels' tails are compared too.
  if (!initial.defined()) initial = torch::randn({4099});
  auto a = initial.clone(), b = initial.clone();
  for (int s = 0; s < steps; ++s) {
    auto grad = torch::randn({4099}) * 0.1;
    simd->step(0, a, grad, simd->defaults(), segments);
    aten->step(0, b, grad, aten->defaults(), segments);
  }
  EXPECT_EQ(aten->steps(0), steps);
  KernelDifference d;
  auto relative = [](const torch::Tensor& x, const torch::Tensor& y) {
    return ((x - y).abs().max() / x.abs().max()).item<double>();
  };
  d.weights = relative(a, b);
  d.exp_avg = relative(simd->state(0).at("exp_avg"), aten->state(0).at("exp_avg"));
  // Every optimizer compared here (Adam, AdamW, Lamb) keeps both moments: at() makes a
  // missing or renamed one fail instead of comparing nothing.
  d.exp_avg_sq = relative(simd->state(0).at("exp_avg_sq"), aten->state(0).at("exp_avg_sq"));
  return d;
}

TEST(FlatOptimizer, AtenAdamMatchesTheCpuKernel) {
  // AdamW and Adam with L2 (adam_w_mode false), weight decay on and off, bias correction on
  // (the fused multi-tensor kernel) and off (ATen's elementwise ops).
  const std::vector<std::string> configs{
      R"({"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}})",
      R"({"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.0, "betas": [0.8, 0.99], "eps": 1e-6}})",
      R"({"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.1, "adam_w_mode": false}})",
      R"({"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.0, "adam_w_mode": false}})",
      R"({"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.1, "adam_w_mode": true}})",
      R"({"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1, "bias_correction": false}})",
      R"({"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.1, "adam_w_mode": false, "bias_correction": false}})",
  };
  for (const auto& c : configs) {
    const KernelDifference d = aten_against_cpu_kernels(c);
    // A few float roundings apart after 10 steps (about 3e-7 here): the same formulas with
    // the same float hyper-parameters, evaluated in another order.
    EXPECT_LT(d.weights, 1e-6) << c;
    EXPECT_LT(d.exp_avg, 1e-6) << c;
    EXPECT_LT(d.exp_avg_sq, 1e-6) << c;
  }
}

TEST(FlatOptimizer, AtenAdamFollowsTheConfigsMode) {
  // The two modes must differ where weight decay is on: a path that ignored adam_w_mode
  // would agree with one of them only.
  const std::string adamw = R"({"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.5, "adam_w_mode": true}})";
  const std::string l2 = R"({"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.5, "adam_w_mode": false}})";
  auto w = make(adamw, 1, zo::OptimizerKernels::kAten), a = make(l2, 1, zo::OptimizerKernels::kAten);
  auto p1 = torch::full({64}, 2.0f), p2 = p1.clone();
  auto g = torch::full({64}, 0.01f);
  for (int s = 0; s < 3; ++s) {
    w->step(0, p1, g, w->defaults());
    a->step(0, p2, g, a->defaults());
  }
  EXPECT_GT((p1 - p2).abs().max().item<double>(), 1e-4);
}

TEST(FlatOptimizer, AtenAdamRefusesTensorsOnAnotherDevice) {
  auto ours = make(R"({"type": "AdamW", "params": {"lr": 0.01}})", 1, zo::OptimizerKernels::kAten);
  auto p = torch::zeros({8});
  auto g = torch::zeros({8}, torch::TensorOptions().device(torch::kMeta));
  try {
    ours->step(0, p, g, ours->defaults());
    FAIL() << "gradients on another device were accepted";
  } catch (const zerotrain::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("grads must be a float32 tensor on cpu"), std::string::npos) << e.what();
  }
}

TEST(FlatOptimizer, AtenLambMatchesTheHostTrustRatios) {
  // Segments of several sizes, one of them all zeros (trust ratio 1), and clamping at both ends.
  const std::string lamb = R"({"type": "Lamb", "params": {"lr": 0.01, "weight_decay": 0.01, "max_coeff": 2.0,
                              "min_coeff": 0.5}})";
  auto initial = torch::randn({4099});
  initial.narrow(0, 0, 1000).mul_(10);      // |w| / |u| about 10: clamped to 2
  initial.narrow(0, 1000, 3).zero_();       // |w| = 0 at the first step: ratio 1
  initial.narrow(0, 1003, 2048).mul_(0.01); // about 0.01: clamped to 0.5
  const KernelDifference d = aten_against_cpu_kernels(lamb, 6, /*stage=*/0, {1000, 3, 2048, 1048}, initial);
  EXPECT_LT(d.weights, 1e-6);
  EXPECT_LT(d.exp_avg, 1e-6);
  EXPECT_LT(d.exp_avg_sq, 1e-6);
}

}  // namespace
