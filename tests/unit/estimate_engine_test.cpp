// zerotrain estimate's model states against the engine's own count: the same bytes, per
// rank, at every implemented stage and precision, with buckets small enough that several
// are in flight.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "tests/support/parity_model.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/estimate/detailed.h"
#include "zerotrain/models/models.h"

namespace {

using namespace zerotrain::test;
namespace ze = zerotrain::estimate;

struct Case {
  int stage;
  ze::Precision precision;
  bool overlap;
};

class EstimateMatchesEngine : public ::testing::TestWithParam<Case> {};

TEST_P(EstimateMatchesEngine, ModelStateBytesPerRank) {
  const Case c = GetParam();
  constexpr int kWorld = 2;
  const char* block = c.precision == ze::Precision::kBf16   ? R"(, "bf16": {"enabled": true})"
                      : c.precision == ze::Precision::kFp16 ? R"(, "fp16": {"enabled": true, "initial_scale_power": 8})"
                                                            : "";
  const auto config = zerotrain::Config::from_string(
      R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
          "zero_optimization": {"stage": )" + std::to_string(c.stage) + R"(, "reduce_bucket_size": 40, "overlap_comm": )" +
      (c.overlap ? "true" : "false") + "}" + block + "}");
  std::vector<ParityNet> nets;
  for (int r = 0; r < kWorld; ++r) {
    nets.push_back(make_parity_net(false));
    // An unused parameter holds back the first bucket's reduction until the end of
    // backward, and every stage-2 bucket waits with it: the estimate assumes every
    // parameter takes part, so freeze it.
    for (auto& p : nets.back()->unused->parameters()) p.set_requires_grad(false);
  }
  ze::Setup setup;
  setup.world_size = kWorld;
  setup.stage = c.stage;
  setup.precision = c.precision;
  setup.reduce_bucket_size = 40;
  setup.overlap_comm = c.overlap;
  const ze::ModelShape shape = zerotrain::models::shape_of(*nets[0], "parity net");
  const int64_t predicted = ze::estimate(shape, setup).model_states();
  auto world = zerotrain::comm::Communicator::make_thread_world(kWorld);
  std::vector<int64_t> measured(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      auto engine = zerotrain::initialize(nets[r].ptr(), config, {.comm = world[r]});
      for (int step = 0; step < 2; ++step) {
        auto x = torch::ones({4, 8}).to(engine.model_dtype());
        engine.backward(nets[r]->forward(x).to(torch::kFloat).pow(2).mean());
        engine.step();
      }
      measured[r] = engine.model_state_bytes().total();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(predicted, std::max(measured[0], measured[1])) << "rank 0 " << measured[0] << ", rank 1 " << measured[1];
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int stage : {0, 1, 2}) {
    for (auto p : {ze::Precision::kFp32, ze::Precision::kBf16, ze::Precision::kFp16}) {
      for (bool overlap : {false, true}) all.push_back({stage, p, overlap});
    }
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(StagesAndPrecisions, EstimateMatchesEngine, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return "stage" + std::to_string(info.param.stage) + "_" + ze::to_string(info.param.precision) +
                                  (info.param.overlap ? "_overlap" : "");
                         });

}  // namespace
