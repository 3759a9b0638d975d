// `zerotrain report`'s GPU probe: the GPU code paths run here and now, checked against the
// CPU. A matrix product in fp32 and bf16, then a small model trained a few steps at each ZeRO
// stage on cuda:0 and on the CPU from the same weights and data: the losses must agree within
// what different hardware gives (fp32 reductions in another order: relative 1e-4). Where
// the machine shows a GPU that LibTorch cannot use, that is the probe's failure.
#include <torch/torch.h>

#include <cmath>

#include "tools/gpu_info.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/engine.h"

namespace zerotrain::tools {
namespace {

constexpr double kRelTolerance = 1e-4;
constexpr int kSteps = 3;

std::vector<double> train_losses(int stage, c10::Device device) {
  torch::manual_seed(7);
  auto model = std::make_shared<torch::nn::SequentialImpl>(torch::nn::Linear(16, 32), torch::nn::ReLU(),
                                                           torch::nn::Linear(32, 4));
  model->to(device);
  const auto config = Config::from_string(detail::str(
      R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
          "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
          "zero_optimization": {"stage": )", stage, "}}"));
  auto comm = comm::Communicator::make_thread_world(1).front();
  Engine engine = initialize(model, config, {.comm = comm});
  const auto x = torch::randn({8, 16}).to(device);
  const auto y = torch::randn({8, 4}).to(device);
  std::vector<double> losses;
  for (int i = 0; i < kSteps; ++i) {
    auto loss = torch::mse_loss(model->forward(x), y);
    engine.backward(loss);
    engine.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

bool close(double a, double b) { return std::abs(a - b) <= kRelTolerance * std::max(std::abs(a), std::abs(b)); }

}  // namespace

GpuProbe gpu_probe(const GpuInfo& info) {
  GpuProbe probe;
  if (!torch::cuda::is_available()) {
    if (info.shown.shown) {
      probe.unusable = cuda::unusable_gpu_message(info.shown, cuda::cuda_load(), cuda::cuda_runtime_reason());
      probe.lines.push_back("FAIL: " + probe.unusable);
    } else {
      probe.lines.push_back("no: no GPU visible here, so the GPU paths were not run");
    }
    return probe;
  }
  probe.tested = true;
  probe.passed = true;
  const c10::Device gpu(c10::kCUDA, 0);
  auto check = [&](bool ok, const std::string& what) {
    probe.passed = probe.passed && ok;
    probe.lines.push_back(std::string(ok ? "pass: " : "FAIL: ") + what);
  };
  try {
    torch::manual_seed(1);
    const auto a = torch::randn({64, 64}), b = torch::randn({64, 64});
    check(torch::allclose(a.matmul(b), a.to(gpu).matmul(b.to(gpu)).cpu(), 1e-4, 1e-4), "fp32 matmul on cuda:0");
    const auto a16 = a.to(torch::kBFloat16), b16 = b.to(torch::kBFloat16);
    check(torch::allclose(a16.matmul(b16).to(torch::kFloat), a16.to(gpu).matmul(b16.to(gpu)).cpu().to(torch::kFloat),
                          5e-2, 5e-1),
          "bf16 matmul on cuda:0");
    for (int stage = 0; stage <= 3; ++stage) {
      const auto cpu = train_losses(stage, c10::kCPU), cuda = train_losses(stage, gpu);
      bool same = true;
      for (int i = 0; i < kSteps; ++i) same = same && close(cpu[i], cuda[i]);
      check(same, detail::str("ZeRO stage ", stage, ": ", kSteps, " steps on cuda:0 give the CPU's losses (last ",
                              cuda.back(), " vs ", cpu.back(), ")"));
    }
  } catch (const std::exception& e) {
    check(false, std::string("the probe stopped: ") + e.what());
  }
  return probe;
}

}  // namespace zerotrain::tools
