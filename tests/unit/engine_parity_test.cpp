// The engine's backbone: ZeRO stages 0, 1 and 2 at world sizes 1, 2 and 4 (ranks are
// threads on the in-process backend) with accumulation 1, 2 and 4 train a model to the
// same parameters as plain single-process LibTorch training on the whole batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "zerotrain/engine/engine.h"

namespace comm = zerotrain::comm;

namespace {

constexpr int64_t kGlobalBatch = 16;
constexpr int kSteps = 20;
constexpr double kTolerance = 1e-5;   // fp32, 20 steps: reduction order and Adam's rounding

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 4));
    unused = register_module("unused", torch::nn::Linear(2, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, unused{nullptr};
};
TORCH_MODULE(Net);

Net make_net(bool freeze_fc1_bias) {
  torch::manual_seed(42);
  Net net;
  if (freeze_fc1_bias) net->fc1->bias.set_requires_grad(false);
  return net;
}

struct Data {
  torch::Tensor x, y;   // (steps, global batch, 8), (steps, global batch, 4)
};

Data make_data() {
  torch::manual_seed(7);
  return {torch::randn({kSteps, kGlobalBatch, 8}), torch::randn({kSteps, kGlobalBatch, 4})};
}

struct Case {
  int stage;
  int world_size;
  int accumulation;
  double clip = 0.0;
  bool overlap = true;
  bool freeze = false;
};

std::string name_of(const Case& c) {
  return "stage" + std::to_string(c.stage) + "_ws" + std::to_string(c.world_size) + "_gas" +
         std::to_string(c.accumulation) + (c.clip > 0 ? "_clip" : "") + (c.overlap ? "" : "_nooverlap") +
         (c.freeze ? "_frozen" : "");
}

// Plain LibTorch: the whole batch, torch::optim::AdamW.
std::vector<torch::Tensor> reference(const Case& c, const Data& data) {
  Net net = make_net(c.freeze);
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

zerotrain::Config config_for(const Case& c) {
  std::string json = R"({"train_batch_size": 16, "gradient_accumulation_steps": )" + std::to_string(c.accumulation) +
                     R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.0}},
                     "zero_optimization": {"stage": )" + std::to_string(c.stage) +
                     R"(, "reduce_bucket_size": 50, "overlap_comm": )" + (c.overlap ? "true" : "false") + "}";
  if (c.clip > 0) json += R"(, "gradient_clipping": )" + std::to_string(c.clip);
  return zerotrain::Config::from_string(json + "}");
}

class EngineParity : public ::testing::TestWithParam<Case> {};

TEST_P(EngineParity, SameParametersAsSingleProcessTraining) {
  const Case c = GetParam();
  const Data data = make_data();
  const auto want = reference(c, data);
  const int64_t micro = kGlobalBatch / (c.world_size * c.accumulation);
  auto world = comm::Communicator::make_thread_world(c.world_size);
  std::vector<Net> nets;
  for (int r = 0; r < c.world_size; ++r) nets.push_back(make_net(c.freeze));   // one thread seeds at a time
  std::vector<std::vector<torch::Tensor>> got(c.world_size);
  std::vector<std::string> errors(c.world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto engine = zerotrain::initialize(nets[r].ptr(), config_for(c), {.comm = world[r]});
        for (int s = 0; s < kSteps; ++s) {
          for (int k = 0; k < c.accumulation; ++k) {
            const int64_t first = (k * c.world_size + r) * micro;
            auto x = data.x[s].narrow(0, first, micro), y = data.y[s].narrow(0, first, micro);
            engine.backward(torch::mse_loss(nets[r]->forward(x), y));
            engine.step();
          }
        }
        EXPECT_EQ(engine.global_steps(), kSteps);
        EXPECT_EQ(engine.global_samples(), kSteps * kGlobalBatch);
        for (auto& p : nets[r]->parameters()) got[r].push_back(p.detach().clone());
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < c.world_size; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(got[r].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const double diff = (got[r][i] - want[i]).abs().max().item<double>();
      EXPECT_LE(diff, kTolerance) << "rank " << r << " parameter " << i;
    }
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int stage : {0, 1, 2}) {
    for (int ws : {1, 2, 4}) {
      for (int gas : {1, 2, 4}) cases.push_back({stage, ws, gas});
    }
    cases.push_back({stage, 2, 2, /*clip=*/0.05});
    cases.push_back({stage, 2, 2, 0.0, /*overlap=*/false});
    cases.push_back({stage, 4, 1, 0.0, true, /*freeze=*/true});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Matrix, EngineParity, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return name_of(info.param); });

}  // namespace
