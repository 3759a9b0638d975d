// ZeRO stage 3: parameters sharded per unit, gathered for each unit's forward and backward
// and released after. The parity matrix against plain single-process LibTorch (and so
// against stages 0-2, which match it too), shared and reused parameters, frozen and unused
// ones, eval forward, a data-dependent branch, GatheredParameters, and the memory it holds.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <thread>

#include "tests/support/parity_train.h"
#include "tests/support/stage3_models.h"
#include "tests/support/thread_ranks.h"
#include "zerotrain/engine/engine.h"

namespace comm = zerotrain::comm;

namespace {

using namespace zerotrain::test;

// parity_config at stage 3, every parameter sharded (none small enough to stay resident).
zerotrain::Config stage3_config(const ParityCase& c, const std::string& extra = "") {
  std::string json = R"({"train_batch_size": 16, "gradient_accumulation_steps": )" + std::to_string(c.accumulation) +
                     ", " + parity_optimizer_keys(c) + R"(,
                     "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "overlap_comm": )" +
                     (c.overlap ? "true" : "false") + extra + "}";
  if (c.clip > 0) json += R"(, "gradient_clipping": )" + std::to_string(c.clip);
  if (c.dtype == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (c.dtype == "fp16") json += R"(, "fp16": {"enabled": true, "loss_scale": )" + std::to_string(kParityLossScale) + "}";
  return zerotrain::Config::from_string(json + "}");
}

std::vector<torch::Tensor> gathered_copy(zerotrain::Engine& engine, torch::nn::Module& net) {
  zerotrain::GatheredParameters full(engine);
  std::vector<torch::Tensor> out;
  for (auto& p : net.parameters()) out.push_back(p.detach().clone());
  full.close();
  return out;
}

std::string name_of(const ParityCase& c) {
  return "ws" + std::to_string(c.world_size) + "_gas" + std::to_string(c.accumulation) + (c.clip > 0 ? "_clip" : "") +
         (c.overlap ? "" : "_nooverlap") + (c.freeze ? "_frozen" : "") + (c.dtype == "fp32" ? "" : "_" + c.dtype) + (c.optimizer == "SGD" ? "_sgd" : "");
}

class Stage3Parity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(Stage3Parity, SameParametersAsSingleProcessTraining) {
  const ParityCase c = GetParam();
  const ParityData data = make_parity_data();
  const ParityRun want = parity_reference_run(c, data);
  std::vector<ShardedParityNet> nets;
  for (int r = 0; r < c.world_size; ++r) nets.push_back(make_sharded_parity_net(c.freeze));
  std::vector<ParityRun> got(c.world_size);
  const auto errors = run_ranks(c.world_size, [&](int r, comm::Communicator& comm) {
    auto engine = zerotrain::initialize(nets[r].ptr(), stage3_config(c), {.comm = comm});
    got[r].grad_norms = train_parity_steps(engine, nets[r], data, c, r);
    EXPECT_EQ(engine.global_steps(), kSteps);
    got[r].params = gathered_copy(engine, *nets[r]);
  });
  for (int r = 0; r < c.world_size; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_LE(max_difference(got[r].params, want.params), parity_tolerance(c)) << "rank " << r;
    EXPECT_EQ(grad_norm_mismatch(got[r].grad_norms, want.grad_norms, grad_norm_tolerance(c)), "") << "rank " << r;
  }
}

std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> cases;
  for (int ws : {1, 2, 4}) {
    for (int gas : {1, 2, 4}) cases.push_back({3, ws, gas});
  }
  cases.push_back({3, 2, 2, /*clip=*/0.05});
  cases.push_back({3, 2, 2, 0.0, /*overlap=*/false});
  cases.push_back({3, 4, 1, 0.0, true, /*freeze=*/true});
  for (const char* dtype : {"bf16", "fp16"}) {
    for (int ws : {1, 2, 4}) cases.push_back({3, ws, 1, 0.0, true, false, dtype});
    cases.push_back({3, 4, 2, 0.0, true, false, dtype});
    cases.push_back({3, 2, 2, 0.05, true, false, dtype});
  }
  // Plain SGD: a step proportional to the gradient, so a scale error moves the parameters.
  for (int ws : {2, 4}) cases.push_back({3, ws, 2, 0.0, true, false, "fp32", "SGD"});
  cases.push_back({3, 4, 2, 0.0, true, false, "bf16", "SGD"});
  cases.push_back({3, 2, 2, 0.0, true, false, "fp16", "SGD"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Stage3Parity, ::testing::ValuesIn(parity_cases()),
                         [](const auto& info) { return name_of(info.param); });

// SharingNet trained plainly (its Sharded wrappers pass through without an engine) and at
// stage 3 on 2 ranks must agree: tied weights, a unit run twice, a parameterless unit and a
// branch taken on odd steps only.
TEST(Stage3, SharedReusedParameterlessAndBranchingUnits) {
  constexpr int kWorld = 2, kStepsHere = 8;
  torch::manual_seed(11);
  const auto x = torch::randn({kStepsHere, 8, 8}), y = torch::randn({kStepsHere, 8, 8});
  auto make = [] {
    torch::manual_seed(5);
    return SharingNet();
  };
  SharingNet plain = make();
  std::vector<torch::Tensor> trainable;
  for (auto& p : plain->parameters()) trainable.push_back(p);   // the tied weight twice: dedupe
  std::vector<torch::Tensor> unique;
  for (auto& p : trainable) {
    bool dup = false;
    for (auto& q : unique) dup = dup || q.is_same(p);
    if (!dup) unique.push_back(p);
  }
  torch::optim::AdamW opt(unique, torch::optim::AdamWOptions(0.01).weight_decay(0.0));
  for (int s = 0; s < kStepsHere; ++s) {
    opt.zero_grad();
    torch::mse_loss(plain->forward(x[s], s % 2 == 1), y[s]).backward();
    // The engine steps an unused parameter with a zero gradient (as DeepSpeed's flat
    // buffers do); torch's AdamW would skip it.
    for (auto& p : unique) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    }
    opt.step();
  }
  std::vector<SharingNet> nets{make(), make()};
  std::vector<std::vector<torch::Tensor>> got(kWorld);
  const ParityCase c{3, kWorld, 1};
  const auto errors = run_ranks(kWorld, [&](int r, comm::Communicator& comm) {
    auto config = zerotrain::Config::from_string(
        R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.0}},
            "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}})");
    auto engine = zerotrain::initialize(nets[r].ptr(), config, {.comm = comm});
    for (int s = 0; s < kStepsHere; ++s) {
      auto rows = x[s].narrow(0, r * 4, 4), targets = y[s].narrow(0, r * 4, 4);
      engine.backward(torch::mse_loss(nets[r]->forward(rows, s % 2 == 1), targets));
      engine.step();
      // Outside a forward every unit is back to its shard.
      EXPECT_EQ(nets[r]->embed->inner->weight.storage().nbytes(), 0u) << "step " << s;
      EXPECT_EQ(nets[r]->block->inner->weight.storage().nbytes(), 0u) << "step " << s;
    }
    got[r] = gathered_copy(engine, *nets[r]);
  });
  std::vector<torch::Tensor> want;
  for (auto& p : plain->parameters()) want.push_back(p.detach().clone());
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_LE(max_difference(got[r], want), kParityTolerance) << "rank " << r;
  }
}

// An eval forward without gradients gathers and releases, arms nothing, and gives the
// outputs of the same weights run plainly.
TEST(Stage3, EvalForwardGathersWithoutArmingBackward) {
  const ParityCase c{3, 2, 1};
  std::vector<ShardedParityNet> nets{make_sharded_parity_net(false), make_sharded_parity_net(false)};
  ShardedParityNet plain = make_sharded_parity_net(false);
  torch::manual_seed(3);
  const auto x = torch::randn({4, 8});
  torch::Tensor want;
  {
    torch::NoGradGuard no_grad;
    want = plain->forward(x);
  }
  const auto errors = run_ranks(2, [&](int r, comm::Communicator& comm) {
    auto engine = zerotrain::initialize(nets[r].ptr(), stage3_config(c), {.comm = comm});
    engine.eval();
    torch::NoGradGuard no_grad;
    const auto out = nets[r]->forward(x);
    EXPECT_FALSE(out.requires_grad());
    EXPECT_LE((out - want).abs().max().item<double>(), 1e-6);
    EXPECT_EQ(nets[r]->fc1->inner->weight.storage().nbytes(), 0u);
    EXPECT_EQ(engine.model_state_bytes().gathered_peak, (16 * 8 + 16) * 4);   // the larger unit, fc1
  });
  for (int r = 0; r < 2; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
}

// GatheredParameters with a modifier: rank 0's writes become every rank's parameters and
// master weights, so the next steps train from them.
TEST(Stage3, GatheredParametersWithModifierRankScattersWrites) {
  const ParityCase c{3, 2, 1};
  std::vector<ShardedParityNet> nets{make_sharded_parity_net(false), make_sharded_parity_net(false)};
  const ParityData data = make_parity_data();
  std::vector<std::vector<torch::Tensor>> got(2), after_discard(2), after_step(2);
  const auto errors = run_ranks(2, [&](int r, comm::Communicator& comm) {
    auto engine = zerotrain::initialize(nets[r].ptr(), stage3_config(c), {.comm = comm});
    {
      zerotrain::GatheredParameters full(engine, {nets[r]->fc1->inner->weight}, /*modifier_rank=*/0);
      torch::NoGradGuard no_grad;
      if (r == 0) nets[r]->fc1->inner->weight.fill_(0.25);
    }
    got[r] = gathered_copy(engine, *nets[r]);
    // Without a modifier, writes are dropped when the scope ends (as in DeepSpeed).
    {
      zerotrain::GatheredParameters full(engine, {nets[r]->fc2->inner->bias});
      EXPECT_GT(nets[r]->fc2->inner->bias.storage().nbytes(), 0u);
      torch::NoGradGuard no_grad;
      if (r == 1) nets[r]->fc2->inner->bias.fill_(7);
    }
    EXPECT_EQ(nets[r]->fc2->inner->bias.storage().nbytes(), 0u);
    after_discard[r] = gathered_copy(engine, *nets[r]);
    engine.backward(torch::mse_loss(nets[r]->forward(rank_rows(data.x[0], c, r, 0)), rank_rows(data.y[0], c, r, 0)));
    engine.step();
    after_step[r] = gathered_copy(engine, *nets[r]);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_TRUE(torch::all(got[r][0] == 0.25).item<bool>()) << "rank " << r;
    // parameters(): fc1.weight, fc1.bias, fc2.weight, fc2.bias, ...
    EXPECT_FALSE(torch::any(after_discard[r][3] == 7).item<bool>()) << "rank " << r << ": a write without a modifier stayed";
    // The step starts from the written master weights: AdamW's first step moves each weight by
    // at most about lr (0.01), so every weight stays near 0.25; from the old master it would
    // land back at the random initial weights.
    EXPECT_LE((after_step[r][0] - 0.25).abs().max().item<double>(), 2 * kParityAdamLr) << "rank " << r;
    EXPECT_GT((after_step[r][0] - 0.25).abs().max().item<double>(), 0) << "rank " << r << ": the step did not move fc1";
  }
}

// The recorded order drives prefetch from the second step: the next unit is gathered while
// one computes, within stage3_prefetch_bucket_size and never past stage3_max_live_parameters
// (the unit needed now is always gathered), in forward and in backward; and a unit left
// stays gathered when its next use is within stage3_max_reuse_distance. Training gives the
// same parameters either way.
TEST(Stage3, PrefetchAndReuseFollowTheFirstStepWithinTheirBounds) {
  const ParityData data = make_parity_data();
  const ParityCase c{3, 2, 1};
  const auto want = parity_reference(c, data);
  // The events: forward fc1 (144 elements), fc2 (68); backward fc2, fc1. fc1's next use is
  // 136 elements away.
  const std::string no_reuse = R"(, "stage3_max_reuse_distance": 0)";
  for (const auto& [extra, peak_numel] : std::vector<std::pair<std::string, int64_t>>{
           // fc2 prefetched while fc1 computes; fc1 prefetched again as the backward turns.
           {no_reuse, 144 + 68},
           {no_reuse + R"(, "stage3_max_live_parameters": 150)", 144},
           {no_reuse + R"(, "stage3_prefetch_bucket_size": 50)", 144},
           {no_reuse + R"(, "stage3_prefetch_bucket_size": 0)", 144},
           // Reuse: fc1 stays for its backward, within 137 elements but not 136.
           {R"(, "stage3_prefetch_bucket_size": 0, "stage3_max_reuse_distance": 137)", 144 + 68},
           {R"(, "stage3_prefetch_bucket_size": 0, "stage3_max_reuse_distance": 136)", 144},
           // ... and only while the gathered parameters stay within max live.
           {R"(, "stage3_prefetch_bucket_size": 0, "stage3_max_live_parameters": 100)", 144},
           {"", 144 + 68}}) {
    std::vector<ShardedParityNet> nets{make_sharded_parity_net(false), make_sharded_parity_net(false)};
    std::vector<std::vector<torch::Tensor>> got(2);
    std::vector<int64_t> peak(2);
    const auto errors = run_ranks(2, [&](int r, comm::Communicator& comm) {
      auto engine = zerotrain::initialize(nets[r].ptr(), stage3_config(c, extra), {.comm = comm});
      for (int s = 0; s < kSteps; ++s) {
        engine.backward(torch::mse_loss(nets[r]->forward(rank_rows(data.x[s], c, r, 0)), rank_rows(data.y[s], c, r, 0)));
        engine.step();
      }
      peak[r] = engine.model_state_bytes().gathered_peak;
      got[r] = gathered_copy(engine, *nets[r]);
    });
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r << extra;
      EXPECT_EQ(peak[r], peak_numel * 4) << extra;
      EXPECT_LE(max_difference(got[r], want), kParityTolerance) << extra;
    }
  }
}

// When the engine goes, the units it left sharded refuse to run (or to be given to another
// engine) with a message, instead of reading memory that is not there.
TEST(Stage3, UnitsLeftShardedByAGoneEngineRefuseToRun) {
  const ParityCase c{3, 2, 1};
  std::vector<ShardedParityNet> nets{make_sharded_parity_net(false), make_sharded_parity_net(false)};
  const auto errors = run_ranks(2, [&](int r, comm::Communicator& comm) {
    { auto engine = zerotrain::initialize(nets[r].ptr(), stage3_config(c), {.comm = comm}); }
    EXPECT_THROW(nets[r]->forward(torch::ones({2, 8})), zerotrain::UsageError);
    // A unit without parameters of its own still runs.
    zerotrain::Sharded<torch::nn::Tanh> act(torch::nn::Tanh{});
    auto holder = std::make_shared<torch::nn::Module>();
    holder->register_module("act", act);
    holder->register_module("fc", zerotrain::Sharded<torch::nn::Linear>(torch::nn::Linear(2, 2)));
    { auto engine = zerotrain::initialize(holder, stage3_config(c), {.comm = comm}); }
    EXPECT_TRUE(torch::equal(act(torch::zeros({1, 2})), torch::zeros({1, 2})));
    EXPECT_THROW(zerotrain::initialize(nets[r].ptr(), stage3_config(c), {.comm = comm}), zerotrain::UsageError);
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Keeping fc1 for its backward saves its second all-gather of every step. (The prefetch
// window stops at fc2: a prefetch that passes over a gathered unit's next use keeps it too,
// as in DeepSpeed.)
TEST(Stage3, ReuseSavesTheSecondGather) {
  const ParityData data = make_parity_data();
  const ParityCase c{3, 2, 1};
  std::vector<int64_t> per_step;
  for (const std::string reuse : {"0", "1000"}) {
    const std::string extra = R"(, "stage3_prefetch_bucket_size": 68, "stage3_max_reuse_distance": )" + reuse;
    std::vector<ShardedParityNet> nets{make_sharded_parity_net(false), make_sharded_parity_net(false)};
    std::vector<int64_t> issued(2);
    const auto errors = run_ranks(2, [&](int r, comm::Communicator& comm) {
      auto engine = zerotrain::initialize(nets[r].ptr(), stage3_config(c, extra), {.comm = comm});
      for (int s = 0; s < 3; ++s) {
        const int64_t before = comm.issued();
        engine.backward(torch::mse_loss(nets[r]->forward(rank_rows(data.x[s], c, r, 0)), rank_rows(data.y[s], c, r, 0)));
        engine.step();
        issued[r] = comm.issued() - before;   // the last step's, which follows the trace
      }
    });
    for (int r = 0; r < 2; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(issued[0], issued[1]);
    per_step.push_back(issued[0]);
  }
  EXPECT_EQ(per_step[0] - per_step[1], 1) << per_step[0] << " and " << per_step[1];
}

// Model states per rank: the shards only, (4 master + 4 gradients + 8 Adam) bytes per
// element in fp32, where the master is the parameter shard; no parameter bytes.
TEST(Stage3, ModelStatesAreShards) {
  for (int ws : {2, 4}) {
    const ParityCase c{3, ws, 1};
    std::vector<ShardedParityNet> nets;
    for (int r = 0; r < ws; ++r) nets.push_back(make_sharded_parity_net(false));
    const ParityData data = make_parity_data();
    std::vector<zerotrain::ModelStateBytes> bytes(ws);
    const auto errors = run_ranks(ws, [&](int r, comm::Communicator& comm) {
      auto engine = zerotrain::initialize(nets[r].ptr(), stage3_config(c), {.comm = comm});
      for (int s = 0; s < 2; ++s) {   // the second step prefetches
        engine.backward(torch::mse_loss(nets[r]->forward(rank_rows(data.x[s], c, r, 0)), rank_rows(data.y[s], c, r, 0)));
        engine.step();
      }
      bytes[r] = engine.model_state_bytes();
    });
    // Units fc1 (144), fc2 (68), unused (6): each split over the ranks.
    int64_t total_shard = 0;
    for (int r = 0; r < ws; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      EXPECT_EQ(bytes[r].params, 0);
      EXPECT_EQ(bytes[r].master, bytes[r].grads);
      EXPECT_EQ(bytes[r].optimizer, 2 * bytes[r].master);
      total_shard += bytes[r].master / 4;
      // fc1, with fc2 prefetched while it computes.
      EXPECT_EQ(bytes[r].gathered_peak, (144 + 68) * 4) << "world " << ws;
    }
    EXPECT_EQ(total_shard, 144 + 68 + 6) << "world " << ws;
  }
}

}  // namespace
