// zerotrain estimate's model states against the engine's own count: the same bytes, per
// rank, at every stage and precision, with buckets small enough that several are in
// flight, and with offload to host memory and to disk (its swap files' bytes too).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "tests/support/parity_model.h"
#include "tests/support/stage3_models.h"
#include "tests/support/thread_ranks.h"
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

void PrintTo(const Case& c, std::ostream* os) {
  *os << "stage " << c.stage << ", " << ze::to_string(c.precision) << (c.overlap ? ", overlap_comm" : "");
}

// The config's precision block for `precision` ("" for fp32).
const char* precision_block(ze::Precision precision) {
  switch (precision) {
    case ze::Precision::kBf16: return R"(, "bf16": {"enabled": true})";
    case ze::Precision::kFp16: return R"(, "fp16": {"enabled": true, "initial_scale_power": 8})";
    case ze::Precision::kFp32: break;
  }
  return "";
}

// Each net trained six steps by an engine of its own rank (threads), enough for the stage-2/3
// staging pool to settle (stages/plan.h); each rank's model state bytes.
template <class Net>
std::vector<zerotrain::ModelStateBytes> train_steps(std::vector<Net>& nets, const zerotrain::Config& config) {
  std::vector<zerotrain::ModelStateBytes> measured(nets.size());
  const auto errors = run_ranks(static_cast<int>(nets.size()), [&](int r, zerotrain::comm::Communicator& comm) {
    auto engine = zerotrain::initialize(nets[r].ptr(), config, {.comm = comm});
    for (int step = 0; step < 6; ++step) {
      auto x = torch::ones({4, 8}).to(engine.model_dtype());
      engine.backward(nets[r]->forward(x).to(torch::kFloat).pow(2).mean());
      engine.step();
    }
    measured[r] = engine.model_state_bytes();
  });
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return measured;
}

class EstimateMatchesEngine : public ::testing::TestWithParam<Case> {};

TEST_P(EstimateMatchesEngine, ModelStateBytesPerRank) {
  const Case c = GetParam();
  constexpr int kWorld = 2;
  const char* block = precision_block(c.precision);
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
  const auto measured = train_steps(nets, config);
  EXPECT_EQ(predicted, std::max(measured[0].total(), measured[1].total()))
      << "rank 0 " << measured[0].total() << ", rank 1 " << measured[1].total();
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

// Stage 3 on the parity net with each Linear a unit, nothing resident: the estimate lays the
// units out as the engine does (stages/unit_plan.h), and its gathered unit is the engine's
// measured peak of gathered parameters.
class EstimateMatchesEngineStage3 : public ::testing::TestWithParam<Case> {};

TEST_P(EstimateMatchesEngineStage3, ModelStateBytesAndGatheredPerRank) {
  const Case c = GetParam();
  constexpr int kWorld = 2;
  const char* block = precision_block(c.precision);
  const auto config = zerotrain::Config::from_string(
      R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
          "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "overlap_comm": )" +
      std::string(c.overlap ? "true" : "false") + "}" + block + "}");
  std::vector<ShardedParityNet> nets;
  for (int r = 0; r < kWorld; ++r) {
    nets.push_back(make_sharded_parity_net(false));
    for (auto& p : nets.back()->unused->parameters()) p.set_requires_grad(false);
  }
  ze::Setup setup;
  setup.world_size = kWorld;
  setup.stage = 3;
  setup.precision = c.precision;
  setup.overlap_comm = c.overlap;
  setup.param_persistence_threshold = 0;
  const ze::ModelShape shape = zerotrain::models::shape_of(*nets[0], "sharded parity net");
  const ze::Breakdown predicted = ze::estimate(shape, setup);
  const auto measured = train_steps(nets, config);
  EXPECT_EQ(predicted.model_states(), std::max(measured[0].total(), measured[1].total()))
      << "rank 0 " << measured[0].total() << ", rank 1 " << measured[1].total();
  EXPECT_EQ(predicted.gathered, measured[0].gathered_peak);
}

std::vector<Case> stage3_cases() {
  std::vector<Case> all;
  for (auto p : {ze::Precision::kFp32, ze::Precision::kBf16, ze::Precision::kFp16}) {
    for (bool overlap : {false, true}) all.push_back({3, p, overlap});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Precisions, EstimateMatchesEngineStage3, ::testing::ValuesIn(stage3_cases()),
                         [](const auto& info) {
                           return std::string(ze::to_string(info.param.precision)) +
                                  (info.param.overlap ? "_overlap" : "");
                         });

// Offload: optimizer states in host memory or on disk at stages 1-3, the parameter shard
// on disk at stage 3, in fp32 and bf16. Sub-groups of 40 elements, so that each rank's
// shard streams through several; the swap files go to a folder on the disk the test runs
// from (O_DIRECT refuses tmpfs).
struct OffloadCase {
  int stage;
  ze::Precision precision;
  ze::Offload optimizer;
  ze::Offload param = ze::Offload::kNone;
  bool pipeline = true;   // pipeline_read and pipeline_write
};

void PrintTo(const OffloadCase& c, std::ostream* os) {
  *os << "stage " << c.stage << ", " << ze::to_string(c.precision) << ", optimizer to " << ze::to_string(c.optimizer)
      << ", parameters to " << ze::to_string(c.param) << (c.pipeline ? "" : ", no pipeline");
}

std::string name_of(const OffloadCase& c) {
  return "stage" + std::to_string(c.stage) + "_" + ze::to_string(c.precision) + "_optimizer_" +
         ze::to_string(c.optimizer) + (c.param == ze::Offload::kNone ? "" : std::string("_params_") + ze::to_string(c.param)) +
         (c.pipeline ? "" : "_sync");
}

// A folder of the test's own under the working directory (made now: nvme_path must exist),
// removed when it ends.
struct ScratchDir {
  explicit ScratchDir(const std::string& name)
      : path(std::filesystem::current_path() / ("zt_estimate_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path path;
};

std::string offload_block(const char* key, ze::Offload device, const std::string& nvme_path, bool pipeline) {
  if (device == ze::Offload::kNone) return "";
  std::string block = std::string(", \"") + key + R"(": {"device": ")" + ze::to_string(device) + "\"";
  if (device == ze::Offload::kNvme) block += R"(, "nvme_path": ")" + nvme_path + "\"";
  if (device == ze::Offload::kNvme && std::string(key) == "offload_optimizer") {
    block += std::string(R"(, "pipeline_read": )") + (pipeline ? "true" : "false") + R"(, "pipeline_write": )" +
             (pipeline ? "true" : "false");
  }
  return block + "}";
}

class EstimateMatchesEngineOffload : public ::testing::TestWithParam<OffloadCase> {};

TEST_P(EstimateMatchesEngineOffload, ModelStateAndDiskBytesPerRank) {
  const OffloadCase c = GetParam();
  constexpr int kWorld = 2;
  const ScratchDir dir(name_of(c));
  const std::string zero =
      R"({"stage": )" + std::to_string(c.stage) + R"(, "reduce_bucket_size": 40, "overlap_comm": true, "sub_group_size": 40)" +
      (c.stage == 3 ? R"(, "stage3_param_persistence_threshold": 0)" : "") +
      offload_block("offload_optimizer", c.optimizer, dir.path.string(), c.pipeline) +
      offload_block("offload_param", c.param, dir.path.string(), c.pipeline) + "}";
  const auto config = zerotrain::Config::from_string(
      R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "zero_optimization": )" + zero +
      precision_block(c.precision) + "}");
  ze::Setup setup;
  setup.world_size = kWorld;
  setup.stage = c.stage;
  setup.precision = c.precision;
  setup.reduce_bucket_size = 40;
  setup.overlap_comm = true;
  setup.offload_optimizer = c.optimizer;
  setup.offload_param = c.param;
  setup.sub_group_size = 40;
  setup.pipeline_read = setup.pipeline_write = c.pipeline;
  setup.param_persistence_threshold = 0;
  std::vector<zerotrain::ModelStateBytes> measured;
  ze::Breakdown predicted;
  if (c.stage == 3) {
    std::vector<ShardedParityNet> nets;
    for (int r = 0; r < kWorld; ++r) {
      nets.push_back(make_sharded_parity_net(false));
      for (auto& p : nets.back()->unused->parameters()) p.set_requires_grad(false);
    }
    predicted = ze::estimate(zerotrain::models::shape_of(*nets[0], "sharded parity net"), setup);
    measured = train_steps(nets, config);
    EXPECT_EQ(predicted.gathered, measured[0].gathered_peak);
  } else {
    std::vector<ParityNet> nets;
    for (int r = 0; r < kWorld; ++r) {
      nets.push_back(make_parity_net(false));
      for (auto& p : nets.back()->unused->parameters()) p.set_requires_grad(false);
    }
    predicted = ze::estimate(zerotrain::models::shape_of(*nets[0], "parity net"), setup);
    measured = train_steps(nets, config);
  }
  ASSERT_EQ(measured.size(), 2u);
  const auto& m0 = measured[0];
  const auto& m1 = measured[1];
  EXPECT_EQ(predicted.model_states(), std::max(m0.total(), m1.total()))
      << "predicted params " << predicted.params << ", grads " << predicted.grads << ", master " << predicted.master
      << ", optimizer " << predicted.optimizer << ", buffers " << predicted.buffers << "; rank 0 measured params "
      << m0.params << ", grads " << m0.grads << ", master " << m0.master << ", optimizer " << m0.optimizer
      << ", buffers " << m0.buffers;
  EXPECT_EQ(predicted.disk, std::max(m0.disk, m1.disk)) << "rank 0 " << m0.disk << ", rank 1 " << m1.disk;
  EXPECT_EQ(predicted.disk > 0, c.optimizer == ze::Offload::kNvme || c.param == ze::Offload::kNvme);
}

std::vector<OffloadCase> offload_cases() {
  std::vector<OffloadCase> all;
  for (int stage : {1, 2, 3}) {
    for (auto p : {ze::Precision::kFp32, ze::Precision::kBf16}) {
      for (auto optimizer : {ze::Offload::kCpu, ze::Offload::kNvme}) all.push_back({stage, p, optimizer});
    }
  }
  for (auto p : {ze::Precision::kFp32, ze::Precision::kBf16}) {
    for (auto optimizer : {ze::Offload::kNone, ze::Offload::kCpu, ze::Offload::kNvme}) {
      all.push_back({3, p, optimizer, ze::Offload::kNvme});
    }
  }
  all.push_back({2, ze::Precision::kBf16, ze::Offload::kNvme, ze::Offload::kNone, false});   // one buffer set
  return all;
}

INSTANTIATE_TEST_SUITE_P(Devices, EstimateMatchesEngineOffload, ::testing::ValuesIn(offload_cases()),
                         [](const auto& info) { return name_of(info.param); });

}  // namespace

namespace {

// The built-in models counted from their fields equal the modules counted tensor by tensor.
TEST(ModelShape, FieldsGiveTheModulesCounts) {
  for (const auto& [name, config] : std::vector<std::pair<std::string, std::string>>{
           {"gpt", "preset=tiny"}, {"gpt", "preset=small,n_layer=3,vocab_size=300"}, {"mlp", "preset=tiny"},
           {"mlp", "preset=small,n_layer=1"}}) {
    auto model = zerotrain::models::make_model(name, config);
    const auto built = zerotrain::models::shape_of(*model);
    const auto counted = zerotrain::models::shape_of(name, config);
    EXPECT_EQ(counted.param_numels, built.param_numels) << name << " " << config;
    EXPECT_EQ(counted.largest_layer_params, built.largest_layer_params) << name << " " << config;
    EXPECT_EQ(counted.name, built.name);
  }
}

// DeepSpeed's model_to_params: a tensor registered twice counts once, frozen ones count,
// and the largest layer is one module's own parameters.
TEST(ModelShape, SharedOnceFrozenCountedLargestModule) {
  struct Holder : torch::nn::Module {
    explicit Holder(const torch::Tensor& w) { register_parameter("weight", w); }
  };
  struct Tied : torch::nn::Module {
    Tied() {
      const auto shared = torch::randn({100, 8});
      register_module("emb", std::make_shared<Holder>(shared));
      register_module("head", std::make_shared<Holder>(shared));   // the same tensor: tied
      auto norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})));
      norm->bias.set_requires_grad(false);
    }
  };
  Tied tied;
  const auto shape = zerotrain::models::shape_of(tied, "tied");
  EXPECT_EQ(shape.total_params() + shape.frozen_params, 800 + 8 + 8);
  EXPECT_EQ(shape.frozen_params, 8);
  EXPECT_EQ(shape.largest_layer_params, 800);
}

}  // namespace

namespace {

// checkpoint.async_save's snapshot is a copy of what the rank saves: the estimate is each
// rank's file, less its header and the small tensors (generators, counters), at every stage.
TEST(EstimateAsyncSave, TheSnapshotIsWhatTheRankSaves) {
  constexpr int kWorld = 2;
  for (int stage = 0; stage <= 3; ++stage) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("zt_estimate_snapshot_" + std::to_string(::getpid()) + "_" + std::to_string(stage));
    std::filesystem::remove_all(dir);
    std::vector<torch::nn::Sequential> nets;
    for (int r = 0; r < kWorld; ++r) {
      torch::manual_seed(0);
      nets.emplace_back(torch::nn::Linear(256, 256), torch::nn::Linear(256, 256));
    }
    ze::Setup setup;
    setup.world_size = kWorld;
    setup.stage = stage;
    setup.async_save = true;
    const ze::Breakdown b = ze::estimate(zerotrain::models::shape_of(*nets[0], "two linears"), setup);
    ze::Setup without = setup;
    without.async_save = false;
    const ze::Breakdown plain = ze::estimate(zerotrain::models::shape_of(*nets[0], "two linears"), without);
    EXPECT_EQ(b.peak() - plain.peak(), b.snapshot) << "stage " << stage;
    EXPECT_EQ(b.host - plain.host, b.snapshot) << "stage " << stage;
    const auto config = zerotrain::Config::from_string(
        R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
            "zero_optimization": {"stage": )" + std::to_string(stage) + R"(}, "checkpoint": {"async_save": true}})");
    const auto errors = run_ranks(kWorld, [&](int r, zerotrain::comm::Communicator& comm) {
      auto engine = zerotrain::initialize(nets[r].ptr(), config, {.comm = comm});
      engine.backward(nets[r]->forward(torch::ones({4, 256})).pow(2).mean());
      engine.step();
      engine.save_checkpoint(dir.string());
      engine.wait_for_checkpoint();
    });
    for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
    for (int r = 0; r < kWorld; ++r) {
      const auto file = dir / "global_step1" / ("rank_0000" + std::to_string(r) + ".safetensors");
      const auto bytes = static_cast<int64_t>(std::filesystem::file_size(file));
      EXPECT_GE(bytes, b.snapshot) << "stage " << stage << " rank " << r;
      EXPECT_LE(bytes - b.snapshot, 64 << 10) << "stage " << stage << " rank " << r << ": snapshot " << b.snapshot;
    }
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
