// The Trainer (docs/trainer.md): its arguments, the blocks and "auto" values it fills, epochs
// against max_steps, the evaluation and save strategies, callbacks and early stopping,
// resuming mid-epoch with the same losses, and world sizes that train the same model.
// Ranks are threads of this process (the in-process backend).
#include <unistd.h>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <gtest/gtest.h>

#include "tests/support/parity_model.h"
#include "tests/support/thread_ranks.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/config/trainer_blocks.h"
#include "zerotrain/core/error.h"
#include "zerotrain/data/open.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/models/models.h"
#include "zerotrain/trainer/trainer.h"

namespace zerotrain {
namespace {

namespace fs = std::filesystem;
using test::run_ranks;

// Small images whose class is a function of the pixels (the brightest quadrant), so that a
// ConvNet learns them: sample i is a pure function of i.
class QuadrantImages final : public data::Dataset {
 public:
  explicit QuadrantImages(int64_t size, int64_t offset = 0) : size_(size), offset_(offset) {
    info_ = {.task = data::Task::kClassification, .channels = 1, .height = 12, .width = 12, .classes = 4,
             .description = "quadrant images (" + std::to_string(size) + ")"};
  }
  int64_t size() const override { return size_; }
  const data::DatasetInfo& info() const override { return info_; }
  data::Batch get(const std::vector<int64_t>& indices) const override {
    data::check_sample_indices(indices, size_, info_);
    auto inputs = torch::empty({static_cast<int64_t>(indices.size()), 1, 12, 12});
    auto targets = torch::empty({static_cast<int64_t>(indices.size())}, torch::kLong);
    for (size_t k = 0; k < indices.size(); ++k) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(offset_ + indices[k]) + 1);
      auto image = torch::rand({1, 12, 12}, gen) * 0.5;
      const int64_t label = (offset_ + indices[k]) % 4;
      image.slice(1, (label / 2) * 6, (label / 2) * 6 + 6).slice(2, (label % 2) * 6, (label % 2) * 6 + 6) += 0.5;
      inputs[static_cast<int64_t>(k)] = image;
      targets[static_cast<int64_t>(k)] = label;
    }
    return {inputs, targets};
  }

 private:
  int64_t size_, offset_;
  data::DatasetInfo info_;
};

models::DataShape shape_of(const data::DatasetInfo& info) {
  return {.kind = models::DataShape::Kind::kImages, .channels = info.channels, .height = info.height,
          .width = info.width, .classes = info.classes, .name = "test images"};
}

// Every rank builds the same weights: ranks are threads sharing LibTorch's generator, so
// the builds take turns, each from the same seed.
ModelSpec convnet_spec(const data::DatasetInfo& info, const std::string& config = "preset=tiny") {
  return {.build = [info, config] {
    static std::mutex building;
    std::lock_guard<std::mutex> lock(building);
    torch::manual_seed(7);
    return models::make_model("convnet", config, shape_of(info));
  }};
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("zt_trainer_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string write_config(const fs::path& dir, const std::string& json) {
  const fs::path file = dir / "ds_config.json";
  std::ofstream(file) << json;
  return file.string();
}

constexpr const char* kAutoConfig = R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "zero_optimization": {"stage": 2}})";

// Records what the callbacks see.
struct Recorder : TrainerCallback {
  std::vector<std::pair<int64_t, double>> losses;   // (step, logged loss)
  std::vector<Metrics> evaluations;
  std::vector<std::string> saves;
  void on_log(const TrainingArguments&, const TrainerState& state, TrainerControl&, const Metrics& logs) override {
    if (auto loss = find_metric(logs, "loss")) losses.emplace_back(state.global_step, *loss);
  }
  void on_evaluate(const TrainingArguments&, const TrainerState&, TrainerControl&, const Metrics& m) override {
    evaluations.push_back(m);
  }
  void on_save(const TrainingArguments&, const TrainerState&, TrainerControl&, const std::string& folder) override {
    saves.push_back(folder);
  }
};

struct RunResult {
  std::vector<std::string> errors;
  Recorder rank0;
  TrainerState state;
};

// Trains on `world` thread ranks; rank 0's callbacks are recorded.
RunResult run(int world, TrainingArguments args, std::shared_ptr<const data::Dataset> train,
              std::shared_ptr<const data::Dataset> eval, const std::vector<std::shared_ptr<TrainerCallback>>& extra = {}) {
  RunResult out;
  auto recorder = std::make_shared<Recorder>();
  out.errors = run_ranks(world, [&](int rank, comm::Communicator& comm) {
    Trainer trainer(args, convnet_spec(train->info()), {.train = train, .eval = eval}, {.comm = comm});
    if (rank == 0) {
      trainer.add_callback(recorder);
      for (const auto& c : extra) trainer.add_callback(c);
    }
    trainer.train();
    if (rank == 0) out.state = trainer.state();
  });
  out.rank0 = *recorder;
  return out;
}

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TrainingArguments base_args(const TempDir& dir) {
  TrainingArguments a;
  a.deepspeed = write_config(dir.path, kAutoConfig);
  a.per_device_train_batch_size = 8;
  a.learning_rate = 3e-3;
  a.logging_steps = 1;
  a.save_strategy = IntervalStrategy::kNo;
  a.disable_tqdm = true;
  return a;
}

// --- arguments and the config --------------------------------------------------------------

TEST(TrainingArguments, EveryBadValueIsNamed) {
  TrainingArguments a;
  a.deepspeed = "x.json";
  a.num_train_epochs = 0;
  a.logging_steps = 0;
  a.report_to = {"wandb"};
  a.early_stopping_patience = 2;   // without evaluations
  try {
    check(a);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--num_train_epochs 0"), std::string::npos) << m;
    EXPECT_NE(m.find("--logging_steps 0"), std::string::npos) << m;
    EXPECT_NE(m.find("--report_to wandb"), std::string::npos) << m;
    EXPECT_NE(m.find("--early_stopping_patience needs evaluations"), std::string::npos) << m;
  }
  EXPECT_THROW(parse_strategy("epochs", "--eval_strategy"), UsageError);
  EXPECT_EQ(parse_strategy("epoch", "--eval_strategy"), IntervalStrategy::kEpoch);
}

TEST(TrainerBlocks, AdamWAndTheLinearScheduleWhenTheConfigHasNone) {
  auto config = Config::from_string(R"({"train_batch_size": 16})");
  config::add_trainer_blocks(config, "linear");
  config::TrainerArgs args;
  args.per_device_train_batch_size = 16;
  args.learning_rate = 2e-3;
  args.adam_beta2 = 0.95;
  args.weight_decay = 0.1;
  args.warmup_ratio = 0.1;
  args.num_training_steps = 200;
  config::resolve_auto(config, args);
  ASSERT_TRUE(config.optimizer.has_value());
  EXPECT_EQ(config.optimizer->type, "AdamW");
  const auto& adam = std::get<config::AdamParams>(config.optimizer->params);
  EXPECT_DOUBLE_EQ(adam.lr.value, 2e-3);
  EXPECT_DOUBLE_EQ(adam.betas.value[1], 0.95);
  EXPECT_DOUBLE_EQ(adam.weight_decay.value, 0.1);
  EXPECT_EQ(config.source_of("optimizer.params.lr"), config::Source::kAuto);
  ASSERT_TRUE(config.scheduler.has_value());
  EXPECT_EQ(config.scheduler->type, "WarmupDecayLR");
  const auto& decay = std::get<config::WarmupDecayLRParams>(config.scheduler->params);
  EXPECT_EQ(decay.total_num_steps.value, std::optional<int64_t>(200));
  EXPECT_EQ(decay.warmup_num_steps.value, 20);
  EXPECT_EQ(decay.warmup_type, config::WarmupType::kLinear);
  EXPECT_TRUE(config.unresolved_auto_keys().empty());

  auto constant = Config::from_string("{}");
  config::add_trainer_blocks(constant, "constant");
  EXPECT_TRUE(constant.optimizer.has_value());
  EXPECT_FALSE(constant.scheduler.has_value());
  EXPECT_THROW(config::add_trainer_blocks(constant, "polynomial"), UsageError);
}

// examples/ds_config_zero2.json sets betas (0.9, 0.95): HF's default --adam_beta2 0.999 is a
// mismatch, and the flag that fixes it exists.
TEST(TrainerBlocks, TheExampleConfigTrainsWithMatchingFlags) {
  const fs::path example = fs::path(ZEROTRAIN_SOURCE_DIR) / "examples" / "ds_config_zero2.json";
  config::TrainerArgs args;
  args.world_size = 2;
  args.per_device_train_batch_size = 8;
  args.gradient_accumulation_steps = 2;
  args.learning_rate = 3e-4;
  args.weight_decay = 0.1;
  args.bf16 = true;
  args.warmup_steps = 100;
  args.num_training_steps = 1000;
  auto mismatched = Config::from_file(example);
  try {
    config::resolve_auto(mismatched, args);
    FAIL() << "no mismatch";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.params.betas=[0.9, 0.95] vs hf adam_beta1+adam_beta2=[0.9, 0.999]"),
              std::string::npos)
        << e.what();
  }
  args.adam_beta2 = 0.95;
  auto config = Config::from_file(example);
  EXPECT_NO_THROW(config::resolve_auto(config, args));
}

// --- the loop -------------------------------------------------------------------------------

// 100 samples on 2 ranks: 50 each, 7 micro-batches of 8 (the last of 2), 3 steps of 2.
TEST(Trainer, EpochsAndMaxSteps) {
  TempDir dir("epochs");
  auto train = std::make_shared<QuadrantImages>(100);
  TrainingArguments a = base_args(dir);
  a.gradient_accumulation_steps = 2;
  a.num_train_epochs = 2;
  auto by_epochs = run(2, a, train, nullptr);
  expect_no_errors(by_epochs.errors);
  EXPECT_EQ(by_epochs.state.steps_per_epoch, 3);
  EXPECT_EQ(by_epochs.state.max_steps, 6);
  EXPECT_EQ(by_epochs.state.global_step, 6);
  EXPECT_DOUBLE_EQ(by_epochs.state.epoch, 2.0);

  a.max_steps = 5;   // wins over the epochs
  auto by_steps = run(2, a, train, nullptr);
  expect_no_errors(by_steps.errors);
  EXPECT_EQ(by_steps.state.global_step, 5);
  EXPECT_EQ(by_steps.state.num_train_epochs, 2);
  ASSERT_EQ(by_steps.rank0.losses.size(), 5u);
  // The linear schedule decays to 0 at the last step, so the runs share only their first loss.
  EXPECT_EQ(by_steps.rank0.losses[0].second, by_epochs.rank0.losses[0].second);
}

TEST(Trainer, EvaluationAndSaveStrategies) {
  TempDir dir("strategies");
  auto train = std::make_shared<QuadrantImages>(64);
  auto eval = std::make_shared<QuadrantImages>(21, 1000);   // not a multiple of the world size
  TrainingArguments a = base_args(dir);
  a.num_train_epochs = 3;   // 64 / 2 ranks / 8 = 4 steps per epoch
  a.eval_strategy = IntervalStrategy::kSteps;
  a.eval_steps = 5;
  a.output_dir = (dir.path / "steps").string();
  a.save_strategy = IntervalStrategy::kSteps;
  a.save_steps = 4;
  a.save_total_limit = 2;
  auto steps = run(2, a, train, eval);
  expect_no_errors(steps.errors);
  EXPECT_EQ(steps.rank0.evaluations.size(), 2u);   // steps 5 and 10 of 12
  // Saves at 4, 8, 12 (the last), and the limit keeps the newest two.
  EXPECT_EQ(steps.rank0.saves.size(), 3u);
  EXPECT_FALSE(fs::exists(fs::path(a.output_dir) / "checkpoint-4"));
  EXPECT_TRUE(fs::exists(fs::path(a.output_dir) / "checkpoint-8"));
  EXPECT_TRUE(fs::exists(fs::path(a.output_dir) / "checkpoint-12"));
  for (const auto& m : steps.rank0.evaluations) {
    ASSERT_TRUE(find_metric(m, "eval_accuracy").has_value());
    EXPECT_TRUE(find_metric(m, "eval_loss").has_value());
    EXPECT_TRUE(find_metric(m, "epoch").has_value());
  }

  a.eval_strategy = IntervalStrategy::kEpoch;
  a.save_strategy = IntervalStrategy::kEpoch;
  a.output_dir = (dir.path / "epoch").string();
  a.save_total_limit = 0;
  auto epoch = run(2, a, train, eval);
  expect_no_errors(epoch.errors);
  EXPECT_EQ(epoch.rank0.evaluations.size(), 3u);
  EXPECT_EQ(epoch.rank0.saves.size(), 3u);   // at steps 4, 8, 12
  EXPECT_TRUE(fs::exists(fs::path(a.output_dir) / "checkpoint-4"));

  a.save_strategy = IntervalStrategy::kNo;
  a.output_dir = (dir.path / "no").string();
  auto none = run(2, a, train, eval);
  expect_no_errors(none.errors);
  EXPECT_TRUE(none.rank0.saves.empty());
  EXPECT_FALSE(fs::exists(a.output_dir));
}

// Each evaluation sample is scored once, whatever the world size: world 3 on 10 samples (4,
// 3, 3 per rank) gives world 1's loss and accuracy.
TEST(Trainer, EvaluationCountsEverySampleOnce) {
  TempDir dir("eval");
  auto train = std::make_shared<QuadrantImages>(48);
  auto eval = std::make_shared<QuadrantImages>(10, 500);
  TrainingArguments a = base_args(dir);
  a.max_steps = 1;
  a.learning_rate = 0;   // the same weights at every world size
  a.per_device_eval_batch_size = 3;
  a.eval_strategy = IntervalStrategy::kSteps;
  a.eval_steps = 1;
  auto one = run(1, a, train, eval);
  auto three = run(3, a, train, eval);
  expect_no_errors(one.errors);
  expect_no_errors(three.errors);
  ASSERT_EQ(one.rank0.evaluations.size(), 1u);
  ASSERT_EQ(three.rank0.evaluations.size(), 1u);
  const double accuracy = *find_metric(one.rank0.evaluations[0], "eval_accuracy");
  EXPECT_DOUBLE_EQ(*find_metric(three.rank0.evaluations[0], "eval_accuracy"), accuracy);
  EXPECT_NEAR(*find_metric(three.rank0.evaluations[0], "eval_loss"), *find_metric(one.rank0.evaluations[0], "eval_loss"),
              1e-6);
  EXPECT_DOUBLE_EQ(accuracy * 10, std::round(accuracy * 10));   // a count out of 10
}

TEST(Trainer, EarlyStoppingStopsWhenTheMetricDoesNotImprove) {
  TempDir dir("early");
  auto train = std::make_shared<QuadrantImages>(160);
  auto eval = std::make_shared<QuadrantImages>(16, 500);
  TrainingArguments a = base_args(dir);
  a.learning_rate = 0;   // eval_loss never improves
  a.num_train_epochs = 1;   // 10 steps
  a.eval_strategy = IntervalStrategy::kSteps;
  a.eval_steps = 1;
  a.early_stopping_patience = 2;
  auto stopped = run(2, a, train, eval);
  expect_no_errors(stopped.errors);
  // The first evaluation sets the best; two more without improvement stop it.
  EXPECT_EQ(stopped.state.global_step, 3);
  EXPECT_EQ(stopped.rank0.evaluations.size(), 3u);
}

// Resuming from a checkpoint saved mid-epoch continues with the uninterrupted run's losses:
// the same batches (the epoch's first steps skipped), weights, moments and schedule.
TEST(Trainer, ResumeMidEpochGivesTheSameLosses) {
  TempDir dir("resume");
  auto train = std::make_shared<QuadrantImages>(96);   // 6 steps per epoch on 2 ranks
  TrainingArguments a = base_args(dir);
  a.num_train_epochs = 2;
  a.output_dir = (dir.path / "run").string();
  a.save_strategy = IntervalStrategy::kSteps;
  a.save_steps = 4;
  auto whole = run(2, a, train, nullptr);
  expect_no_errors(whole.errors);
  ASSERT_EQ(whole.rank0.losses.size(), 12u);

  a.resume_from_checkpoint = (fs::path(a.output_dir) / "checkpoint-4").string();
  a.output_dir = (dir.path / "resumed").string();
  auto resumed = run(2, a, train, nullptr);
  expect_no_errors(resumed.errors);
  ASSERT_EQ(resumed.rank0.losses.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(resumed.rank0.losses[i].first, whole.rank0.losses[i + 4].first);
    EXPECT_EQ(resumed.rank0.losses[i].second, whole.rank0.losses[i + 4].second) << "step " << i + 5;
  }
}

// The global batch of a step is the same samples at any world size: world 1 with
// accumulation 4, world 2 with 2 and world 4 with 1 train the same model on real data.
TEST(Trainer, WorldSizesAndAccumulationTrainTheSameModelOnFashionMnist) {
  if (!fs::exists(std::string(data::kFashionMnistDir) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist; bash scripts/setup.sh)";
  }
  TempDir dir("worlds");
  auto train = data::open_dataset("fashion-mnist", data::Split::kTrain, {.limit = 512});
  TrainingArguments a = base_args(dir);
  a.max_steps = 6;
  std::vector<std::vector<std::pair<int64_t, double>>> losses;
  for (const auto& [world, accumulation] : std::vector<std::pair<int, int64_t>>{{1, 4}, {2, 2}, {4, 1}}) {
    a.gradient_accumulation_steps = accumulation;
    auto result = run(world, a, train, nullptr);
    expect_no_errors(result.errors);
    losses.push_back(result.rank0.losses);
  }
  // logging_steps 1: a loss for each of the 6 steps, so the comparisons below have
  // something to compare and back() has an element.
  ASSERT_EQ(losses[0].size(), 6u);
  for (size_t w = 1; w < losses.size(); ++w) {
    ASSERT_EQ(losses[w].size(), losses[0].size());
    for (size_t i = 0; i < losses[0].size(); ++i) {
      EXPECT_EQ(losses[w][i].first, losses[0][i].first) << "world " << (w == 1 ? 2 : 4);
      EXPECT_NEAR(losses[w][i].second, losses[0][i].second, test::kParityTolerance * std::abs(losses[0][i].second))
          << "world " << (w == 1 ? 2 : 4) << ", step " << i + 1;
    }
  }
  EXPECT_LT(losses[0].back().second, losses[0].front().second);   // it learns
}

}  // namespace
}  // namespace zerotrain
