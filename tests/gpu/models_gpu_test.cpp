// The built-in models of `zerotrain train` on a GPU: each one's loss on cuda:0 is its loss on
// the CPU, from the same weights and batch. A forward that creates a tensor without the
// input's device (the GPT's positions or its attention mask, say) fails here, where the
// engine tests, which train their own small nets, would not see it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/gpu/device_runs.h"
#include "zerotrain/models/models.h"

namespace {

using namespace zerotrain::test::gpu;
namespace zm = zerotrain::models;

class ModelsGpu : public GpuTest<> {};

struct Case {
  std::string name, config;
  zm::DataShape data;
};

// A batch of 4 that `model` trains on: tokens for the GPT, images and classes for the
// ConvNet, features and regression targets for the MLP (synthetic data).
std::pair<at::Tensor, at::Tensor> batch_for(zm::Model& model, const zm::DataShape& data) {
  const auto [a, b] = model.data_dims();
  if (model.kind() == "gpt") {
    auto tokens = torch::randint(a, {4, b + 1}, torch::kLong);
    return {tokens.narrow(1, 0, b).contiguous(), tokens.narrow(1, 1, b).contiguous()};
  }
  if (model.kind() == "convnet") {
    return {torch::rand({4, data.channels, data.height, data.width}), torch::randint(data.classes, {4}, torch::kLong)};
  }
  return {torch::randn({4, a}), torch::randn({4, b})};   // the MLP on synthetic data: a regression
}

// cuDNN convolutions may run in TF32 by default (LibTorch allows it), about three decimal
// digits: this test is about where tensors are, so both kinds of kernel keep full fp32.
class Fp32Kernels {
 public:
  Fp32Kernels() : cudnn_(at::globalContext().allowTF32CuDNN()), cublas_(at::globalContext().allowTF32CuBLAS()) {
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  ~Fp32Kernels() {
    at::globalContext().setAllowTF32CuDNN(cudnn_);
    at::globalContext().setAllowTF32CuBLAS(cublas_);
  }

 private:
  bool cudnn_, cublas_;
};

TEST_F(ModelsGpu, EachBuiltInModelGivesTheCpuLossOnCuda) {
  Fp32Kernels fp32;
  zm::DataShape images{.kind = zm::DataShape::Kind::kImages, .channels = 1, .height = 28, .width = 28, .classes = 10,
                       .name = "fashion-mnist"};
  for (const Case& c : {Case{"gpt", "preset=tiny", {}}, Case{"mlp", "", {}}, Case{"convnet", "", images}}) {
    SCOPED_TRACE(c.name);
    torch::manual_seed(3);
    auto model = zm::make_model(c.name, c.config, c.data);
    auto [inputs, targets] = batch_for(*model, c.data);
    const double on_cpu = model->loss(inputs, targets).item<double>();
    zm::EvalSums eval_on_cpu;
    {
      torch::NoGradGuard no_grad;
      eval_on_cpu = model->eval_sums(inputs, targets);
    }
    model->module()->to(kCuda);
    at::Tensor loss;
    ASSERT_NO_THROW(loss = model->loss(inputs.to(kCuda), targets.to(kCuda)));
    EXPECT_EQ(loss.device(), kCuda);
    EXPECT_NEAR(loss.item<double>(), on_cpu, 1e-4 * std::abs(on_cpu));
    // The evaluation's sums, as the Trainer takes them.
    torch::NoGradGuard no_grad;
    zm::EvalSums eval;
    ASSERT_NO_THROW(eval = model->eval_sums(inputs.to(kCuda), targets.to(kCuda)));
    EXPECT_NEAR(eval.loss_sum, eval_on_cpu.loss_sum, 1e-4 * std::abs(eval_on_cpu.loss_sum));
    EXPECT_EQ(eval.count, eval_on_cpu.count);
  }
}

}  // namespace
