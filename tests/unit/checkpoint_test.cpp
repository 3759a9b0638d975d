// Checkpoints through the engine (docs/checkpoints.md): save, load and continue at every
// stage, dtype and world size (ranks as threads); resharding between world sizes, stages and
// dtypes; and damaged, mismatched or unwritable checkpoints, which must change nothing.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <limits>
#include <mutex>
#include <set>

#include "tests/support/stage3_models.h"
#include "zerotrain/checkpoint/file_io.h"
#include "tests/support/thread_ranks.h"
#include "tests/support/write_gate.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/engine.h"

namespace zerotrain::test {
namespace {

namespace fs = std::filesystem;

constexpr int kCkptSteps = 12;
constexpr int64_t kBatch = 24;   // divisible by world sizes 1, 2, 3 and 4

struct TrainSetup {
  int world = 1;
  int stage = 0;
  std::string dtype = "fp32";
  bool async = false;   // checkpoint.async_save
};

void PrintTo(const TrainSetup& s, std::ostream* os) {
  *os << "world " << s.world << " stage " << s.stage << " " << s.dtype << (s.async ? " async" : "");
}

Config setup_config(const TrainSetup& s) {
  std::string json = R"({"train_batch_size": 24,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 6, "warmup_max_lr": 0.01}},
    "zero_optimization": {"stage": )" + std::to_string(s.stage) +
                     R"(, "reduce_bucket_size": 50, "stage3_param_persistence_threshold": 0})";
  if (s.dtype == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (s.dtype == "fp16") json += R"(, "fp16": {"enabled": true, "initial_scale_power": 8})";
  if (s.async) json += R"(, "checkpoint": {"async_save": true})";
  return Config::from_string(json + "}");
}

struct Data {
  torch::Tensor x, y;
};
const Data& data() {
  static const Data d = [] {
    torch::manual_seed(11);
    return Data{torch::randn({kCkptSteps, kBatch, 8}), torch::randn({kCkptSteps, kBatch, 4})};
  }();
  return d;
}

struct RunOptions {
  int first = 0;                 // steps [first, last)
  int last = kCkptSteps;
  std::string load_dir;          // load (its latest) before the first step
  std::string save_dir;          // save after step `save_after`
  int save_after = -1;
  CheckpointLoadOptions load;
};

struct RunResult {
  std::vector<double> losses;                 // per step: the mean over ranks
  std::vector<double> grad_norms;             // per step: the engine's global gradient norm (rank 0's)
  std::vector<torch::Tensor> params;          // rank 0's consolidated weights at the end (fp32)
  std::vector<torch::Tensor> params_at_save;  // ... and when it saved
  int64_t global_steps = 0;
  std::vector<std::string> errors;
};

RunResult run(const TrainSetup& s, const RunOptions& o) {
  RunResult result;
  result.losses.assign(kCkptSteps, 0.0);
  result.grad_norms.assign(kCkptSteps, 0.0);
  std::mutex mu;
  std::optional<WriteGate> gate;
  // An asynchronous save's files are then written while training has gone on for steps,
  // from the snapshot of the state at the save.
  if (s.async && o.save_after > 0) gate.emplace();
  result.errors = run_ranks(s.world, [&](int rank, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    Engine engine = initialize(net.ptr(), setup_config(s), {.comm = comm});
    if (!o.load_dir.empty()) {
      ASSERT_TRUE(engine.load_checkpoint(o.load_dir, "", o.load).has_value());
    }
    const int64_t micro = kBatch / s.world;
    for (int step = o.first; step < o.last; ++step) {
      const auto x = data().x[step].narrow(0, rank * micro, micro), y = data().y[step].narrow(0, rank * micro, micro);
      const auto loss = torch::mse_loss(net->forward(x.to(engine.model_dtype())).to(torch::kFloat), y);
      {
        std::lock_guard<std::mutex> lock(mu);
        result.losses[step] += loss.item<double>() / s.world;
      }
      engine.backward(loss);
      engine.step();
      if (rank == 0) result.grad_norms[step] = engine.get_global_grad_norm().value_or(std::nan(""));
      // Two steps after an asynchronous save, its writers may go on.
      if (gate && step + 1 == o.save_after + 2 && rank == 0) gate->open();
      if (step + 1 == o.save_after) {
        engine.save_checkpoint(o.save_dir);
        auto weights = engine.consolidated_16bit_state_dict();
        if (rank == 0) {
          for (auto& [name, t] : weights) result.params_at_save.push_back(t.to(torch::kFloat));
        }
      }
    }
    engine.wait_for_checkpoint();   // an asynchronous save is published by the end
    auto weights = engine.consolidated_16bit_state_dict();
    if (rank == 0) {
      result.global_steps = engine.global_steps();
      for (auto& [name, t] : weights) result.params.push_back(t.to(torch::kFloat));
    }
  });
  return result;
}

std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("zt_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir.string();
}

// The names in a checkpoint folder (a save leaves nothing but its tags and `latest`).
std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

void expect_no_errors(const RunResult& r) {
  for (size_t i = 0; i < r.errors.size(); ++i) EXPECT_EQ(r.errors[i], "") << "rank " << i;
}

constexpr int kSaveAfter = 5;

// ---- Exact resume: same world, stage and dtype ----

class RoundTrip : public ::testing::TestWithParam<TrainSetup> {};

TEST_P(RoundTrip, ContinuesExactlyAsTheUninterruptedRun) {
  const TrainSetup s = GetParam();
  const std::string dir = fresh_dir("roundtrip");
  const RunResult whole = run(s, {.save_dir = dir, .save_after = kSaveAfter});
  expect_no_errors(whole);
  ASSERT_TRUE(fs::exists(fs::path(dir) / "latest"));
  const RunResult resumed = run(s, {.first = kSaveAfter, .load_dir = dir});
  expect_no_errors(resumed);
  EXPECT_EQ(resumed.global_steps, whole.global_steps);
  for (int step = kSaveAfter; step < kCkptSteps; ++step) {
    EXPECT_EQ(resumed.losses[step], whole.losses[step]) << "step " << step;   // bitwise
    EXPECT_EQ(resumed.grad_norms[step], whole.grad_norms[step]) << "step " << step;
  }
  ASSERT_EQ(resumed.params.size(), whole.params.size());
  for (size_t i = 0; i < whole.params.size(); ++i) EXPECT_TRUE(torch::equal(resumed.params[i], whole.params[i])) << i;
  fs::remove_all(dir);
}

std::vector<TrainSetup> round_trip_setups() {
  std::vector<TrainSetup> out;
  for (int world : {1, 2, 4}) {
    for (int stage = 0; stage <= 3; ++stage) {
      for (const char* dtype : {"fp32", "bf16"}) out.push_back({world, stage, dtype});
    }
  }
  out.push_back({2, 2, "fp16"});
  out.push_back({2, 0, "fp16"});
  // Saved in the background while training goes on: the snapshot is the state at the save.
  for (int world : {1, 2}) {
    for (int stage = 0; stage <= 3; ++stage) out.push_back({world, stage, "fp32", true});
  }
  out.push_back({2, 2, "bf16", true});
  out.push_back({2, 1, "fp16", true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryStageDtypeWorld, RoundTrip, ::testing::ValuesIn(round_trip_setups()),
                         [](const auto& info) {
                           return "world" + std::to_string(info.param.world) + "_stage" + std::to_string(info.param.stage) +
                                  "_" + info.param.dtype + (info.param.async ? "_async" : "");
                         });

// ---- Resharding: load at another world size, stage or dtype ----

struct Reshard {
  TrainSetup saved, loaded;
};
void PrintTo(const Reshard& r, std::ostream* os) {
  PrintTo(r.saved, os);
  *os << " -> ";
  PrintTo(r.loaded, os);
}

class Resharding : public ::testing::TestWithParam<Reshard> {};

// The L2 norm of the difference of two lists of parameters (all of them as one vector).
double l2_distance(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double squares = 0;
  for (size_t i = 0; i < a.size(); ++i) squares += (a[i].to(torch::kDouble) - b[i].to(torch::kDouble)).pow(2).sum().item<double>();
  return std::sqrt(squares);
}

// How far the resumed run may end from the uninterrupted one (L2 over every parameter), and
// how much further the uninterrupted run must move after the save for that bound to mean
// anything: a load that restored the weights but not the optimizer's moments, or nothing,
// ends far outside it. fp32 differs by reduction order only; a half-precision side by its
// rounding of the weights and gradients, which Adam can turn into a part of an lr step.
// Measured over the matrix: the runs move 0.43-0.50 after the save, and end at most 1.1e-7
// (fp32) and 5.1e-3 (bf16) from the uninterrupted run.
constexpr double kReshardFp32Bound = 1e-5;
constexpr double kReshardHalfBound = 0.02;
constexpr double kMovementOverBound = 10;

TEST_P(Resharding, ContinuesCloseToTheUninterruptedRun) {
  const Reshard c = GetParam();
  const std::string dir = fresh_dir("reshard");
  const RunResult whole = run(c.saved, {.save_dir = dir, .save_after = kSaveAfter});
  expect_no_errors(whole);
  const RunResult resumed = run(c.loaded, {.first = kSaveAfter, .load_dir = dir});
  expect_no_errors(resumed);
  EXPECT_EQ(resumed.global_steps, whole.global_steps);
  const bool half = c.saved.dtype != "fp32" || c.loaded.dtype != "fp32";
  const double bound = half ? kReshardHalfBound : kReshardFp32Bound;
  const double moved = l2_distance(whole.params, whole.params_at_save);
  const double error = l2_distance(resumed.params, whole.params);
  std::cout << "moved " << moved << " after the save; resumed ends " << error << " away (bound " << bound << ")\n";
  ASSERT_GT(moved, kMovementOverBound * bound) << "training after the save moved the parameters too little to tell a "
                                                   "restored run from one that restored less";
  EXPECT_LE(error, bound) << "moved " << moved << " after the save";
  // Every step's loss and gradient norm, as the parity matrix bounds them.
  const ParityCase norms_case{c.loaded.stage, c.loaded.world, 1, 0.0, true, false, half ? "bf16" : "fp32"};
  for (int step = kSaveAfter; step < kCkptSteps; ++step) {
    EXPECT_NEAR(resumed.losses[step], whole.losses[step], (half ? 0.01 : 1e-5) * std::abs(whole.losses[step]))
        << "step " << step;
  }
  EXPECT_EQ(grad_norm_mismatch(std::vector<double>(resumed.grad_norms.begin() + kSaveAfter, resumed.grad_norms.end()),
                               std::vector<double>(whole.grad_norms.begin() + kSaveAfter, whole.grad_norms.end()),
                               grad_norm_tolerance(norms_case)),
            "");
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Matrix, Resharding,
                         ::testing::Values(Reshard{{4, 3, "bf16"}, {2, 1, "bf16"}},    // 4 -> 2, stage 3 -> 1
                                           Reshard{{2, 1, "bf16"}, {1, 0, "fp32"}},    // 2 -> 1, bf16 -> fp32
                                           Reshard{{4, 3, "bf16"}, {1, 0, "fp32"}},    // stage 3 -> 0
                                           Reshard{{4, 2, "fp32"}, {2, 2, "fp32"}},    // 4 -> 2
                                           Reshard{{2, 1, "fp32"}, {4, 1, "fp32"}},    // 2 -> 4
                                           Reshard{{3, 2, "fp32"}, {2, 1, "fp32"}},    // 3 -> 2
                                           Reshard{{1, 3, "fp32"}, {1, 0, "fp32"}},    // stage 3 -> 0
                                           Reshard{{2, 0, "fp32"}, {2, 3, "fp32"}},    // stage 0 -> 3
                                           Reshard{{2, 2, "fp32"}, {3, 3, "bf16"}},    // 2 -> 3, fp32 -> bf16
                                           Reshard{{1, 0, "bf16"}, {4, 3, "bf16"}}));  // 1 -> 4, stage 0 -> 3

// ---- Damaged and mismatched checkpoints change nothing ----

// Saves a checkpoint at world 2 stage 2 after kSaveAfter steps; returns its tag directory.
std::string saved_checkpoint(const std::string& name) {
  const std::string dir = fresh_dir(name);
  expect_no_errors(run({2, 2, "fp32"}, {.last = kSaveAfter, .save_dir = dir, .save_after = kSaveAfter}));
  return dir;
}

// Loading `dir` at world 2 stage 1 fails on every rank with a CheckpointError containing
// `expected`, and the engine's weights are what initialize gave them.
void expect_load_fails(const std::string& dir, const std::string& expected, const CheckpointLoadOptions& o = {}) {
  const auto errors = run_ranks(2, [&](int, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    Engine engine = initialize(net.ptr(), setup_config({2, 1, "fp32"}), {.comm = comm});
    const auto before = net->fc1->inner->weight.detach().clone();
    try {
      engine.load_checkpoint(dir, "", o);
      ADD_FAILURE() << "the load did not fail";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_TRUE(torch::equal(before, net->fc1->inner->weight));
    EXPECT_EQ(engine.global_steps(), 0);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

fs::path tag_dir(const std::string& dir) { return fs::path(dir) / ("global_step" + std::to_string(kSaveAfter)); }

// Flips a bit of the first tensor's data (a fragment of fp32 master weights: widest first).
void flip_first_tensor_byte(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  const auto at = static_cast<std::streamoff>(8 + n + 2);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  f.seekp(at);
  c = static_cast<char>(c ^ 0x10);
  f.write(&c, 1);
}

// Fragments are read straight into the engine's buffers, so damage inside one is found after
// the weights began to change: the engine then refuses to train until a load succeeds.
TEST(CheckpointFaults, BitFlipInAFragmentIsCaughtAndTrainingRefused) {
  const std::string dir = saved_checkpoint("bitflip");
  const std::string good = saved_checkpoint("bitflip_good");
  flip_first_tensor_byte(tag_dir(dir) / "rank_00001.safetensors");
  const auto errors = run_ranks(2, [&](int rank, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    Engine engine = initialize(net.ptr(), setup_config({2, 1, "fp32"}), {.comm = comm});
    try {
      engine.load_checkpoint(dir);
      ADD_FAILURE() << "the load did not fail";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("does not match its checksum"), std::string::npos) << e.what();
    }
    const int64_t micro = kBatch / 2;
    const auto x = data().x[0].narrow(0, rank * micro, micro), y = data().y[0].narrow(0, rank * micro, micro);
    EXPECT_THROW(engine.backward(torch::mse_loss(net->forward(x), y)), UsageError);
    EXPECT_THROW(engine.save_checkpoint(dir), UsageError);
    ASSERT_TRUE(engine.load_checkpoint(good).has_value());
    engine.backward(torch::mse_loss(net->forward(x), y));
    engine.step();
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  fs::remove_all(dir);
  fs::remove_all(good);
}

TEST(CheckpointFaults, TruncatedRankFile) {
  const std::string dir = saved_checkpoint("truncated");
  const fs::path f = tag_dir(dir) / "rank_00000.safetensors";
  fs::resize_file(f, fs::file_size(f) - 100);
  expect_load_fails(dir, "manifest says");
  fs::remove_all(dir);
}

TEST(CheckpointFaults, DamagedHeader) {
  const std::string dir = saved_checkpoint("header");
  std::fstream f(tag_dir(dir) / "rank_00000.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(20);
  f.write("XX", 2);
  f.close();
  expect_load_fails(dir, "header does not match");
  fs::remove_all(dir);
}

TEST(CheckpointFaults, MissingRankFile) {
  const std::string dir = saved_checkpoint("missing");
  fs::remove(tag_dir(dir) / "rank_00001.safetensors");
  expect_load_fails(dir, "rank_00001.safetensors: missing");
  fs::remove_all(dir);
}

TEST(CheckpointFaults, NewerFormatVersion) {
  const std::string dir = saved_checkpoint("version");
  const fs::path m = tag_dir(dir) / "manifest.json";
  std::ifstream in(m);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  text.replace(text.find("\"format_version\": 1"), 19, "\"format_version\": 7");
  std::ofstream(m) << text;
  expect_load_fails(dir, "checkpoint format version 7");
  fs::remove_all(dir);
}

TEST(CheckpointFaults, ManifestThatIsNotJson) {
  const std::string dir = saved_checkpoint("notjson");
  std::ofstream(tag_dir(dir) / "manifest.json") << "{\"format\": \"zerotrain-checkpoint\", ";
  expect_load_fails(dir, "manifest.json: invalid JSON at line 1");
  fs::remove_all(dir);
}

TEST(CheckpointFaults, UnfinishedSaveHasNoManifest) {
  const std::string dir = saved_checkpoint("nomanifest");
  fs::remove(tag_dir(dir) / "manifest.json");
  expect_load_fails(dir, "did not finish");
  fs::remove_all(dir);
}

TEST(CheckpointFaults, DifferentModelIsRefusedByName) {
  const std::string dir = fresh_dir("othermodel");
  const auto errors = run_ranks(1, [&](int, comm::Communicator& comm) {
    auto other = torch::nn::Sequential(torch::nn::Linear(8, 4));
    Engine engine = initialize(other.ptr(), setup_config({1, 0, "fp32"}), {.comm = comm});
    engine.save_checkpoint(dir);
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  expect_load_fails(dir, "different model");
  fs::remove_all(dir);
}

TEST(CheckpointFaults, OptimizerTypeMustMatchUnlessStatesAreSkipped) {
  const std::string dir = fresh_dir("sgd");
  const auto errors = run_ranks(2, [&](int, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    auto config = Config::from_string(R"({"train_batch_size": 24, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_allow_untested_optimizer": true,
                                          "zero_optimization": {"stage": 2}})");
    Engine engine = initialize(net.ptr(), config, {.comm = comm});
    engine.save_checkpoint(dir, "sgd");
    std::ofstream(fs::path(dir) / "latest") << "sgd";
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  expect_load_fails(dir, "optimizer is SGD");
  fs::remove_all(dir);
}

TEST(CheckpointFaults, NoLatestLoadsNothing) {
  const std::string dir = fresh_dir("nolatest");
  const auto errors = run_ranks(1, [&](int, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    Engine engine = initialize(net.ptr(), setup_config({1, 0, "fp32"}), {.comm = comm});
    EXPECT_FALSE(engine.load_checkpoint(dir).has_value());
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

// ---- Saving safely ----

TEST(CheckpointSave, FileSizeLimitFailsBeforeLatestMoves) {
  const std::string dir = saved_checkpoint("fsize");
  struct rlimit old {};
  ::getrlimit(RLIMIT_FSIZE, &old);
  const auto errors = run_ranks(2, [&](int rank, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    Engine engine = initialize(net.ptr(), setup_config({2, 2, "fp32"}), {.comm = comm});
    if (rank == 0) {
      struct rlimit small = old;
      small.rlim_cur = 512;
      ::setrlimit(RLIMIT_FSIZE, &small);
    }
    comm.barrier().wait();
    try {
      engine.save_checkpoint(dir, "too_big");
      ADD_FAILURE() << "the save did not fail";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("file-size limit"), std::string::npos) << e.what();
    }
  });
  ::setrlimit(RLIMIT_FSIZE, &old);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(*checkpoint::read_latest_tag(dir), "global_step" + std::to_string(kSaveAfter));
  EXPECT_EQ(entries(dir), (std::set<std::string>{"latest", "global_step5"}));   // no staging or half-renamed folder
  expect_no_errors(run({2, 2, "fp32"}, {.first = kSaveAfter, .load_dir = dir}));
  fs::remove_all(dir);
}

// The disk fills up while the ranks write (another process takes the space after the check
// for room): rank 1's write fails with ENOSPC, the save fails on every rank, and the previous
// checkpoint stays the one `latest` names. Needs a small tmpfs, so root.
TEST(CheckpointSave, DiskFillingUpDuringTheWriteAbortsTheSaveEverywhere) {
  if (::getuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const fs::path dir = fresh_dir("enospc");
  fs::create_directories(dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  expect_no_errors(run({2, 2, "fp32"}, {.last = kSaveAfter, .save_dir = dir.string(), .save_after = kSaveAfter}));
  bool filled = false;
  checkpoint::set_write_observer([&](const fs::path& path, int64_t) {
    if (filled || path.filename() != "rank_00001.safetensors") return;
    filled = true;
    std::ofstream filler(dir / "filler", std::ios::binary);
    const std::string block(1 << 16, '\0');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  });
  const auto errors = run_ranks(2, [&](int, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    Engine engine = initialize(net.ptr(), setup_config({2, 2, "fp32"}), {.comm = comm});
    try {
      engine.save_checkpoint(dir.string(), "second");
      ADD_FAILURE() << "the save did not fail";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("the disk is full (ENOSPC)"), std::string::npos) << e.what();
    }
  });
  checkpoint::set_write_observer(nullptr);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_TRUE(filled);
  EXPECT_EQ(*checkpoint::read_latest_tag(dir), "global_step" + std::to_string(kSaveAfter));
  EXPECT_EQ(entries(dir), (std::set<std::string>{"latest", "global_step5", "filler"}));
  fs::remove(dir / "filler");
  expect_no_errors(run({2, 2, "fp32"}, {.first = kSaveAfter, .load_dir = dir.string()}));
  ::umount(dir.c_str());
  fs::remove_all(dir);
}

TEST(CheckpointSave, InsideAnAccumulationIsRefused) {
  const auto errors = run_ranks(1, [&](int, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    auto config = Config::from_string(R"({"train_batch_size": 24, "gradient_accumulation_steps": 2,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}})");
    Engine engine = initialize(net.ptr(), config, {.comm = comm});
    engine.backward(torch::mse_loss(net->forward(data().x[0].narrow(0, 0, 12)), data().y[0].narrow(0, 0, 12)));
    engine.step();
    EXPECT_THROW(engine.save_checkpoint(fresh_dir("accum")), UsageError);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(CheckpointSave, TagValidationFailRefusesDifferentTags) {
  const std::string dir = fresh_dir("tags");
  const auto errors = run_ranks(2, [&](int rank, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    auto config = Config::from_string(R"({"train_batch_size": 24, "checkpoint": {"tag_validation": "Fail"},
        "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}})");
    Engine engine = initialize(net.ptr(), config, {.comm = comm});
    EXPECT_THROW(engine.save_checkpoint(dir, rank == 0 ? "a" : "b"), UsageError);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_FALSE(fs::exists(fs::path(dir) / "latest"));
}

TEST(CheckpointSave, ClientStateAndSavingATagAgain) {
  const std::string dir = fresh_dir("client");
  const auto errors = run_ranks(2, [&](int, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    Engine engine = initialize(net.ptr(), setup_config({2, 1, "fp32"}), {.comm = comm});
    engine.save_checkpoint(dir, "t", {{"epoch", 3}});
    engine.save_checkpoint(dir, "t", {{"epoch", 4}});   // replaces the tag whole
    const auto loaded = engine.load_checkpoint(dir);
    ASSERT_TRUE(loaded.has_value());
    EXPECT_EQ(loaded->client_state["epoch"], 4);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(entries(dir), (std::set<std::string>{"latest", "t"}));   // the first "t" replaced, nothing left beside it
  fs::remove_all(dir);
}

TEST(CheckpointSave, Save16BitModelWritesSafetensors) {
  const std::string dir = fresh_dir("16bit");
  const auto errors = run_ranks(2, [&](int, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    Engine engine = initialize(net.ptr(), setup_config({2, 3, "bf16"}), {.comm = comm});
    EXPECT_FALSE(engine.save_16bit_model(dir));   // stage 3 without gather_16bit_weights_on_model_save
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model.safetensors"));
  const auto errors2 = run_ranks(2, [&](int, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(false);
    Engine engine = initialize(net.ptr(), setup_config({2, 2, "bf16"}), {.comm = comm});
    EXPECT_TRUE(engine.save_16bit_model(dir));
    EXPECT_THROW(engine.save_16bit_model(dir, "pytorch_model.bin"), UsageError);
  });
  for (const auto& e : errors2) EXPECT_EQ(e, "");
  EXPECT_TRUE(fs::exists(fs::path(dir) / "model.safetensors"));
  fs::remove_all(dir);
}

// Stage 3 streams the model into Hugging Face's shards: every parameter once (the tied head
// is the embedding), the values consolidated_16bit_state_dict gathers, and a failure on rank
// 0 throws on every rank and leaves nothing.
TEST(CheckpointSave, Save16BitModelStreamsShardsAtStage3) {
  const std::string dir = fresh_dir("16bit_shards");
  std::mutex mutex;
  std::map<std::string, torch::Tensor> oracle;
  const auto errors = run_ranks(2, [&](int rank, comm::Communicator& comm) {
    torch::manual_seed(3);
    SharingNet net;
    net->to(torch::kBFloat16);
    auto config = Config::from_string(R"({"train_batch_size": 4, "bf16": {"enabled": true},
      "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
      "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
                            "stage3_gather_16bit_weights_on_model_save": true}})");
    Engine engine = initialize(net.ptr(), config, {.comm = comm});
    for (int s = 0; s < 2; ++s) {
      const auto x = torch::randn({2, 8}).to(torch::kBFloat16);
      engine.backward(net->forward(x, true).to(torch::kFloat).pow(2).mean());
      engine.step();
    }
    EXPECT_TRUE(engine.save_16bit_model(dir, "model.safetensors", {.max_shard_bytes = 100}));
    auto whole = engine.consolidated_16bit_state_dict();
    if (rank == 0) {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& [name, t] : whole) oracle[name] = t;
    }
    // A file where the folder should be: rank 0 fails, every rank throws.
    const std::string blocked = dir + "_file";
    if (rank == 0) std::ofstream(blocked) << "in the way";
    comm.barrier().wait();
    try {
      engine.save_16bit_model(blocked);
      ADD_FAILURE() << "rank " << rank << " did not throw";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0: [io] cannot create the output directory"), std::string::npos) << e.what();
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  ASSERT_FALSE(oracle.empty());
  EXPECT_EQ(oracle.size(), 5u);   // embed (= head), block and branch: the tied weight once
  const auto index = nlohmann::json::parse(std::ifstream(fs::path(dir) / "model.safetensors.index.json"));
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items()) {
    EXPECT_TRUE(oracle.count(name)) << name;
    files.insert(file.get<std::string>());
  }
  EXPECT_EQ(index["weight_map"].size(), oracle.size());
  EXPECT_GT(files.size(), 2u);
  for (const std::string& file : files) {
    std::ifstream in(fs::path(dir) / file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const auto header = checkpoint::parse_safetensors_header(std::string_view(bytes).substr(8, n),
                                                             static_cast<int64_t>(bytes.size()), file);
    EXPECT_EQ(header.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
    for (const auto& t : header.tensors) {
      const torch::Tensor& want = oracle.at(t.name);
      EXPECT_EQ(t.dtype, checkpoint::Dtype::kBF16) << t.name;
      ASSERT_EQ(t.nbytes(), static_cast<int64_t>(want.nbytes())) << t.name;
      EXPECT_EQ(std::memcmp(bytes.data() + header.data_offset + t.begin, want.contiguous().data_ptr(), want.nbytes()), 0)
          << t.name;
    }
  }
  fs::remove(dir + "_file");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zerotrain::test
