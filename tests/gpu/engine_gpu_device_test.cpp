// The engine's device on a GPU: a model split over two devices is refused; everything the
// engine makes lives on the parameters' GPU; the flat optimizers' CUDA kernels (ATen's fused
// Adam, Lamb's on-device trust ratios) against the CPU kernels; a checkpoint goes through
// host memory and back onto the GPU. Skipped where the machine shows no GPU (gpu_required.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>

#include "tests/gpu/device_runs.h"
#include "zerotrain/core/error.h"
#include "zerotrain/optim/flat_optimizer.h"

namespace {

using namespace zerotrain::test;
using namespace zerotrain::test::gpu;
namespace zo = zerotrain::optim;

class EngineGpuDevice : public GpuTest<> {};

zerotrain::Config adamw_config(int stage) {
  return zerotrain::Config::from_string(
      R"({"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}},
          "zero_optimization": {"stage": )" + std::to_string(stage) + "}}");
}

TEST_F(EngineGpuDevice, AModelOnTwoDevicesIsRefused) {
  auto net = make_parity_net(false);
  net->fc2->to(kCuda);   // fc1 stays on the CPU
  try {
    zerotrain::initialize(net.ptr(), adamw_config(1), {.comm = communicator_for(kCpu)});
    FAIL() << "a model on two devices was accepted";
  } catch (const zerotrain::UsageError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("fc1.weight is on cpu"), std::string::npos) << message;
    EXPECT_NE(message.find("is on cuda:0"), std::string::npos) << message;
    EXPECT_NE(message.find("move the whole model"), std::string::npos) << message;
  }
}

TEST_F(EngineGpuDevice, TrainsWhereTheParametersAreAndHandsBackHostCopies) {
  for (int stage : {0, 1, 2, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    auto net = make_parity_net(false);
    net->to(kCuda);
    auto engine = zerotrain::initialize(net.ptr(), adamw_config(stage), {.comm = communicator_for(kCuda)});
    EXPECT_EQ(engine.device(), kCuda);
    const auto before = net->fc1->weight.detach().to(kCpu).clone();
    engine.backward(net->forward(torch::ones({4, 8}, kCuda)).pow(2).mean());
    engine.step();
    for (const auto& p : net->parameters()) EXPECT_EQ(p.device(), kCuda);
    EXPECT_FALSE(torch::equal(before, net->fc1->weight.detach().to(kCpu))) << "the step changed nothing";
    ASSERT_TRUE(engine.get_global_grad_norm().has_value());
    EXPECT_GT(*engine.get_global_grad_norm(), 0);
    for (const auto& [name, t] : engine.consolidated_16bit_state_dict()) EXPECT_TRUE(t.is_cpu()) << name;
  }
}

TEST_F(EngineGpuDevice, CheckpointsLoadBackOntoTheGpu) {
  const auto dir = std::filesystem::temp_directory_path() / ("zt_gpu_ckpt_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  for (int stage : {1, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    auto net = make_parity_net(false);
    net->to(kCuda);
    auto engine = zerotrain::initialize(net.ptr(), adamw_config(stage), {.comm = communicator_for(kCuda)});
    for (int s = 0; s < 2; ++s) {
      engine.backward(net->forward(torch::ones({4, 8}, kCuda)).pow(2).mean());
      engine.step();
    }
    engine.save_checkpoint(dir.string(), "gpu");
    std::vector<torch::Tensor> saved;
    {
      zerotrain::GatheredParameters full(engine, {});
      for (const auto& p : net->parameters()) saved.push_back(p.detach().to(kCpu).clone());
    }
    auto other = make_parity_net(false);   // other weights until the load
    other->to(kCuda);
    auto loaded = zerotrain::initialize(other.ptr(), adamw_config(stage), {.comm = communicator_for(kCuda)});
    ASSERT_TRUE(loaded.load_checkpoint(dir.string(), "gpu").has_value());
    EXPECT_EQ(loaded.global_steps(), 2);
    zerotrain::GatheredParameters full(loaded, {});
    const auto params = other->parameters();
    ASSERT_EQ(params.size(), saved.size());
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i].device(), kCuda);
      EXPECT_TRUE(torch::equal(params[i].detach().to(kCpu), saved[i])) << "parameter " << i;
    }
  }
  std::filesystem::remove_all(dir);
}

// A flat optimizer on a CUDA shard (ATen's kernels) against the same on a CPU shard (the
// SIMD kernel, the host trust ratios), over the same steps: within a few float roundings.
double cuda_against_cpu(const std::string& optimizer, int stage, std::vector<int64_t> segments = {}) {
  auto c = zerotrain::Config::from_string(R"({"train_batch_size": 8, "optimizer": )" + optimizer + "}");
  auto cpu = zo::FlatOptimizer::from_config(*c.optimizer, stage);
  auto cuda = zo::FlatOptimizer::from_config(*c.optimizer, stage);
  torch::manual_seed(0);
  auto a = torch::randn({4099});
  auto b = a.to(kCuda);
  for (int s = 0; s < 10; ++s) {
    auto grad = torch::randn({4099}) * 0.1;
    cpu->step(0, a, grad, cpu->defaults(), segments);
    cuda->step(0, b, grad.to(kCuda), cuda->defaults(), segments);
  }
  // The same states as the CPU optimizer's (an empty map for plain SGD on both), each on the GPU.
  std::vector<std::string> cpu_names, cuda_names;
  for (const auto& [name, t] : cpu->state(0)) cpu_names.push_back(name);
  for (const auto& [name, t] : cuda->state(0)) {
    cuda_names.push_back(name);
    EXPECT_EQ(t.device(), kCuda) << name;
  }
  EXPECT_EQ(cuda_names, cpu_names);
  return ((a - b.to(kCpu)).abs().max() / a.abs().max()).item<double>();
}

TEST_F(EngineGpuDevice, FlatOptimizersOnCudaMatchTheCpuKernels) {
  EXPECT_LT(cuda_against_cpu(R"({"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}})", 1), 1e-6);
  EXPECT_LT(cuda_against_cpu(R"({"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.1, "adam_w_mode": false}})", 1),
            1e-6);
  EXPECT_LT(cuda_against_cpu(R"({"type": "AdamW", "params": {"lr": 0.01, "bias_correction": false}})", 1), 1e-6);
  EXPECT_LT(cuda_against_cpu(R"({"type": "Lamb", "params": {"lr": 0.01, "weight_decay": 0.01}})", 0,
                             {1000, 3, 2048, 1048}),
            1e-6);
  EXPECT_LT(cuda_against_cpu(R"({"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}})", 1), 1e-6);
  EXPECT_LT(cuda_against_cpu(R"({"type": "Adagrad", "params": {"lr": 0.1}})", 1), 1e-6);
}

}  // namespace
