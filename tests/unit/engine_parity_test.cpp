// The engine's backbone: ZeRO stages 0, 1 and 2 at world sizes 1, 2 and 4 (ranks are
// threads on the in-process backend) with accumulation 1, 2 and 4 train a model to the
// same parameters as plain single-process LibTorch training on the whole batch, with the
// same global gradient norm at every step; in bf16 and fp16, those of mixed-precision
// training done by hand. AdamW, and plain SGD, whose step shows a gradient's scale.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "tests/support/parity_train.h"
#include "zerotrain/engine/engine.h"

namespace comm = zerotrain::comm;

namespace {

using namespace zerotrain::test;
using Case = ParityCase;

std::string name_of(const Case& c) {
  return "stage" + std::to_string(c.stage) + "_ws" + std::to_string(c.world_size) + "_gas" +
         std::to_string(c.accumulation) + (c.clip > 0 ? "_clip" : "") + (c.overlap ? "" : "_nooverlap") +
         (c.freeze ? "_frozen" : "") + (c.dtype == "fp32" ? "" : "_" + c.dtype) + (c.optimizer == "SGD" ? "_sgd" : "");
}


class EngineParity : public ::testing::TestWithParam<Case> {};

TEST_P(EngineParity, SameParametersAsSingleProcessTraining) {
  const Case c = GetParam();
  const ParityData data = make_parity_data();
  const ParityRun want = parity_reference_run(c, data);
  auto world = comm::Communicator::make_thread_world(c.world_size);
  std::vector<ParityNet> nets;
  for (int r = 0; r < c.world_size; ++r) nets.push_back(make_parity_net(c.freeze));   // one thread seeds at a time
  std::vector<ParityRun> got(c.world_size);
  std::vector<std::string> errors(c.world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto engine = zerotrain::initialize(nets[r].ptr(), parity_config(c), {.comm = world[r]});
        got[r].grad_norms = train_parity_steps(engine, nets[r], data, c, r);
        EXPECT_EQ(engine.global_steps(), kSteps);
        EXPECT_EQ(engine.global_samples(), kSteps * kGlobalBatch);
        for (auto& p : nets[r]->parameters()) got[r].params.push_back(p.detach().clone());
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < c.world_size; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_LE(max_difference(got[r].params, want.params), parity_tolerance(c)) << "rank " << r;
    EXPECT_EQ(grad_norm_mismatch(got[r].grad_norms, want.grad_norms, grad_norm_tolerance(c)), "") << "rank " << r;
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
    for (const char* dtype : {"bf16", "fp16"}) {
      for (int ws : {1, 2, 4}) cases.push_back({stage, ws, 1, 0.0, true, false, dtype});
      cases.push_back({stage, 4, 2, 0.0, true, false, dtype});
      cases.push_back({stage, 2, 2, 0.05, true, false, dtype});
    }
    // Plain SGD: a step proportional to the gradient, so a scale error moves the parameters.
    for (int ws : {2, 4}) cases.push_back({stage, ws, 2, 0.0, true, false, "fp32", "SGD"});
    cases.push_back({stage, 4, 2, 0.0, true, false, "bf16", "SGD"});
    cases.push_back({stage, 2, 2, 0.0, true, false, "fp16", "SGD"});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Matrix, EngineParity, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return name_of(info.param); });

}  // namespace
