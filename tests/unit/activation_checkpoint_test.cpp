// Activation checkpointing (zerotrain/activation/checkpoint.h): a checkpointed segment gives
// the same outputs and gradients as the plain one, bit for bit in fp32; dropout draws the
// same mask in the recomputation and leaves the caller's random stream where it would be;
// the gpt trains to the same losses with the engine at every ZeRO stage; the config block;
// and the memory the gpt keeps, against the estimator.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "tests/support/counting_allocator.h"
#include "tests/support/thread_ranks.h"
#include "zerotrain/activation/checkpoint.h"
#include "zerotrain/config/config.h"
#include "zerotrain/data/synthetic.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/estimate/detailed.h"
#include "zerotrain/models/models.h"

namespace {

namespace za = zerotrain::activation;
using zerotrain::test::run_ranks;

// Two inputs, two outputs, a parameter on each path.
struct PairNetImpl : torch::nn::Module {
  PairNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 6));
  }
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& in) {
    auto h = torch::gelu(fc1(in[0])) * in[1].sum(-1, true);
    if (dropout > 0) h = torch::dropout(h, dropout, /*train=*/true);
    return {torch::tanh(fc2(h)), h.pow(2).mean(-1)};
  }
  double dropout = 0;
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(PairNet);

struct Result {
  std::vector<torch::Tensor> outputs, grads;   // grads: the inputs', then the parameters'
};

// One forward and backward of `net` on fixed inputs, plainly or through `checkpointer`.
Result run_pair(PairNet& net, const za::Checkpointer* checkpointer) {
  torch::manual_seed(7);
  auto a = torch::randn({5, 6}).requires_grad_(true);
  auto b = torch::randn({5, 3}).requires_grad_(true);
  for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
  za::SegmentFn fn = [net](const std::vector<at::Tensor>& in) mutable { return net->forward(in); };
  auto outs = checkpointer ? (*checkpointer)(fn, {a, b}) : fn({a, b});
  (outs[0].sum() + 3 * outs[1].sum()).backward();
  Result r{outs, {a.grad(), b.grad()}};
  for (const auto& p : net->parameters()) r.grads.push_back(p.grad());
  return r;
}

void expect_bitwise_equal(const std::vector<torch::Tensor>& want, const std::vector<torch::Tensor>& got,
                          const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(want[i].defined()) << what << " " << i;
    ASSERT_TRUE(got[i].defined()) << what << " " << i;
    EXPECT_TRUE(torch::equal(want[i], got[i])) << what << " " << i << " differs by "
                                               << (want[i] - got[i]).abs().max().item<double>();
  }
}

TEST(Checkpoint, SameOutputsAndGradientsAsWithout) {
  PairNet net;
  const Result want = run_pair(net, nullptr);
  for (const za::CheckpointOptions& options :
       {za::CheckpointOptions{}, za::CheckpointOptions{.cpu_checkpointing = true},
        za::CheckpointOptions{.contiguous_memory_optimization = true, .number_checkpoints = 2},
        za::CheckpointOptions{.synchronize_checkpoint_boundary = true, .profile = true}}) {
    za::Checkpointer checkpointer(options);
    const Result got = run_pair(net, &checkpointer);
    expect_bitwise_equal(want.outputs, got.outputs, "output");
    expect_bitwise_equal(want.grads, got.grads, "gradient");
  }
}

// The recomputation must draw the forward's mask, and the caller's generator must end where
// a run without recomputation leaves it.
TEST(Checkpoint, DropoutDrawsTheSameMaskAndLeavesTheCallersStream) {
  PairNet net;
  net->dropout = 0.5;
  auto plain = run_pair(net, nullptr);
  const auto next_plain = torch::rand({8});
  za::Checkpointer checkpointer;
  auto got = run_pair(net, &checkpointer);
  const auto next_got = torch::rand({8});
  expect_bitwise_equal(plain.outputs, got.outputs, "output");
  expect_bitwise_equal(plain.grads, got.grads, "gradient");
  EXPECT_TRUE(torch::equal(next_plain, next_got)) << "the random stream after backward moved";
  // And the mask really is random: another seed gives another output.
  torch::manual_seed(8);
  auto a = torch::randn({5, 6}), b = torch::randn({5, 3});
  EXPECT_FALSE(torch::equal(net->forward({a, b})[1], plain.outputs[1]));
}

TEST(Checkpoint, InputsWithoutGradGetNoneAndTheOthersTheirs) {
  auto weight = torch::randn({10, 4}).requires_grad_(true);
  auto scale = torch::randn({4}).requires_grad_(true);
  const auto tokens = torch::tensor({1, 4, 9, 2}, torch::kLong);
  za::SegmentFn fn = [weight](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{torch::embedding(weight, in[0]) * in[1]};
  };
  fn({tokens, scale})[0].sum().backward();
  const auto want_weight = weight.grad().clone(), want_scale = scale.grad().clone();
  weight.mutable_grad() = torch::Tensor();
  scale.mutable_grad() = torch::Tensor();
  za::checkpoint(fn, {tokens, scale})[0].sum().backward();
  EXPECT_TRUE(torch::equal(weight.grad(), want_weight));
  EXPECT_TRUE(torch::equal(scale.grad(), want_scale));
  EXPECT_FALSE(tokens.grad().defined());
}

TEST(Checkpoint, UnderNoGradItJustRuns) {
  PairNet net;
  auto x = torch::randn({2, 6}).requires_grad_(true);
  za::TensorFn fn = [net](const at::Tensor& in) mutable { return net->forward({in, torch::ones({2, 1})})[0]; };
  torch::NoGradGuard no_grad;
  const auto y = za::checkpoint(fn, x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(torch::equal(y, fn(x)));
}

// With no input requiring grad, use_reentrant=True would leave the parameters without
// gradients; here the segment runs plainly and they get theirs.
TEST(Checkpoint, ParametersGetGradientsWhenNoInputRequiresGrad) {
  PairNet net;
  const auto x = torch::randn({2, 6});
  za::TensorFn fn = [net](const at::Tensor& in) mutable { return net->forward({in, torch::ones({2, 1})})[0]; };
  fn(x).sum().backward();
  const auto want = net->fc1->weight.grad().clone();
  net->fc1->weight.mutable_grad() = torch::Tensor();
  za::checkpoint(fn, x).sum().backward();
  ASSERT_TRUE(net->fc1->weight.grad().defined());
  EXPECT_TRUE(torch::equal(net->fc1->weight.grad(), want));
}

TEST(Checkpoint, ProfileCountsEachSegmentsForwardAndRecomputation) {
  PairNet net;
  za::Checkpointer checkpointer({.profile = true});
  auto x = torch::randn({3, 6}).requires_grad_(true);
  za::TensorFn fn = [net](const at::Tensor& in) mutable { return net->forward({in, torch::ones({3, 1})})[0]; };
  auto y = checkpointer(fn, checkpointer(fn, x));
  const za::CheckpointProfile after_forward = checkpointer.profile();
  EXPECT_EQ(after_forward.forwards, 2);
  EXPECT_EQ(after_forward.recomputes, 0);
  // Two segments ran, so time was taken on a steady clock; nothing was recomputed yet, so
  // no recomputation time may have been booked.
  EXPECT_GT(after_forward.forward_s, 0.0);
  EXPECT_EQ(after_forward.recompute_s, 0.0);
  y.sum().backward();
  const za::CheckpointProfile p = checkpointer.profile();
  EXPECT_EQ(p.forwards, 2);
  EXPECT_EQ(p.recomputes, 2);
  // Backward recomputes both segments and books that time apart from the forward's.
  EXPECT_GT(p.recompute_s, 0.0);
  EXPECT_EQ(p.forward_s, after_forward.forward_s);
  EXPECT_EQ(za::Checkpointer().profile().forwards, 0);
}

// The saved inputs of number_checkpoints segments share one buffer: its memory goes when
// the last of them has run its backward, and the gradients do not change.
TEST(Checkpoint, ContiguousBufferHoldsTheSegmentsOfAForwardPass) {
  EXPECT_THROW(za::Checkpointer({.contiguous_memory_optimization = true}), zerotrain::ConfigError);
  auto w = torch::randn({64, 64}).requires_grad_(true);
  za::TensorFn fn = [w](const at::Tensor& in) { return torch::tanh(torch::matmul(in, w)); };
  auto run = [&](const za::CheckpointOptions& options) {
    za::Checkpointer checkpointer(options);
    auto x = torch::randn({32, 64}).requires_grad_(true);
    torch::Tensor h = x;
    for (int i = 0; i < 4; ++i) h = checkpointer(fn, h);
    w.mutable_grad() = torch::Tensor();
    h.sum().backward();
    return std::vector<torch::Tensor>{h.detach(), x.grad(), w.grad()};
  };
  torch::manual_seed(3);
  const auto want = run({});
  torch::manual_seed(3);
  const auto got = run({.contiguous_memory_optimization = true, .number_checkpoints = 4});
  expect_bitwise_equal(want, got, "contiguous");
}

TEST(Checkpoint, GptSameLossAndGradients) {
  const zerotrain::data::SyntheticDataset data("gpt", 128, 32, 5);
  const auto batch = data.batch(0, 4);
  std::vector<std::vector<torch::Tensor>> grads;
  std::vector<torch::Tensor> losses;
  for (bool on : {false, true}) {
    torch::manual_seed(11);
    auto model = zerotrain::models::make_model("gpt", "preset=tiny");
    if (on) model->enable_gradient_checkpointing({});
    auto loss = model->loss(batch.inputs, batch.targets);
    loss.backward();
    losses.push_back(loss.detach());
    grads.emplace_back();
    for (const auto& p : model->module()->parameters()) grads.back().push_back(p.grad());
  }
  EXPECT_TRUE(torch::equal(losses[0], losses[1])) << losses[0].item<float>() << " vs " << losses[1].item<float>();
  expect_bitwise_equal(grads[0], grads[1], "gpt gradient");
}

TEST(Checkpoint, OtherModelsRefuseGradientCheckpointing) {
  auto mlp = zerotrain::models::make_model("mlp", "");
  try {
    mlp->enable_gradient_checkpointing({});
    FAIL() << "the mlp accepted --gradient_checkpointing";
  } catch (const zerotrain::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--gradient_checkpointing"), std::string::npos) << e.what();
  }
}

// The gpt trained by the engine, 2 ranks as threads, checkpointing on and off: the same
// losses, bit for bit (each parameter's gradient is computed by the same operations in the
// same order; only when the recomputation happens differs). At stage 3 the recomputed
// units' forwards during backward are events of the recorded order like any other, so the
// order stays valid: every step after the first issues the same collectives.
class CheckpointEngine : public ::testing::TestWithParam<int> {};

TEST_P(CheckpointEngine, GptSameLossesWithAndWithout) {
  const int stage = GetParam();
  constexpr int kWorld = 2, kSteps = 4, kMicro = 4;
  const auto config = zerotrain::Config::from_string(
      R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
          "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
          "activation_checkpointing": {"number_checkpoints": 2},
          "zero_optimization": {"stage": )" + std::to_string(stage) +
      R"(, "reduce_bucket_size": 5000, "stage3_param_persistence_threshold": 0}})");
  const zerotrain::data::SyntheticDataset data("gpt", 128, 32, 9);
  std::vector<std::vector<std::vector<double>>> losses(2, std::vector<std::vector<double>>(kWorld));
  std::vector<std::vector<std::vector<int64_t>>> issued(2, std::vector<std::vector<int64_t>>(kWorld));
  for (bool on : {false, true}) {
    std::vector<std::unique_ptr<zerotrain::models::Model>> models;
    for (int r = 0; r < kWorld; ++r) {
      torch::manual_seed(21);
      models.push_back(zerotrain::models::make_model("gpt", "preset=tiny"));
      if (on) models.back()->enable_gradient_checkpointing(za::options_from_config(config.activation_checkpointing));
    }
    const auto errors = run_ranks(kWorld, [&](int r, zerotrain::comm::Communicator& comm) {
      auto engine = zerotrain::initialize(models[r]->module(), config, {.comm = comm});
      for (int s = 0; s < kSteps; ++s) {
        const auto batch = data.batch((s * kWorld + r) * kMicro, kMicro);
        const int64_t before = comm.issued();
        auto loss = models[r]->loss(batch.inputs, batch.targets);
        engine.backward(loss);
        engine.step();
        losses[on][r].push_back(loss.item<double>());
        issued[on][r].push_back(comm.issued() - before);
      }
    });
    for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[r], "") << "rank " << r << (on ? " (checkpointing)" : "");
  }
  for (int r = 0; r < kWorld; ++r) {
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_EQ(losses[0][r][s], losses[1][r][s]) << "rank " << r << " step " << s;
    }
    for (int s = 2; s < kSteps; ++s) EXPECT_EQ(issued[1][r][s], issued[1][r][1]) << "rank " << r << " step " << s;
    // Stage 3 gathers each block again for its recomputation (the forward without a graph
    // releases it on leaving): one all-gather more per block and step.
    if (stage == 3) {
      EXPECT_EQ(issued[1][r][kSteps - 1], issued[0][r][kSteps - 1] + 2) << "rank " << r;
    }
  }
  EXPECT_LT(losses[1][0][kSteps - 1], losses[1][0][0]);   // it trains
}

INSTANTIATE_TEST_SUITE_P(Stages, CheckpointEngine, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

TEST(CheckpointConfig, TheBlockParsesAndMapsKeyByKey) {
  auto c = zerotrain::Config::from_string(R"({"train_batch_size": 8, "activation_checkpointing": {
      "partition_activations": false, "cpu_checkpointing": true, "contiguous_memory_optimization": true,
      "number_checkpoints": 12, "synchronize_checkpoint_boundary": true, "profile": true}})");
  EXPECT_TRUE(c.diagnostics.items().empty());
  const za::CheckpointOptions o = za::options_from_config(c.activation_checkpointing);
  EXPECT_TRUE(o.cpu_checkpointing);
  EXPECT_TRUE(o.contiguous_memory_optimization);
  EXPECT_EQ(o.number_checkpoints, 12);
  EXPECT_TRUE(o.synchronize_checkpoint_boundary);
  EXPECT_TRUE(o.profile);
  const za::CheckpointOptions d = za::options_from_config(zerotrain::Config::from_string(
      R"({"train_batch_size": 8, "activation_checkpointing": {"number_checkpoints": null}})").activation_checkpointing);
  EXPECT_FALSE(d.cpu_checkpointing || d.contiguous_memory_optimization || d.synchronize_checkpoint_boundary ||
               d.profile);
  EXPECT_FALSE(d.number_checkpoints.has_value());
}

TEST(CheckpointConfig, PartitionActivationsIsRefusedNamingModelParallelism) {
  const auto c = zerotrain::config::load_config(zerotrain::config::parse_json_text(R"({"train_batch_size": 8,
      "activation_checkpointing": {"partition_activations": true}})"));
  std::string unsupported;
  for (const auto& d : c.diagnostics.items()) {
    if (d.severity == zerotrain::config::Severity::kNotSupported) unsupported += d.to_string();
  }
  EXPECT_NE(unsupported.find("activation_checkpointing.partition_activations"), std::string::npos) << unsupported;
  EXPECT_NE(unsupported.find("model parallelism"), std::string::npos) << unsupported;
  zerotrain::config::ActivationCheckpointingConfig block;
  block.partition_activations = true;
  EXPECT_THROW(za::options_from_config(block), zerotrain::ConfigError);
}

// What the gpt keeps for backward, counted by the allocator, against the estimator's two
// rows (zerotrain/estimate/detailed.cpp activation_bytes). Without checkpointing, what
// autograd keeps is all there once the forward is done. With it, the forward keeps each
// block's input (and the top's activations), and backward adds one recomputed block at a
// time: the estimate's row is that high-water mark. The measured peak also holds what
// backward itself allocates on top (the recomputed block's activation gradients, a
// parameter's gradient before it is added in), which the estimator books separately as
// the backward transient: 15% leaves room for it at this size (it is about 4% here).
TEST(CheckpointMemory, GptActivationsMatchTheEstimator) {
  constexpr int64_t kBatch = 8;
  const zerotrain::data::SyntheticDataset data("gpt", 1024, 128, 3);
  const auto batch = data.batch(0, kBatch);
  struct Measured {
    int64_t after_forward = 0, peak = 0, estimate = 0;
  };
  std::vector<Measured> m;
  for (bool on : {false, true}) {
    torch::manual_seed(1);
    auto model = zerotrain::models::make_model("gpt", "preset=small");
    if (on) model->enable_gradient_checkpointing({});
    model->loss(batch.inputs, batch.targets).backward();   // the parameters' gradients exist from now on
    Measured r;
    {
      auto budget = zerotrain::test::CpuBudget::enter();
      auto loss = model->loss(batch.inputs, batch.targets);
      r.after_forward = budget->live_bytes();
      loss.backward();
      r.peak = budget->peak_bytes();
      zerotrain::test::CpuBudget::leave();
    }
    zerotrain::estimate::Setup setup;
    setup.micro_batch = kBatch;
    setup.activation_checkpointing = on;
    r.estimate = zerotrain::estimate::activation_bytes(zerotrain::models::shape_of(*model), setup);
    RecordProperty(on ? "checkpointed" : "plain", std::to_string(r.after_forward) + " after forward, " +
                                                     std::to_string(r.peak) + " peak, " + std::to_string(r.estimate) +
                                                     " estimated");
    m.push_back(r);
  }
  const Measured& off = m[0];
  const Measured& on = m[1];
  EXPECT_NEAR(off.after_forward, off.estimate, 0.10 * off.estimate);
  EXPECT_NEAR(on.peak, on.estimate, 0.15 * on.estimate);
  EXPECT_LT(on.after_forward, on.estimate);      // the recomputed block comes in backward only
  EXPECT_LT(3 * on.after_forward, off.after_forward);   // the saving: 8x at 4 layers of this size
  EXPECT_LT(2 * on.peak, off.peak);
}

}  // namespace
