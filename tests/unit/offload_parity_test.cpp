// Optimizer offload changes where the master weights and Adam moments live and how the
// step walks them (sub-groups, 16-bit gradients read and 16-bit weights written by the
// fused kernel), never the numbers: offload to host memory and to files on disk give the
// bits of the same run without offload, at stages 1-3, world sizes 1 and 2, accumulation 1
// and 2, in fp32, bf16 and fp16, with sub-groups small enough that several stream. Every
// step's global gradient norm is the same too, and the same as single-process training's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <sys/resource.h>
#include <unistd.h>

#include "tests/support/parity_train.h"
#include "tests/support/stage3_models.h"
#include "zerotrain/engine/engine.h"

namespace comm = zerotrain::comm;
namespace fs = std::filesystem;

namespace {

using namespace zerotrain::test;

struct OffloadCase {
  int stage = 1;
  int world_size = 1;
  int accumulation = 1;
  std::string dtype = "fp32";
  std::string device = "cpu";   // offload_optimizer.device ("none": parameter offload only)
  double clip = 0.0;
  bool pipeline = true;         // pipeline_read and pipeline_write (nvme)
  std::string param = "none";   // offload_param.device (stage 3)
};

void PrintTo(const OffloadCase& c, std::ostream* os) {
  *os << "stage " << c.stage << ", world " << c.world_size << ", accumulation " << c.accumulation << ", " << c.dtype
      << ", optimizer offload to " << c.device << (c.clip > 0 ? ", clipped" : "") << (c.pipeline ? "" : ", no pipeline")
      << ", parameter offload to " << c.param;
}

std::string name_of(const OffloadCase& c) {
  return c.device + "_stage" + std::to_string(c.stage) + "_ws" + std::to_string(c.world_size) + "_gas" +
         std::to_string(c.accumulation) + "_" + c.dtype + (c.clip > 0 ? "_clip" : "") + (c.pipeline ? "" : "_sync") +
         (c.param == "none" ? "" : "_params_" + c.param);
}

// Swap files go to a folder on the disk the tests run from (O_DIRECT: not a tmpfs), made now
// (nvme_path must exist) and removed when the test ends, failed or not.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& name)
      : path(fs::current_path() / ("zt_offload_" + name + "_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

constexpr double kOffloadWeightDecay = 0.01;

fs::path optimizer_swap_file(const std::string& nvme_dir) {
  return fs::path(nvme_dir) / "zerotrain_offload" / "optimizer" / "rank0" / "group0_master.swp";
}
fs::path param_swap_file(const std::string& nvme_dir) {
  return fs::path(nvme_dir) / "zerotrain_offload" / "params" / "rank0" / "group0_params.swp";
}

// The case as the single-process oracle sees it (parity_model.h): the same optimizer,
// weight decay, clipping and dtype.
ParityCase parity_case(const OffloadCase& c) {
  return {c.stage, c.world_size, c.accumulation, c.clip, true, false, c.dtype, "AdamW", kOffloadWeightDecay};
}

zerotrain::Config offload_config(const OffloadCase& c, const std::string& nvme_dir, bool offload) {
  std::string json = R"({"train_batch_size": 16, "gradient_accumulation_steps": )" + std::to_string(c.accumulation) +
                     ", " + parity_optimizer_keys(parity_case(c)) + R"(,
                     "zero_optimization": {"stage": )" + std::to_string(c.stage) +
                     R"(, "reduce_bucket_size": 50, "sub_group_size": 40)" +
                     (c.stage == 3 ? R"(, "stage3_param_persistence_threshold": 0)" : "");
  if (offload && c.param != "none") {
    json += R"(, "offload_param": {"device": ")" + c.param + R"(", "nvme_path": ")" + nvme_dir + R"("})";
  }
  if (offload) {
    json += R"(, "offload_optimizer": {"device": ")" + c.device + R"(", "nvme_path": ")" + nvme_dir +
            R"(", "pipeline_read": )" + (c.pipeline ? "true" : "false") + R"(, "pipeline_write": )" +
            (c.pipeline ? "true" : "false") + "}";
  }
  json += "}";
  if (c.clip > 0) json += R"(, "gradient_clipping": )" + std::to_string(c.clip);
  if (c.dtype == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (c.dtype == "fp16") json += R"(, "fp16": {"enabled": true, "loss_scale": )" + std::to_string(kParityLossScale) + "}";
  return zerotrain::Config::from_string(json + "}");
}

// Trains ParityNet (its stage-3 twin at stage 3) on steps [first, last) of the parity data,
// after loading `load_from` and before saving to `save_to` (when given); returns rank 0's
// parameters, every step's loss on rank 0 and every step's global gradient norm.
struct TrainRun {
  std::vector<torch::Tensor> params;
  std::vector<float> losses;
  std::vector<double> grad_norms;
  bool optimizer_swap_seen = false;   // rank 0's first optimizer swap file existed while the engine lived
  bool param_swap_seen = false;       // ... and its first parameter swap file
  bool save_wrote_swap = false;       // a save (Span::save_after) changed a file of rank 0's optimizer swap
};

// The latest modification time of the files in `dir` (none: the clock's minimum; its epoch is
// not 1970, and real times can be below it).
fs::file_time_type latest_write_in(const fs::path& dir) {
  fs::file_time_type latest = fs::file_time_type::min();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) latest = std::max(latest, fs::last_write_time(e.path(), ec));
  return latest;
}

struct Span {
  int first = 0;
  int last = kSteps;
  std::string load_from, save_to;
  int save_after = -1;   // a save into save_to after this step, and training goes on
};

TrainRun train(const OffloadCase& c, bool offload, const std::string& nvme_dir, const Span& span = {}) {
  const ParityData data = make_parity_data();
  ParityCase pc{c.stage, c.world_size, c.accumulation};
  auto world = comm::Communicator::make_thread_world(c.world_size);
  std::vector<std::shared_ptr<torch::nn::Module>> nets;
  std::vector<std::function<torch::Tensor(const torch::Tensor&)>> forwards;
  for (int r = 0; r < c.world_size; ++r) {
    if (c.stage == 3) {
      auto net = make_sharded_parity_net(false);
      nets.push_back(net.ptr());
      forwards.push_back([net](const torch::Tensor& x) mutable { return net->forward(x); });
    } else {
      auto net = make_parity_net(false);
      nets.push_back(net.ptr());
      forwards.push_back([net](const torch::Tensor& x) mutable { return net->forward(x); });
    }
  }
  std::vector<TrainRun> runs(c.world_size);
  std::vector<std::string> errors(c.world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto engine = zerotrain::initialize(nets[r], offload_config(c, nvme_dir, offload), {.comm = world[r]});
        if (!span.load_from.empty()) {
          EXPECT_TRUE(engine.load_checkpoint(span.load_from, "").has_value());
        }
        for (int s = span.first; s < span.last; ++s) {
          for (int k = 0; k < c.accumulation; ++k) {
            auto x = rank_rows(data.x[s], pc, r, k), y = rank_rows(data.y[s], pc, r, k);
            auto loss = torch::mse_loss(forwards[r](x.to(engine.model_dtype())).to(torch::kFloat), y);
            engine.backward(loss);
            engine.step();
            if (k == 0) runs[r].losses.push_back(loss.item<float>());
          }
          runs[r].grad_norms.push_back(engine.get_global_grad_norm().value_or(std::nan("")));
          if (s == span.save_after) {
            const fs::path swap = optimizer_swap_file(nvme_dir).parent_path();
            const auto before = latest_write_in(swap);
            // File times tick at the kernel's coarse clock (a few ms): a write by the save
            // must come at a later tick than the step's last one to show.
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            engine.save_checkpoint(span.save_to, "");
            if (r == 0) runs[r].save_wrote_swap = latest_write_in(swap) != before;
          }
        }
        if (r == 0 && offload) {
          std::error_code ec;
          runs[r].optimizer_swap_seen = fs::exists(optimizer_swap_file(nvme_dir), ec);
          runs[r].param_swap_seen = fs::exists(param_swap_file(nvme_dir), ec);
        }
        if (!span.save_to.empty() && span.save_after < 0) engine.save_checkpoint(span.save_to, "");
        zerotrain::GatheredParameters full(engine, {});   // stage 3: the parameters whole
        for (auto& p : nets[r]->parameters()) runs[r].params.push_back(p.detach().to(torch::kFloat).clone());
        full.close();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < c.world_size; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return runs[0];
}

class OffloadParity : public ::testing::TestWithParam<OffloadCase> {};

// The same order of operations: the same bits, in every dtype.
TEST_P(OffloadParity, SameBitsAsWithoutOffload) {
  const OffloadCase c = GetParam();
  const ScratchDir scratch(name_of(c));
  const fs::path& dir = scratch.path;
  const TrainRun want = train(c, false, "");
  const TrainRun got = train(c, true, dir.string());
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t i = 0; i < want.params.size(); ++i) {
    EXPECT_TRUE(torch::equal(got.params[i], want.params[i]))
        << "parameter " << i << " differs by " << (got.params[i] - want.params[i]).abs().max().item<float>();
  }
  EXPECT_EQ(got.losses, want.losses);
  EXPECT_EQ(got.grad_norms, want.grad_norms);
  // ... and those of single-process training.
  const ParityCase pc = parity_case(c);
  EXPECT_EQ(grad_norm_mismatch(got.grad_norms, parity_reference_run(pc, make_parity_data()).grad_norms,
                               grad_norm_tolerance(pc)),
            "");
  // The engine removes its swap files when it goes (they were there while it trained).
  EXPECT_EQ(got.optimizer_swap_seen, c.device == "nvme") << optimizer_swap_file(dir.string());
  EXPECT_EQ(got.param_swap_seen, c.param == "nvme") << param_swap_file(dir.string());
  std::error_code ec;
  EXPECT_FALSE(fs::exists(optimizer_swap_file(dir.string()), ec));
  EXPECT_FALSE(fs::exists(param_swap_file(dir.string()), ec));
}

std::vector<OffloadCase> cases() {
  std::vector<OffloadCase> out;
  for (const char* device : {"cpu", "nvme"}) {
    for (int stage : {1, 2, 3}) {
      for (int ws : {1, 2}) {
        for (int gas : {1, 2}) out.push_back({stage, ws, gas, "fp32", device});
      }
      out.push_back({stage, 2, 1, "bf16", device});
      out.push_back({stage, 2, 2, "fp16", device, 0.05});
    }
  }
  out.push_back({2, 2, 2, "bf16", "nvme", 0.05, /*pipeline=*/false});
  out.push_back({3, 1, 1, "bf16", "nvme", 0.0, /*pipeline=*/false});
  // Parameter offload (stage 3), alone and with the optimizer's.
  for (const char* optimizer : {"none", "cpu", "nvme"}) {
    for (int ws : {1, 2}) {
      for (int gas : {1, 2}) out.push_back({3, ws, gas, "fp32", optimizer, 0.0, true, "nvme"});
      out.push_back({3, ws, 1, "bf16", optimizer, 0.05, true, "nvme"});
    }
  }
  out.push_back({3, 2, 2, "fp16", "nvme", 0.05, true, "nvme"});
  // offload_param cpu where the model already is on the CPU: nothing to move (the shard
  // stays where it is, and no parameter swap file appears); accepted, and trains the same.
  out.push_back({3, 2, 1, "bf16", "nvme", 0.0, true, "cpu"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, OffloadParity, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name_of(info.param); });

// Checkpoints read the offloaded states from their store into the checkpoint's format and
// write loaded ones back: a run saved and resumed halfway, offloaded on either side or
// both, ends with the bits of one run without offload.
struct ResumeCase {
  OffloadCase run;
  bool offload_before = true, offload_after = true;
};

class OffloadResume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(OffloadResume, SavedAndResumedHalfwayGivesTheBitsOfOneRun) {
  const ResumeCase rc = GetParam();
  const OffloadCase& c = rc.run;
  const std::string name = name_of(c) + (rc.offload_before ? "_on" : "_off") + (rc.offload_after ? "_on" : "_off");
  const ScratchDir scratch("resume_" + name);
  const fs::path& dir = scratch.path;
  fs::create_directories(dir / "swap");   // nvme_path must exist
  const TrainRun want = train(c, false, "");
  train(c, rc.offload_before, (dir / "swap").string(), {0, kSteps / 2, "", (dir / "ckpt").string()});
  const TrainRun got = train(c, rc.offload_after, (dir / "swap").string(), {kSteps / 2, kSteps, (dir / "ckpt").string(), ""});
  EXPECT_EQ(got.grad_norms, std::vector<double>(want.grad_norms.begin() + kSteps / 2, want.grad_norms.end()));
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t i = 0; i < want.params.size(); ++i) {
    EXPECT_TRUE(torch::equal(got.params[i], want.params[i]))
        << "parameter " << i << " differs by " << (got.params[i] - want.params[i]).abs().max().item<float>();
  }
}

std::string resume_name(const ResumeCase& rc);

// A save reads the offloaded states and leaves the store as it was (nothing is written back):
// training that goes on after it, in the same engine, is the run without the save.
TEST_P(OffloadResume, TrainingGoesOnAfterASaveAsWithoutIt) {
  const ResumeCase rc = GetParam();
  if (!rc.offload_before) GTEST_SKIP() << "the save is not offloaded here (the offloaded cases cover it)";
  const OffloadCase& c = rc.run;
  const ScratchDir scratch("save_midway_" + resume_name(rc));
  fs::create_directories(scratch.path / "swap");
  const TrainRun want = train(c, true, (scratch.path / "swap").string());
  Span span;
  span.save_to = (scratch.path / "ckpt").string();
  span.save_after = kSteps / 2 - 1;
  const TrainRun got = train(c, true, (scratch.path / "swap").string(), span);
  EXPECT_EQ(got.grad_norms, want.grad_norms);
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t i = 0; i < want.params.size(); ++i) EXPECT_TRUE(torch::equal(got.params[i], want.params[i])) << i;
  EXPECT_TRUE(fs::exists(scratch.path / "ckpt" / "latest"));
  EXPECT_FALSE(got.save_wrote_swap) << "the save wrote the optimizer's swap files";
}

std::string resume_name(const ResumeCase& rc) {
  return name_of(rc.run) + (rc.offload_before ? "_saved_offloaded" : "_saved_plain") +
         (rc.offload_after ? "_loaded_offloaded" : "_loaded_plain");
}

std::vector<ResumeCase> resume_cases() {
  std::vector<ResumeCase> out;
  for (const char* device : {"cpu", "nvme"}) {
    for (int stage : {1, 2, 3}) out.push_back({{stage, 2, 1, "bf16", device}});
  }
  out.push_back({{3, 2, 2, "fp32", "nvme", 0.0, true, "nvme"}});
  out.push_back({{3, 1, 1, "bf16", "nvme", 0.0, true, "nvme"}});
  out.push_back({{2, 2, 1, "bf16", "nvme"}, true, false});
  out.push_back({{2, 2, 1, "bf16", "nvme"}, false, true});
  out.push_back({{3, 2, 1, "fp32", "nvme", 0.0, true, "nvme"}, false, true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, OffloadResume, ::testing::ValuesIn(resume_cases()),
                         [](const auto& info) { return resume_name(info.param); });

}  // namespace

namespace {

int64_t peak_rss_bytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

// A save streams NVMe-offloaded states from their store a piece at a time: the process's
// peak memory does not grow by the states it writes (12 bytes per parameter, 192 MiB here),
// where bringing them in whole grew it by about half of that. ctest runs each test in its own
// process, so the peak before the save is this model's training.
TEST(OffloadSave, StreamsNvmeStatesWithoutHoldingThem) {
  const ScratchDir scratch("streamed_save");
  fs::create_directories(scratch.path / "swap");
  torch::manual_seed(5);
  auto net = torch::nn::Sequential(torch::nn::Linear(2048, 4096), torch::nn::Linear(4096, 2048));
  const std::string config = R"({"train_batch_size": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
      "zero_optimization": {"stage": 2, "sub_group_size": 1000000,
        "offload_optimizer": {"device": "nvme", "nvme_path": ")" + (scratch.path / "swap").string() + R"("}}})";
  auto engine = zerotrain::initialize(net.ptr(), zerotrain::Config::from_string(config));
  for (int step = 0; step < 2; ++step) {
    auto x = torch::randn({2, 2048});
    engine.backward(torch::mse_loss(net->forward(x), x));
    engine.step();
  }
  const int64_t params = 2 * 2048 * 4096 + 4096 + 2048;
  const int64_t before = peak_rss_bytes();
  engine.save_checkpoint((scratch.path / "ckpt").string(), "");
  const int64_t grown = peak_rss_bytes() - before;
  EXPECT_LT(grown, params * 12 / 8) << "the save raised peak memory by " << grown / (1 << 20) << " MiB; the states are "
                                    << params * 12 / (1 << 20) << " MiB";
  // And the checkpoint holds them: it loads into a run without offload.
  torch::manual_seed(6);
  auto other = torch::nn::Sequential(torch::nn::Linear(2048, 4096), torch::nn::Linear(4096, 2048));
  auto plain = zerotrain::initialize(other.ptr(), zerotrain::Config::from_string(
      R"({"train_batch_size": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}, "zero_optimization": {"stage": 2}})"));
  ASSERT_TRUE(plain.load_checkpoint((scratch.path / "ckpt").string(), "").has_value());
  auto p = net->parameters(), q = other->parameters();
  for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::equal(p[i], q[i])) << i;
}

// A load streams them into the store the same way: a piece of a fragment at a time, through
// the store's own buffers. Bringing the states in whole, as a load once did, held all 192 MiB
// of them at once. Then training goes on from the loaded states as from the saved run.
TEST(OffloadLoad, StreamsNvmeStatesWithoutHoldingThem) {
  const ScratchDir scratch("streamed_load");
  fs::create_directories(scratch.path / "swap");
  const std::string config = R"({"train_batch_size": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
      "zero_optimization": {"stage": 2, "sub_group_size": 1000000,
        "offload_optimizer": {"device": "nvme", "nvme_path": ")" + (scratch.path / "swap").string() + R"("}}})";
  const auto model = [](int seed) {
    torch::manual_seed(seed);
    return torch::nn::Sequential(torch::nn::Linear(2048, 4096), torch::nn::Linear(4096, 2048));
  };
  const auto step = [](zerotrain::Engine& engine, torch::nn::Sequential& net, int seed) {
    torch::manual_seed(100 + seed);
    auto x = torch::randn({2, 2048});
    engine.backward(torch::mse_loss(net->forward(x), x));
    engine.step();
  };
  auto saved_net = model(5);
  std::vector<torch::Tensor> want;
  {
    auto saved = zerotrain::initialize(saved_net.ptr(), zerotrain::Config::from_string(config));
    for (int s = 0; s < 2; ++s) step(saved, saved_net, s);
    saved.save_checkpoint((scratch.path / "ckpt").string(), "");
    step(saved, saved_net, 2);
    for (const auto& p : saved_net->parameters()) want.push_back(p.detach().clone());
  }
  auto net = model(6);
  auto engine = zerotrain::initialize(net.ptr(), zerotrain::Config::from_string(config));
  const int64_t params = 2 * 2048 * 4096 + 4096 + 2048;
  const int64_t before = peak_rss_bytes();
  ASSERT_TRUE(engine.load_checkpoint((scratch.path / "ckpt").string(), "").has_value());
  const int64_t grown = peak_rss_bytes() - before;
  EXPECT_LT(grown, params * 12 / 8) << "the load raised peak memory by " << grown / (1 << 20) << " MiB; the states are "
                                    << params * 12 / (1 << 20) << " MiB";
  step(engine, net, 2);
  auto got = net->parameters();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], want[i])) << "parameter " << i;
}

// The load options on states streamed into files do what they do on states in memory: with
// load_optimizer_states false the weights load and the moments stay the engine's own; with
// load_module_strict false a parameter the checkpoint lacks keeps its weights and its moments
// start at zero. The same load into an engine without offload is the reference: one step
// after it, both have the same bits.
TEST(OffloadLoad, OptionsOnNvmeStatesAsWithoutOffload) {
  const ScratchDir scratch("streamed_load_options");
  fs::create_directories(scratch.path / "swap");
  const auto config = [&](bool nvme) {
    const std::string offload = nvme ? R"(, "offload_optimizer": {"device": "nvme", "nvme_path": ")" +
                                           (scratch.path / "swap").string() + R"("})"
                                     : "";
    return zerotrain::Config::from_string(R"({"train_batch_size": 2, "optimizer": {"type": "AdamW",
        "params": {"lr": 0.01}}, "zero_optimization": {"stage": 2, "sub_group_size": 100)" + offload + "}}");
  };
  const auto model = [](bool extra) {
    torch::manual_seed(3);
    auto net = torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::Linear(16, 8));
    if (extra) net->push_back(torch::nn::Linear(8, 8));   // not in the checkpoint
    return net;
  };
  const auto step = [](zerotrain::Engine& engine, torch::nn::Sequential& net, int seed) {
    torch::manual_seed(200 + seed);
    auto x = torch::randn({2, 8});
    engine.backward(torch::mse_loss(net->forward(x), x));
    engine.step();
  };
  {
    auto net = model(false);
    torch::manual_seed(9);
    for (auto& p : net->parameters()) p.data().normal_();   // other weights than a fresh model's
    auto engine = zerotrain::initialize(net.ptr(), config(false));
    for (int s = 0; s < 2; ++s) step(engine, net, s);
    engine.save_checkpoint((scratch.path / "ckpt").string(), "");
  }
  struct Case {
    const char* name;
    zerotrain::CheckpointLoadOptions options;
    bool extra;
  };
  zerotrain::CheckpointLoadOptions no_optimizer, not_strict;
  no_optimizer.load_optimizer_states = false;
  not_strict.load_module_strict = false;
  for (const Case& c : {Case{"load_optimizer_states false", no_optimizer, false},
                        Case{"load_module_strict false", not_strict, true}}) {
    SCOPED_TRACE(c.name);
    std::vector<std::vector<torch::Tensor>> after;
    for (bool nvme : {false, true}) {
      auto net = model(c.extra);
      auto engine = zerotrain::initialize(net.ptr(), config(nvme));
      step(engine, net, 7);   // moments of the engine's own, for a load that keeps them
      ASSERT_TRUE(engine.load_checkpoint((scratch.path / "ckpt").string(), "", c.options).has_value());
      step(engine, net, 8);
      after.emplace_back();
      for (const auto& p : net->parameters()) after.back().push_back(p.detach().clone());
    }
    ASSERT_EQ(after[0].size(), after[1].size());
    for (size_t i = 0; i < after[0].size(); ++i) EXPECT_TRUE(torch::equal(after[0][i], after[1][i])) << "parameter " << i;
  }
}

// An asynchronous save reads the streamed states into its snapshot: its rank file is the
// synchronous save's, byte for byte, from the same training.
TEST(OffloadSave, AnAsynchronousSaveOfNvmeStatesWritesTheSameFile) {
  const ScratchDir scratch("streamed_async");
  std::vector<std::string> files;
  for (const bool async : {false, true}) {
    const fs::path swap = scratch.path / (async ? "swap_async" : "swap_sync");
    fs::create_directories(swap);
    torch::manual_seed(7);
    auto net = torch::nn::Sequential(torch::nn::Linear(64, 96), torch::nn::Linear(96, 64));
    const std::string config = R"({"train_batch_size": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
        "checkpoint": {"async_save": )" + std::string(async ? "true" : "false") + R"(},
        "zero_optimization": {"stage": 2, "sub_group_size": 1000,
          "offload_optimizer": {"device": "nvme", "nvme_path": ")" + swap.string() + R"("}}})";
    auto engine = zerotrain::initialize(net.ptr(), zerotrain::Config::from_string(config));
    for (int step = 0; step < 3; ++step) {
      auto x = torch::randn({2, 64});
      engine.backward(torch::mse_loss(net->forward(x), x));
      engine.step();
    }
    const fs::path dir = scratch.path / (async ? "async" : "sync");
    engine.save_checkpoint(dir.string(), "tag");
    // Written in the background (no fallback to a synchronous save), until waited for.
    EXPECT_EQ(engine.checkpoint_in_flight().has_value(), async);
    engine.wait_for_checkpoint();
    std::ifstream in(dir / "tag" / "rank_00000.safetensors", std::ios::binary);
    ASSERT_TRUE(in) << dir;
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_EQ(files[0].size(), files[1].size());
  EXPECT_TRUE(files[0] == files[1]) << "the asynchronous save's rank file differs from the synchronous one's";
}

}  // namespace
