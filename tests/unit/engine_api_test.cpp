// The Engine's API beyond parity: schedules, parameter groups, and the errors a user meets.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "tests/support/parity_model.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/engine.h"

namespace {

using namespace zerotrain::test;

zerotrain::Config config(const std::string& extra, int stage = 0) {
  return zerotrain::Config::from_string(
      R"({"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.0}},
          "zero_optimization": {"stage": )" + std::to_string(stage) + "}" + extra + "}");
}

void train_step(zerotrain::Engine& engine, ParityNet& net) {
  engine.backward(net->forward(torch::ones({4, 8})).pow(2).mean());
  engine.step();
}

TEST(EngineApi, ScheduleSetsTheLearningRateEachStep) {
  auto net = make_parity_net(false);
  auto engine = zerotrain::initialize(
      net.ptr(), config(R"(, "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.4,
                         "warmup_num_steps": 4, "warmup_type": "linear"}})"),
      {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
  std::vector<double> lrs;
  for (int s = 0; s < 6; ++s) {
    lrs.push_back(engine.get_lr().front());
    train_step(engine, net);
  }
  // DeepSpeed: min_lr before the first step, then linear warm-up from iteration 0.
  const std::vector<double> want{0.0, 0.0, 0.1, 0.2, 0.3, 0.4};
  ASSERT_EQ(lrs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(lrs[i], want[i], 1e-12) << "step " << i;
}

TEST(EngineApi, ParameterGroupsCarryTheirOwnLearningRate) {
  auto net = make_parity_net(false);
  auto reference = make_parity_net(false);
  auto engine = zerotrain::initialize(
      net.ptr(), config(R"(, "gradient_clipping": 0)", 1),   // the reference does not clip
      {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0],
       .param_groups = {{"fc1", {net->fc1->weight, net->fc1->bias}, 0.05, std::nullopt},
                        {"fc2", {net->fc2->weight, net->fc2->bias}, std::nullopt, std::nullopt}}});
  torch::optim::AdamW opt({torch::optim::OptimizerParamGroup({reference->fc1->weight, reference->fc1->bias},
                                                              std::make_unique<torch::optim::AdamWOptions>(0.05)),
                           torch::optim::OptimizerParamGroup({reference->fc2->weight, reference->fc2->bias},
                                                              std::make_unique<torch::optim::AdamWOptions>(0.01))},
                          torch::optim::AdamWOptions(0.01).weight_decay(0.0));
  for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).weight_decay(0.0);
  for (int s = 0; s < 5; ++s) {
    train_step(engine, net);
    opt.zero_grad();
    reference->forward(torch::ones({4, 8})).pow(2).mean().backward();
    opt.step();
  }
  EXPECT_EQ(engine.get_lr(), (std::vector<double>{0.05, 0.01}));
  EXPECT_LE(max_difference({net->fc1->weight, net->fc2->weight}, {reference->fc1->weight, reference->fc2->weight}),
            kParityTolerance);
  // The unused layer is in no group: untouched.
  EXPECT_TRUE(torch::equal(net->unused->weight, make_parity_net(false)->unused->weight));
}

TEST(EngineApi, ErrorsNameTheProblem) {
  auto comm = zerotrain::comm::Communicator::make_thread_world(1)[0];
  {
    auto net = make_parity_net(false);
    auto engine = zerotrain::initialize(net.ptr(), config("", 2), {.comm = comm});
    EXPECT_THROW({ auto guard = engine.no_sync(); }, zerotrain::UsageError);
  }
  {
    // no_sync() around the boundary micro-step would step on unaveraged gradients.
    auto net = make_parity_net(false);
    auto engine = zerotrain::initialize(net.ptr(), config("", 0), {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
    {
      auto guard = engine.no_sync();
      engine.backward(net->forward(torch::ones({4, 8})).sum());
    }
    EXPECT_THROW(engine.step(), zerotrain::UsageError);
  }
  {
    auto net = make_parity_net(false);
    auto c = zerotrain::Config::from_string(
        R"({"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {}},
            "zero_optimization": {"stage": 1, "ignore_unused_parameters": false}})");
    auto engine = zerotrain::initialize(net.ptr(), c, {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
    try {
      engine.backward(net->forward(torch::ones({4, 8})).sum());
      FAIL() << "no error for an unused parameter";
    } catch (const zerotrain::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("unused.weight"), std::string::npos) << e.what();
    }
  }
  {
    // Lamb with ZeRO: the config refuses it unless untested optimizers are allowed (as
    // DeepSpeed), and even then the engine does, because the trust ratio needs whole parameters.
    auto net = make_parity_net(false);
    EXPECT_THROW(zerotrain::Config::from_string(R"({"train_batch_size": 4, "optimizer": {"type": "Lamb", "params": {}},
                                                   "zero_optimization": {"stage": 1}})"),
                 zerotrain::ConfigError);
    auto c = zerotrain::Config::from_string(
        R"({"train_batch_size": 4, "optimizer": {"type": "Lamb", "params": {}}, "zero_optimization": {"stage": 1},
            "zero_allow_untested_optimizer": true})");
    EXPECT_THROW(zerotrain::initialize(net.ptr(), c, {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]}),
                 zerotrain::ConfigError);
  }
  {
    auto net = make_parity_net(false);
    auto c = zerotrain::Config::from_string(R"({"train_batch_size": 4})");
    EXPECT_THROW(zerotrain::initialize(net.ptr(), c, {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]}),
                 zerotrain::ConfigError);
    // What this engine does not run (optimizer offload with Adagrad: the offloaded step is
    // Adam's) is refused as the config is read, as `config check` refuses it (exit 4).
    EXPECT_THROW(zerotrain::Config::from_string(
                     R"({"train_batch_size": 4, "optimizer": {"type": "Adagrad", "params": {}},
                         "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})"),
                 zerotrain::NotSupported);
  }
}

// A module whose one parameter is on the meta device: no data, no kernels.
struct MetaNetImpl : torch::nn::Module {
  MetaNetImpl() {
    fc = register_module("fc", torch::nn::Linear(8, 4));
    w = register_parameter("w", torch::empty({4}, torch::TensorOptions().device(torch::kMeta)));
  }
  torch::nn::Linear fc{nullptr};
  torch::Tensor w;
};
TORCH_MODULE(MetaNet);

TEST(EngineApi, TrainsOnTheParametersDeviceAndRefusesOthers) {
  auto net = make_parity_net(false);
  auto engine = zerotrain::initialize(net.ptr(), config("", 2), {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
  EXPECT_EQ(engine.device(), torch::Device(torch::kCPU));
  // A device without kernels or a backend here is refused, naming the parameter and the device.
  MetaNet meta;
  try {
    zerotrain::initialize(meta.ptr(), config("", 0), {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
    FAIL() << "a meta parameter was accepted";
  } catch (const zerotrain::NotSupported& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("parameter w is on meta"), std::string::npos) << message;
    EXPECT_NE(message.find("CPU or on a CUDA GPU"), std::string::npos) << message;
    EXPECT_NE(message.find("model->to("), std::string::npos) << message;
  }
  // Frozen, it is left out of training, and so of the check.
  MetaNet frozen;
  frozen->w.set_requires_grad(false);
  auto engine2 = zerotrain::initialize(frozen.ptr(), config("", 0), {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
  EXPECT_EQ(engine2.device(), torch::Device(torch::kCPU));
}

TEST(EngineApi, ClientOptimizerAtEveryStageMatchesTheReference) {
  const ParityData data = make_parity_data();
  for (int stage : {0, 1, 2}) {
    const ParityCase c{stage, 2, 1};
    const auto want = parity_reference(c, data);
    auto world = zerotrain::comm::Communicator::make_thread_world(2);
    std::vector<ParityNet> nets{make_parity_net(false), make_parity_net(false)};
    std::vector<std::vector<torch::Tensor>> got(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        try {
          auto client = std::make_shared<torch::optim::AdamW>(nets[r]->parameters(),
                                                              torch::optim::AdamWOptions(0.01).weight_decay(0.0));
          auto config = zerotrain::Config::from_string(
              R"({"train_batch_size": 16, "zero_optimization": {"stage": )" + std::to_string(stage) +
              R"(, "reduce_bucket_size": 50}})");
          auto engine = zerotrain::initialize(nets[r].ptr(), config, {.comm = world[r], .optimizer = client});
          for (int s = 0; s < kSteps; ++s) {
            engine.backward(torch::mse_loss(nets[r]->forward(rank_rows(data.x[s], c, r, 0)), rank_rows(data.y[s], c, r, 0)));
            engine.step();
          }
          for (auto& p : nets[r]->parameters()) got[r].push_back(p.detach().clone());
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(errors[r], "") << "stage " << stage;
      EXPECT_LE(max_difference(got[r], want), kParityTolerance) << "stage " << stage << " rank " << r;
    }
  }
  // Both a config optimizer and a client one: which did the user mean?
  auto net = make_parity_net(false);
  auto client = std::make_shared<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1));
  EXPECT_THROW(zerotrain::initialize(net.ptr(), config("", 0), {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0],
                                                               .optimizer = client}),
               zerotrain::ConfigError);
  // SGD is not ZeRO-tested: stage 1 needs zero_allow_untested_optimizer.
  EXPECT_THROW(zerotrain::initialize(net.ptr(), zerotrain::Config::from_string(R"({"train_batch_size": 4, "zero_optimization": {"stage": 1}})"),
                                     {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0], .optimizer = client}),
               zerotrain::ConfigError);
}

TEST(EngineApi, TheModelOutlivesItsEngine) {
  auto net = make_parity_net(false);
  {
    auto engine = zerotrain::initialize(net.ptr(), config("", 2), {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
    train_step(engine, net);
  }
  // Plain LibTorch backward afterwards: the engine's hooks are gone with it.
  net->forward(torch::ones({4, 8})).sum().backward();
  EXPECT_TRUE(net->fc1->weight.grad().defined());
}

TEST(EngineApi, LambRunsAtStageZero) {
  auto net = make_parity_net(false);
  auto c = zerotrain::Config::from_string(
      R"({"train_batch_size": 4, "optimizer": {"type": "Lamb", "params": {"lr": 0.01}}})");
  auto engine = zerotrain::initialize(net.ptr(), c, {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
  const auto before = net->fc1->weight.clone();
  train_step(engine, net);
  EXPECT_FALSE(torch::equal(before, net->fc1->weight));
  EXPECT_EQ(engine.global_steps(), 1);
}

}  // namespace
