// ZeroInit with a ChunkSource (stages/stage3/preshard.h), as a pretrained model's loader
// uses it: each rank's chunks come from the source, no broadcast, the parameters keep their
// shape in the training dtype without memory, and the engine places the chunks so that the
// gathered parameters are the source's values.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/thread_ranks.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/stages/stage3/preshard.h"
#include "zerotrain/stages/stage3/sharded.h"
#include "zerotrain/stages/stage3/zero_init.h"

namespace {

namespace comm = zerotrain::comm;
namespace s3 = zerotrain::stages::stage3;

zerotrain::Config bf16_stage3() {
  return zerotrain::Config::from_string(R"({"train_batch_size": 2, "optimizer": {"type": "Adam", "params": {"lr": 0.01}},
    "zero_optimization": {"stage": 3}, "bf16": {"enabled": true}})");
}

TEST(ChunkSource, EachRankReadsItsChunkAndTheEngineGathersTheSourceValues) {
  const zerotrain::Config config = bf16_stage3();
  std::vector<std::vector<std::pair<int64_t, int64_t>>> calls(2);
  const auto errors = zerotrain::test::run_ranks(2, [&](int r, comm::Communicator& comm) {
    zerotrain::Sharded<torch::nn::Linear> unit{nullptr};
    {
      zerotrain::ZeroInit zero_init(config, comm);
      // The source's values: element i of a parameter of n elements is i / n (+ 1 for the
      // bias), what a file would hold; the module's own random values must not survive.
      s3::ChunkSourceScope source([&](const at::Tensor& param, int64_t offset, int64_t numel, at::Tensor& chunk) {
        calls[r].emplace_back(offset, numel);
        EXPECT_EQ(chunk.scalar_type(), at::kBFloat16);
        EXPECT_EQ(chunk.numel(), numel);
        const double base = param.dim() == 1 ? 1.0 : 0.0;
        chunk.copy_(torch::arange(offset, offset + numel, torch::kFloat).div(param.numel()).add(base));
      });
      unit = zerotrain::Sharded<torch::nn::Linear>(torch::nn::Linear(5, 3));
    }
    // Cut: the shapes kept, the training dtype, no memory.
    for (const auto& p : unit->parameters()) {
      EXPECT_EQ(p.scalar_type(), at::kBFloat16);
      EXPECT_EQ(p.storage().nbytes(), 0u);
    }
    EXPECT_EQ(unit->parameters()[0].sizes(), (std::vector<int64_t>{3, 5}));
    auto engine = zerotrain::initialize(unit.ptr(), config, {.comm = comm});
    zerotrain::GatheredParameters full(engine);
    const auto w = unit->inner->weight.detach().to(torch::kFloat);
    const auto b = unit->inner->bias.detach().to(torch::kFloat);
    EXPECT_TRUE(torch::equal(w, torch::arange(15, torch::kFloat).div(15).to(torch::kBFloat16).to(torch::kFloat).view({3, 5})));
    EXPECT_TRUE(torch::equal(b, torch::arange(3, torch::kFloat).div(3).add(1).to(torch::kBFloat16).to(torch::kFloat)));
    full.close();
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  // Each rank was asked for its own range of each parameter (weight, then bias).
  for (int r = 0; r < 2; ++r) {
    const auto w = comm::chunk_range(15, 2, r), b = comm::chunk_range(3, 2, r);
    ASSERT_EQ(calls[r].size(), 2u);
    EXPECT_EQ(calls[r][0], std::make_pair(w.offset, w.numel));
    EXPECT_EQ(calls[r][1], std::make_pair(b.offset, b.numel));
  }
}

TEST(ChunkSource, WithoutZeroInitTheSourceIsNotAsked) {
  bool asked = false;
  s3::ChunkSourceScope source([&](const at::Tensor&, int64_t, int64_t, at::Tensor&) { asked = true; });
  zerotrain::Sharded<torch::nn::Linear> unit(torch::nn::Linear(4, 4));
  EXPECT_FALSE(asked);
  EXPECT_GT(unit->inner->weight.storage().nbytes(), 0u);
}

}  // namespace
