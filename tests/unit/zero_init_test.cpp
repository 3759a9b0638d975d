// zerotrain::ZeroInit (DeepSpeed's zero.Init): a model built under it holds 1/N of its units'
// parameters from the moment each unit is built, trains to exactly the numbers of the same
// model built whole, and is never whole on any rank: each rank's CPU allocations are
// counted from before the model is built to after training steps.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/support/counting_allocator.h"
#include "tests/support/thread_ranks.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/stages/stage3/sharded.h"

namespace comm = zerotrain::comm;
using zerotrain::test::CpuBudget;
using zerotrain::test::run_ranks;

namespace {

// A Linear with values that depend on (seed, offset) only, not on LibTorch's generator,
// which the rank threads share.
torch::nn::Linear det_linear(int width, int seed, double offset) {
  torch::nn::Linear l(width, width);
  torch::NoGradGuard no_grad;
  // In place: a chain of temporaries would hold them all until the statement ends.
  auto w = torch::arange(l->weight.numel(), torch::kFloat);
  w.mul_(0.37 + seed).sin_().div_(std::sqrt(width)).add_(offset);
  l->weight.copy_(w.view_as(l->weight));
  l->bias.fill_(0.01 * seed + offset);
  return l;
}

// `depth` units of width x width, and a gain no unit holds. Rank r builds it with offset r:
// rank 0's values must be every rank's.
struct ZeroInitNetImpl : torch::nn::Module {
  ZeroInitNetImpl(int depth, int width, double offset) {
    for (int i = 0; i < depth; ++i) {
      blocks.push_back(register_module("block" + std::to_string(i),
                                       zerotrain::Sharded<torch::nn::Linear>(det_linear(width, i, offset))));
    }
    gain = register_parameter("gain", torch::full({width}, 1.0 + offset));
  }
  torch::Tensor forward(torch::Tensor h) {
    for (auto& b : blocks) h = torch::tanh(b(h));
    return h * gain;
  }
  std::vector<zerotrain::Sharded<torch::nn::Linear>> blocks;
  torch::Tensor gain;
};
TORCH_MODULE(ZeroInitNet);

struct Case {
  int world_size;
  int accumulation;
  std::string dtype;            // "fp32" or "bf16"
  std::string zero_extra;       // more zero_optimization keys
};

// Names the case in gtest's output instead of dumping the struct's bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << "world " << c.world_size << ", accumulation " << c.accumulation << ", " << c.dtype << c.zero_extra;
}

zerotrain::Config config_for(const Case& c, int stage = 3) {
  std::string json = R"({"train_batch_size": )" + std::to_string(4 * c.world_size * c.accumulation) +
                     R"(, "gradient_accumulation_steps": )" + std::to_string(c.accumulation) +
                     R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
                     "zero_optimization": {"stage": )" + std::to_string(stage) + c.zero_extra + "}";
  if (c.dtype == "bf16") json += R"(, "bf16": {"enabled": true})";
  return zerotrain::Config::from_string(json + "}");
}

torch::Tensor batch(int step, int rank, int micro, int width, int seed) {
  return torch::arange(4 * width, torch::kFloat).mul(0.11 * (step + 1) + 0.07 * rank + 0.05 * micro + seed).cos().view({4, width});
}

// Trains `steps` steps; returns rank r's gathered parameters and, through `peak`, the most
// bytes its thread held at once from before the model was built.
struct Peaks {
  int64_t built = 0;         // while the model is built
  int64_t initialized = 0;   // ... and the engine starts
  int64_t trained = 0;       // ... and trains
};

std::vector<torch::Tensor> train(const Case& c, bool zero_init, int depth, int width, int steps, int r,
                                 comm::Communicator& comm, Peaks* peak = nullptr) {
  auto budget = CpuBudget::enter();
  const zerotrain::Config config = config_for(c);
  ZeroInitNet net{nullptr};
  if (zero_init) {
    zerotrain::ZeroInit scope(config, comm);
    net = ZeroInitNet(depth, width, r);
  } else {
    net = ZeroInitNet(depth, width, r);
  }
  if (peak) peak->built = budget->peak_bytes();
  auto engine = zerotrain::initialize(net.ptr(), config, {.comm = comm});
  if (peak) peak->initialized = budget->peak_bytes();
  for (int s = 0; s < steps; ++s) {
    for (int k = 0; k < c.accumulation; ++k) {
      auto x = batch(s, r, k, width, 0).to(engine.model_dtype());
      auto y = batch(s, r, k, width, 1);
      engine.backward(torch::mse_loss(net->forward(x).to(torch::kFloat), y));
      engine.step();
    }
  }
  if (peak) peak->trained = budget->peak_bytes();
  std::vector<torch::Tensor> out;
  zerotrain::GatheredParameters full(engine);
  for (auto& p : net->parameters()) out.push_back(p.detach().to(torch::kFloat).clone());
  full.close();
  CpuBudget::leave();
  return out;
}

class ZeroInitParity : public ::testing::TestWithParam<Case> {};

// The same parameters after 6 steps as the model built whole (the engine broadcasts rank 0's
// values at start-up; ZeroInit broadcasts them as each unit is built).
TEST_P(ZeroInitParity, TrainsExactlyAsTheModelBuiltWhole) {
  const Case c = GetParam();
  std::vector<std::vector<torch::Tensor>> want(c.world_size), got(c.world_size);
  auto errors = run_ranks(c.world_size, [&](int r, comm::Communicator& comm) { want[r] = train(c, false, 3, 16, 6, r, comm); });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  errors = run_ranks(c.world_size, [&](int r, comm::Communicator& comm) { got[r] = train(c, true, 3, 16, 6, r, comm); });
  for (int r = 0; r < c.world_size; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(got[r].size(), want[0].size());
    for (size_t i = 0; i < got[r].size(); ++i) {
      EXPECT_TRUE(torch::equal(got[r][i], want[0][i])) << "rank " << r << " parameter " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, ZeroInitParity,
                         ::testing::Values(Case{1, 1, "fp32", R"(, "stage3_param_persistence_threshold": 0)"},
                                           Case{2, 2, "fp32", R"(, "stage3_param_persistence_threshold": 0)"},
                                           Case{4, 1, "fp32", ""},   // biases stay resident
                                           Case{2, 1, "bf16", R"(, "stage3_param_persistence_threshold": 0)"},
                                           Case{4, 2, "bf16", ""}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return "ws" + std::to_string(c.world_size) + "_gas" + std::to_string(c.accumulation) + "_" +
                                  c.dtype + (c.zero_extra.empty() ? "_resident" : "");
                         });

// 16 units of 128 x 128 over 8 ranks: the model is 1,057 KB in fp32, and each rank's share of
// the model states (4 master + 4 gradient + 8 Adam bytes per element) is half of that. Built
// whole, a rank holds the whole model before the engine even starts; under ZeroInit, with
// at most two units gathered at a time, no rank ever holds as much as the model.
TEST(ZeroInit, NoRankEverHoldsTheWholeModel) {
  const int ws = 8, depth = 16, width = 128;
  const int64_t unit_numel = width * width + width;
  const int64_t model_bytes = (depth * unit_numel + width) * 4;
  const Case c{ws, 1, "fp32",
               R"(, "stage3_param_persistence_threshold": 0, "stage3_max_live_parameters": )" +
                   std::to_string(2 * unit_numel) + R"(, "stage3_prefetch_bucket_size": )" + std::to_string(unit_numel)};
  for (bool zero_init : {true, false}) {
    std::vector<Peaks> peak(ws);
    const auto errors = run_ranks(ws, [&](int r, comm::Communicator& comm) {
      train(c, zero_init, depth, width, 2, r, comm, &peak[r]);
    });
    for (int r = 0; r < ws; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      if (zero_init) {
        // Built: this rank's chunks, and one unit whole (with the buffer its values are
        // made in, and the chunk being cut).
        EXPECT_LE(peak[r].built, model_bytes / ws + 3 * unit_numel * 4) << "rank " << r;
        EXPECT_LT(peak[r].trained, model_bytes) << "rank " << r;
      } else {   // the bound can fail: without ZeroInit it does
        EXPECT_GT(peak[r].built, model_bytes) << "rank " << r;
      }
      std::cout << (zero_init ? "ZeroInit" : "whole") << " rank " << r << ": peak bytes when built " << peak[r].built
                << ", initialized " << peak[r].initialized << ", trained " << peak[r].trained << "; the model is "
                << model_bytes << "\n";
    }
  }
}

// A frozen parameter is not trained, so not sharded: it comes back whole, rank 0's values.
TEST(ZeroInit, FrozenParametersComeBackWhole) {
  const Case c{2, 1, "fp32", ""};
  const auto errors = run_ranks(2, [&](int r, comm::Communicator& comm) {
    const zerotrain::Config config = config_for(c);
    ZeroInitNet net{nullptr};
    {
      zerotrain::ZeroInit scope(config, comm);
      net = ZeroInitNet(2, 8, r);
    }
    net->blocks[1]->inner->weight.set_requires_grad(false);
    auto engine = zerotrain::initialize(net.ptr(), config, {.comm = comm});
    const auto frozen = net->blocks[1]->inner->weight.detach();
    const auto want = det_linear(8, 1, 0)->weight.detach();
    if (!torch::equal(frozen, want)) throw std::runtime_error("the frozen weight is not rank 0's");
    engine.backward(net->forward(torch::ones({2, 8})).sum());
    engine.step();
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(ZeroInit, RefusesWhatCannotTakeIt) {
  const Case c{1, 1, "fp32", ""};
  auto world = comm::Communicator::make_thread_world(1);
  // ZeroInit cuts for stage 3 only.
  EXPECT_THROW(zerotrain::ZeroInit(config_for(c, 2), world[0]), zerotrain::ConfigError);
  auto build = [&](const zerotrain::Config& config, comm::Communicator comm) {
    zerotrain::ZeroInit scope(config, comm);
    return ZeroInitNet(1, 4, 0);
  };
  // Units cut by ZeroInit cannot run before initialize.
  auto net = build(config_for(c), world[0]);
  EXPECT_THROW(net->forward(torch::ones({1, 4})), zerotrain::UsageError);
  // ... nor be trained at a stage that keeps parameters whole, or in another dtype.
  EXPECT_THROW(zerotrain::initialize(net.ptr(), config_for(c, 2), {.comm = world[0]}), zerotrain::ConfigError);
  EXPECT_THROW(zerotrain::initialize(net.ptr(), config_for({1, 1, "bf16", ""}), {.comm = world[0]}),
               zerotrain::ConfigError);
  // ... nor by other ranks than it was cut for.
  const auto errors = run_ranks(2, [&](int r, comm::Communicator& comm) {
    auto cut = build(config_for({2, 1, "fp32", ""}), comm);
    auto alone = comm::Communicator::make_thread_world(1);
    try {
      zerotrain::initialize(cut.ptr(), config_for(c), {.comm = alone[0]});
    } catch (const zerotrain::ConfigError& e) {
      if (std::string(e.what()).find("zero_init.comm()") == std::string::npos) throw;
      return;
    }
    throw std::runtime_error("initialize took a model cut for other ranks");
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  // Unset, ZeroInit joins the job as initialize would (a world of one here), and initialize
  // takes that communicator from the model.
  ZeroInitNet plain{nullptr};
  {
    zerotrain::ZeroInit scope(config_for(c));
    plain = ZeroInitNet(1, 4, 0);
  }
  auto engine = zerotrain::initialize(plain.ptr(), config_for(c));
  EXPECT_EQ(engine.comm().world_size(), 1);
  EXPECT_TRUE(torch::isfinite(plain->forward(torch::ones({1, 4}))).all().item<bool>());
}

}  // namespace
