// Offload under faults: a swap folder on tmpfs or where no folder can be made is refused at
// start-up with an error naming it; a swap file damaged under a running engine fails the
// step with an IoError naming the file and offset, the engine then refuses to go on, and a
// new engine resumes from the last checkpoint to the bits of an undisturbed run.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "tests/support/parity_model.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/engine.h"

namespace fs = std::filesystem;

namespace {

using namespace zerotrain::test;

zerotrain::Config nvme_config(const std::string& nvme_path) {
  return zerotrain::Config::from_string(
      R"({"train_batch_size": 16, "bf16": {"enabled": true},
          "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
          "zero_optimization": {"stage": 2, "sub_group_size": 64,
            "offload_optimizer": {"device": "nvme", "nvme_path": ")" + nvme_path + R"(", "pipeline_read": true,
                                  "pipeline_write": true}}})");
}

// nvme_path must exist (zerotrain never creates it): made here where it can be.
zerotrain::Engine start(ParityNet& net, const std::string& nvme_path) {
  std::error_code ec;
  fs::create_directories(nvme_path, ec);
  return zerotrain::initialize(net.ptr(), nvme_config(nvme_path),
                               {.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
}

void train_steps(zerotrain::Engine& engine, ParityNet& net, const ParityData& data, int first, int last) {
  for (int s = first; s < last; ++s) {
    engine.backward(torch::mse_loss(net->forward(data.x[s].to(engine.model_dtype())).to(torch::kFloat), data.y[s]));
    engine.step();
  }
}

std::vector<torch::Tensor> params_of(ParityNet& net) {
  std::vector<torch::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

struct Scratch {
  fs::path dir = fs::current_path() / ("zt_offload_fault_" + std::to_string(::getpid()));
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

TEST(OffloadFaults, SwapFolderOnTmpfsIsRefusedAtStart) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm here";
  const std::string dir = "/dev/shm/zt_offload_" + std::to_string(::getpid());
  ParityNet net = make_parity_net(false);
  try {
    start(net, dir);
    FAIL() << "an NVMe swap folder on tmpfs was accepted";
  } catch (const zerotrain::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/shm/zt_offload_"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tmpfs"), std::string::npos) << e.what();
  }
  // Refused before anything was made in it.
  EXPECT_TRUE(fs::is_empty(dir)) << "the refused swap folder was left with files in it";
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(OffloadFaults, SwapFolderUnderAFileIsRefusedAtStart) {
  Scratch scratch;
  fs::create_directories(scratch.dir);
  std::ofstream(scratch.dir / "a_file") << "not a folder";
  ParityNet net = make_parity_net(false);
  try {
    start(net, (scratch.dir / "a_file" / "swap").string());
    FAIL() << "a swap folder under a regular file was accepted";
  } catch (const zerotrain::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("a_file"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nvme_path"), std::string::npos) << e.what();
  }
}

TEST(OffloadFaults, ASwapFileTruncatedUnderTheEngineStopsTrainingAndTheCheckpointResumes) {
  Scratch scratch;
  const ParityData data = make_parity_data();
  // The undisturbed run.
  ParityNet plain = make_parity_net(false);
  std::vector<torch::Tensor> want;
  {
    auto engine = start(plain, (scratch.dir / "plain").string());
    train_steps(engine, plain, data, 0, kSteps);
    want = params_of(plain);
  }
  // Saved at step 5, then its master weights' swap file loses its tail under it.
  ParityNet net = make_parity_net(false);
  {
    auto engine = start(net, (scratch.dir / "first").string());
    train_steps(engine, net, data, 0, 5);
    engine.save_checkpoint((scratch.dir / "ckpt").string(), "");
    train_steps(engine, net, data, 5, 7);
    const fs::path master = scratch.dir / "first" / "zerotrain_offload" / "optimizer" / "rank0" / "group0_master.swp";
    ASSERT_TRUE(fs::exists(master));
    fs::resize_file(master, 4096);
    engine.backward(torch::mse_loss(net->forward(data.x[7].to(engine.model_dtype())).to(torch::kFloat), data.y[7]));
    try {
      engine.step();
      FAIL() << "a step over a truncated swap file succeeded";
    } catch (const zerotrain::IoError& e) {
      EXPECT_NE(std::string(e.what()).find("group0_master.swp"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("short read"), std::string::npos) << e.what();
    }
    // The weights are a mix of two steps: the engine says so rather than train on.
    try {
      engine.step();
      FAIL() << "the engine went on after a failed offloaded step";
    } catch (const zerotrain::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("failed halfway"), std::string::npos) << e.what();
    }
  }
  // A new engine resumes from the checkpoint and reaches the undisturbed run's bits.
  ParityNet resumed = make_parity_net(false);
  auto engine = start(resumed, (scratch.dir / "second").string());
  ASSERT_TRUE(engine.load_checkpoint((scratch.dir / "ckpt").string(), "").has_value());
  train_steps(engine, resumed, data, 5, kSteps);
  const auto got = params_of(resumed);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(torch::equal(got[i], want[i])) << "parameter " << i;
}

}  // namespace
