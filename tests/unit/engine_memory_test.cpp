// model_state_bytes against ZeRO's formulas for fp32 training with Adam (Ψ parameters,
// N ranks): stage 0 holds 4Ψ params + 4Ψ grads + 8Ψ moments; stage 1 shards the moments
// and keeps an fp32 master shard (8Ψ/N + 4Ψ/N) plus the reduced gradient shard (4Ψ/N);
// stage 2 also drops the full gradients (4Ψ/N only), plus at most one bucket of staging
// per bucket in flight.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "zerotrain/engine/engine.h"

namespace {

struct Model : torch::nn::Module {
  Model() {
    a = register_module("a", torch::nn::Linear(33, 17));   // 578 parameters
    b = register_module("b", torch::nn::Linear(17, 5));    // 90
  }
  torch::Tensor forward(const torch::Tensor& x) { return b(torch::relu(a(x))); }
  torch::nn::Linear a{nullptr}, b{nullptr};
};
constexpr int64_t kParams = 33 * 17 + 17 + 17 * 5 + 5;
constexpr int64_t kBucketNumel = 200;

class EngineMemory : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(EngineMemory, MatchesTheZeroFormulas) {
  const auto [stage, ws] = GetParam();
  auto world = zerotrain::comm::Communicator::make_thread_world(ws);
  std::vector<std::shared_ptr<Model>> models;
  for (int r = 0; r < ws; ++r) models.push_back(std::make_shared<Model>());
  std::vector<zerotrain::ModelStateBytes> bytes(ws);
  std::vector<std::thread> threads;
  for (int r = 0; r < ws; ++r) {
    threads.emplace_back([&, r, stage = stage, ws = ws] {
      auto config = zerotrain::Config::from_string(
          R"({"train_batch_size": )" + std::to_string(2 * ws) + R"(, "optimizer": {"type": "Adam", "params": {}},
              "zero_optimization": {"stage": )" + std::to_string(stage) + R"(, "reduce_bucket_size": )" +
          std::to_string(kBucketNumel) + "}}");
      auto engine = zerotrain::initialize(models[r], config, {.comm = world[r]});
      engine.backward(models[r]->forward(torch::ones({2, 33})).sum());
      engine.step();
      bytes[r] = engine.model_state_bytes();
    });
  }
  for (auto& t : threads) t.join();
  int64_t shard_total = 0;
  for (int r = 0; r < ws; ++r) {
    const auto& b = bytes[r];
    EXPECT_EQ(b.params, 4 * kParams) << "rank " << r;
    if (stage == 0) {
      // Nothing is sharded: every rank holds the gradients and moments of all kParams, and
      // fp32 parameters are stepped in place, with no master copy.
      EXPECT_EQ(b.grads, 4 * kParams) << "rank " << r;
      EXPECT_EQ(b.optimizer, 8 * kParams) << "rank " << r;
      EXPECT_EQ(b.master, 0) << "rank " << r;
      continue;
    }
    const int64_t shard = b.master / 4;
    shard_total += shard;
    // Each bucket's chunk is at most ceil(bucket / N): the shard is about Ψ/N.
    EXPECT_LE(shard, kParams / ws + 4) << "rank " << r;
    EXPECT_EQ(b.optimizer, 8 * shard);
    EXPECT_EQ(b.grads, (stage == 1 ? 4 * kParams : 0) + 4 * shard);
    if (stage == 2) {
      EXPECT_GT(b.buffers, 0);
      EXPECT_LE(b.buffers, 4 * (33 * 17));   // the largest bucket (a parameter above the cap)
    }
  }
  // The shards of the sharding stages partition the model: together, every parameter once.
  if (stage > 0) {
    EXPECT_EQ(shard_total, kParams);
  }
}

INSTANTIATE_TEST_SUITE_P(StagesAndWorlds, EngineMemory,
                         ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return "stage" + std::to_string(std::get<0>(info.param)) + "_ws" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
