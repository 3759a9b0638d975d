// bf16 and fp16 beyond parity: overflow on one rank skips the step on all of them, the
// overflow watch stops hopeless runs with a diagnosis, DeepSpeed's scaler defaults, the
// dtypes the engine picks and the bytes it holds. Ranks are threads on the in-process backend.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <thread>
#include <tuple>

#include "tests/support/parity_model.h"
#include "tests/support/thread_ranks.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/engine.h"

namespace {

using namespace zerotrain::test;
namespace comm = zerotrain::comm;

zerotrain::Config config(int stage, const std::string& extra) {
  return zerotrain::Config::from_string(
      R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.0}},
          "zero_optimization": {"stage": )" + std::to_string(stage) + R"(, "reduce_bucket_size": 50})" + extra + "}");
}

std::vector<ParityNet> make_nets(int n) {
  std::vector<ParityNet> nets;
  for (int r = 0; r < n; ++r) nets.push_back(make_parity_net(false));   // seeded one at a time
  return nets;
}

void train_step(zerotrain::Engine& engine, ParityNet& net, int rank) {
  auto x = torch::full({4, 8}, 0.1 * (rank + 1)).to(engine.model_dtype());
  engine.backward(net->forward(x).to(torch::kFloat).pow(2).mean());
  engine.step();
}

// While *when returns true, the hook replaces the gradient with inf.
void poison_gradient(torch::Tensor& param, const std::function<bool()>& when) {
  param.register_hook([when](const torch::Tensor& grad) {
    return when() ? torch::full_like(grad, std::numeric_limits<float>::infinity()) : grad;
  });
}

std::vector<torch::Tensor> snapshot(ParityNet& net) {
  std::vector<torch::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

bool bit_identical(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

class OverflowOnOneRank : public ::testing::TestWithParam<int> {};

TEST_P(OverflowOnOneRank, SkipsTheStepOnEveryRank) {
  const int stage = GetParam();
  const auto cfg = config(stage, R"(, "fp16": {"enabled": true, "initial_scale_power": 10, "hysteresis": 1},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.01, "warmup_num_steps": 10}})");
  auto nets = make_nets(2);
  const auto errors = run_ranks(2, [&](int r, comm::Communicator c) {
    auto engine = zerotrain::initialize(nets[r].ptr(), cfg, {.comm = c});
    int step = 0;
    // fc2.bias sits wholly in rank 0's shard at stages 1 and 2 (buckets of 50 elements,
    // filled from the last parameter: unused.bias, unused.weight and fc2.bias make one of
    // 10, and rank 0 owns its first 5). So rank 1 sees no inf in its own shard and skips
    // only because the ranks agree.
    if (r == 1) poison_gradient(nets[r]->fc2->bias, [&] { return step == 3; });
    for (; step < 3; ++step) train_step(engine, nets[r], r);
    const auto before = snapshot(nets[r]);
    const auto lr_before = engine.get_lr();
    EXPECT_EQ(engine.loss_scale(), 1024);
    train_step(engine, nets[r], r);   // step 3: rank 1's fc2.weight gradient is inf
    EXPECT_TRUE(bit_identical(snapshot(nets[r]), before)) << "rank " << r << " changed its parameters";
    EXPECT_EQ(engine.skipped_steps(), 1);
    EXPECT_EQ(engine.global_steps(), 4);   // DeepSpeed counts skipped steps too
    EXPECT_EQ(engine.loss_scale(), 512);
    EXPECT_EQ(engine.get_lr(), lr_before) << "the schedule stepped on a skipped step";
    ++step;
    train_step(engine, nets[r], r);        // the next step trains again, from clean gradients
    EXPECT_FALSE(bit_identical(snapshot(nets[r]), before));
    EXPECT_NE(engine.get_lr(), lr_before);
    EXPECT_EQ(engine.skipped_steps(), 1);
    EXPECT_TRUE(std::isfinite(engine.get_global_grad_norm().value_or(NAN)));
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_TRUE(bit_identical(snapshot(nets[0]), snapshot(nets[1]))) << "the ranks' parameters diverged";
}

INSTANTIATE_TEST_SUITE_P(Stages, OverflowOnOneRank, ::testing::Values(0, 1, 2),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

TEST(LossScale, GradientsAreUnscaledByTheScaleTheyCarry) {
  // With SGD the update is the gradient itself: a dynamic scale that doubles every step must
  // give the static scale's parameters. (DeepSpeed divides by the doubled scale on those steps.)
  for (int stage : {0, 2}) {
    auto run = [&](const std::string& fp16) {
      auto net = make_parity_net(false);
      auto engine = zerotrain::initialize(
          net.ptr(),
          zerotrain::Config::from_string(R"({"train_batch_size": 4, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_allow_untested_optimizer": true,
              "zero_optimization": {"stage": )" + std::to_string(stage) + R"(}, "fp16": )" + fp16 + "}"),
          {.comm = comm::Communicator::make_thread_world(1)[0]});
      std::vector<double> norms;
      for (int s = 0; s < 5; ++s) {
        train_step(engine, net, 0);
        norms.push_back(*engine.get_global_grad_norm());
      }
      return std::pair(snapshot(net), norms);
    };
    const auto [doubling, doubling_norms] =
        run(R"({"enabled": true, "initial_scale_power": 4, "loss_scale_window": 1, "hysteresis": 1})");
    const auto [fixed, fixed_norms] = run(R"({"enabled": true, "loss_scale": 16})");
    EXPECT_LE(max_difference(doubling, fixed), 1e-3) << "stage " << stage;
    for (size_t i = 0; i < fixed_norms.size(); ++i) {
      EXPECT_NEAR(doubling_norms[i], fixed_norms[i], 1e-3 * fixed_norms[i]) << "stage " << stage << ", step " << i;
    }
  }
}

TEST(OverflowWatch, ConsecutiveSkipsStopTrainingWithADiagnosis) {
  const auto cfg = config(2, R"(, "fp16": {"enabled": true, "initial_scale_power": 8, "hysteresis": 1,
                                          "max_consecutive_skipped_steps": 3})");
  auto nets = make_nets(2);
  std::vector<int> steps_done(2, 0);
  const auto errors = run_ranks(2, [&](int r, comm::Communicator c) {
    auto engine = zerotrain::initialize(nets[r].ptr(), cfg, {.comm = c});
    if (r == 1) poison_gradient(nets[r]->fc1->weight, [] { return true; });
    for (int step = 0; step < 10; ++step, ++steps_done[r]) train_step(engine, nets[r], r);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(steps_done[r], 2) << "rank " << r << " should stop on its third step";
    for (const char* part : {"[fp16] stopping: 3 steps in a row were skipped", "fc1.weight: step 0; 3",
                             "Recent steps", "256 -> 128; OVERFLOW", "bf16", "initial_scale_power (now 8)"}) {
      EXPECT_NE(errors[r].find(part), std::string::npos) << "rank " << r << " lacks '" << part << "':\n" << errors[r];
    }
    EXPECT_EQ(errors[r].find("fc2.weight"), std::string::npos) << "only fc1.weight overflowed:\n" << errors[r];
  }
}

// fp32 and bf16 have no loss scale to lower: a NaN gradient on one rank stops training on
// every rank, before the update, with a diagnosis (before, every weight became NaN and the
// run went on to exit 0).
class NonFiniteGradients : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

TEST_P(NonFiniteGradients, StopEveryRankBeforeTheUpdate) {
  const auto [stage, precision] = GetParam();
  const auto cfg = config(stage, std::string(precision) == "bf16" ? R"(, "bf16": {"enabled": true})" : "");
  auto nets = make_nets(2);
  std::vector<std::vector<torch::Tensor>> before(2);
  std::vector<int> steps_done(2, 0);
  const auto errors = run_ranks(2, [&](int r, comm::Communicator c) {
    auto engine = zerotrain::initialize(nets[r].ptr(), cfg, {.comm = c});
    int step = 0;
    if (r == 1) {
      nets[r]->fc2->bias.register_hook([&step](const torch::Tensor& grad) {
        return step == 2 ? torch::full_like(grad, std::numeric_limits<float>::quiet_NaN()) : grad;
      });
    }
    for (; step < 5; ++step) {
      if (step == 2) before[r] = snapshot(nets[r]);
      train_step(engine, nets[r], r);
      ++steps_done[r];
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(steps_done[r], 2) << "rank " << r << " should stop on its third step";
    for (const char* part : {"[numerics] step 3: the gradients are not finite (norm nan)", precision,
                             "The weights were not updated", "fc2.bias", "a learning rate too high (now 0.01)"}) {
      EXPECT_NE(errors[r].find(part), std::string::npos) << "rank " << r << " lacks '" << part << "':\n" << errors[r];
    }
    EXPECT_TRUE(bit_identical(snapshot(nets[r]), before[r])) << "rank " << r << " updated its weights";
  }
}

INSTANTIATE_TEST_SUITE_P(StagesAndPrecisions, NonFiniteGradients,
                         ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Values("fp32", "bf16")),
                         [](const auto& info) {
                           return "stage" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

TEST(OverflowWatch, DeepSpeedsMinimumScaleErrorCarriesTheDiagnosis) {
  // Stage 1: the ZeRO scaler raises at the minimum (stage 0's does not; the watch stops that).
  const auto cfg = config(1, R"(, "fp16": {"enabled": true, "initial_scale_power": 1, "hysteresis": 1})");
  auto net = make_parity_net(false);
  auto engine = zerotrain::initialize(net.ptr(), cfg, {.comm = comm::Communicator::make_thread_world(1)[0]});
  poison_gradient(net->fc2->bias, [] { return true; });
  train_step(engine, net, 0);   // 2 -> 1
  EXPECT_EQ(engine.loss_scale(), 1);
  try {
    train_step(engine, net, 0);
    FAIL() << "an overflow at the minimum scale must stop training";
  } catch (const zerotrain::NumericsError& e) {
    const std::string text = e.what();
    for (const char* part : {"already at minimum", "fc2.bias: step 0; 2", "2 step(s) skipped"}) {
      EXPECT_NE(text.find(part), std::string::npos) << "lacks '" << part << "':\n" << text;
    }
    EXPECT_EQ(e.exit_code(), 9);
  }
}

TEST(OverflowWatch, StageZeroAtItsMinimumScaleIsStoppedByTheWatch) {
  // DeepSpeed's FP16_Optimizer skips forever at the minimum ("Attempted loss scale: 1,
  // reducing to 1"); the watch stops it a window and two steps after the scale got there.
  const auto cfg = config(0, R"(, "fp16": {"enabled": true, "initial_scale_power": 1, "loss_scale_window": 4,
                                          "max_consecutive_skipped_steps": 0})");
  auto net = make_parity_net(false);
  auto engine = zerotrain::initialize(net.ptr(), cfg, {.comm = comm::Communicator::make_thread_world(1)[0]});
  poison_gradient(net->fc2->bias, [] { return true; });
  int step = 0;
  try {
    for (; step < 50; ++step) train_step(engine, net, 0);
    FAIL() << "stage 0 skipped on at the minimum scale";
  } catch (const zerotrain::NumericsError& e) {
    EXPECT_EQ(step, 5) << e.what();   // 2 -> 1 at step 0, then at the floor for 6 steps
    EXPECT_NE(std::string(e.what()).find("has been at its minimum"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.loss_scale(), 1);
}

TEST(OverflowWatch, AScaleStuckAtItsMinimumStopsTraining) {
  // With hysteresis 2 restored after every good step, DeepSpeed skips every other step at
  // the minimum scale forever; the watch stops after max_steps_at_min_scale steps.
  const auto cfg = config(1, R"(, "fp16": {"enabled": true, "initial_scale_power": 0, "hysteresis": 2,
      "consecutive_hysteresis": true, "max_steps_at_min_scale": 6})");
  auto net = make_parity_net(false);
  auto engine = zerotrain::initialize(net.ptr(), cfg, {.comm = comm::Communicator::make_thread_world(1)[0]});
  int step = 0;
  poison_gradient(net->fc1->bias, [&] { return step % 2 == 0; });
  try {
    for (; step < 20; ++step) train_step(engine, net, 0);
    FAIL() << "training went on at the minimum scale";
  } catch (const zerotrain::NumericsError& e) {
    EXPECT_EQ(step, 5);
    EXPECT_NE(std::string(e.what()).find("has been at its minimum (fp16.min_loss_scale 1) for 6 steps"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.skipped_steps(), 3);
}

TEST(LossScale, AnFp16BlockWithoutScalerKeysStartsAt2To16AsDeepSpeed019) {
  auto world = comm::Communicator::make_thread_world(1);
  for (int stage : {0, 1, 2, 3}) {
    auto net = make_parity_net(false);
    auto plain = zerotrain::initialize(net.ptr(), config(stage, R"(, "fp16": {"enabled": true})"), {.comm = world[0]});
    EXPECT_EQ(plain.loss_scale(), 65536) << "stage " << stage;
  }
  auto net2 = make_parity_net(false);
  auto keyed = zerotrain::initialize(net2.ptr(), config(2, R"(, "fp16": {"enabled": true, "initial_scale_power": 8})"),
                                     {.comm = world[0]});
  EXPECT_EQ(keyed.loss_scale(), 256);
  auto net3 = make_parity_net(false);
  auto fixed = zerotrain::initialize(net3.ptr(), config(2, R"(, "fp16": {"enabled": true, "loss_scale": 128})"),
                                     {.comm = world[0]});
  EXPECT_EQ(fixed.loss_scale(), 128);
  auto net4 = make_parity_net(false);
  auto bf16 = zerotrain::initialize(net4.ptr(), config(2, R"(, "bf16": {"enabled": true})"), {.comm = world[0]});
  EXPECT_EQ(bf16.loss_scale(), 1);
}

TEST(Precision, DtypesFollowDeepSpeedsDefaultsAndTheConfig) {
  auto world = comm::Communicator::make_thread_world(1);
  struct Want {
    int stage;
    std::string extra;
    torch::ScalarType model, comm, accum;
  };
  const std::vector<Want> cases{
      {2, R"(, "bf16": {"enabled": true})", torch::kBFloat16, torch::kBFloat16, torch::kBFloat16},
      {0, R"(, "bf16": {"enabled": true})", torch::kBFloat16, torch::kBFloat16, torch::kFloat},   // BF16_Optimizer
      {1, R"(, "fp16": {"enabled": true, "initial_scale_power": 8})", torch::kHalf, torch::kHalf, torch::kHalf},
      {2, R"(, "bf16": {"enabled": true}, "communication_data_type": "fp32", "data_types": {"grad_accum_dtype": "fp32"})",
       torch::kBFloat16, torch::kFloat, torch::kFloat},
      {1, R"(, "communication_data_type": "bf16")", torch::kFloat, torch::kBFloat16, torch::kFloat},
  };
  for (const auto& w : cases) {
    auto net = make_parity_net(false);
    auto engine = zerotrain::initialize(net.ptr(), config(w.stage, w.extra), {.comm = world[0]});
    EXPECT_EQ(engine.model_dtype(), w.model) << w.extra;
    EXPECT_EQ(engine.communication_data_type(), w.comm) << w.extra;
    EXPECT_EQ(engine.grad_accum_dtype(), w.accum) << w.extra;
    for (auto& p : net->parameters()) EXPECT_EQ(p.scalar_type(), w.model) << w.extra;
    train_step(engine, net, 0);   // every combination trains
    EXPECT_EQ(engine.skipped_steps(), 0) << w.extra;
  }
}

TEST(Precision, Bf16Stage2HoldsHalfTheParameterAndGradientBytes) {
  constexpr int64_t kParams = 218;   // the parity net, `unused` included
  std::vector<zerotrain::ModelStateBytes> bytes(2);
  auto nets = make_nets(2);
  const auto errors = run_ranks(2, [&](int r, comm::Communicator c) {
    auto engine = zerotrain::initialize(nets[r].ptr(), config(2, R"(, "bf16": {"enabled": true})"), {.comm = c});
    train_step(engine, nets[r], r);
    bytes[r] = engine.model_state_bytes();
  });
  for (int r = 0; r < 2; ++r) ASSERT_EQ(errors[r], "");
  for (int r = 0; r < 2; ++r) EXPECT_EQ(bytes[r].params, 2 * kParams) << "rank " << r;
  EXPECT_EQ(bytes[0].grads + bytes[1].grads, 2 * kParams);        // bf16 gradient shards
  EXPECT_EQ(bytes[0].master + bytes[1].master, 4 * kParams);      // fp32 master shards
  EXPECT_EQ(bytes[0].optimizer + bytes[1].optimizer, 8 * kParams);   // Adam's two fp32 moments
}

TEST(Precision, AHalfPrecisionModelNeedsTheMatchingBlock) {
  auto net = make_parity_net(false);
  net->to(torch::kBFloat16);
  try {
    zerotrain::initialize(net.ptr(), config(0, ""), {.comm = comm::Communicator::make_thread_world(1)[0]});
    FAIL() << "a bf16 model under an fp32 config must be refused";
  } catch (const zerotrain::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fc1.weight is BFloat16 but the config trains in Float"), std::string::npos)
        << e.what();
  }
}

TEST(Precision, AutoCastCastsFloatingInputsToFp16) {
  auto world = comm::Communicator::make_thread_world(1);
  auto net = make_parity_net(false);
  auto on = zerotrain::initialize(net.ptr(), config(0, R"(, "fp16": {"enabled": true, "auto_cast": true})"),
                                  {.comm = world[0]});
  EXPECT_EQ(on.cast_inputs(torch::ones({2, 8})).scalar_type(), torch::kHalf);
  EXPECT_EQ(on.cast_inputs(torch::ones({2}, torch::kLong)).scalar_type(), torch::kLong);
  auto net2 = make_parity_net(false);
  auto off = zerotrain::initialize(net2.ptr(), config(0, R"(, "fp16": {"enabled": true})"), {.comm = world[0]});
  EXPECT_EQ(off.cast_inputs(torch::ones({2, 8})).scalar_type(), torch::kFloat);
}

}  // namespace
