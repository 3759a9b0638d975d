// Test helper for tests/cli/checkpoint_tools_test.sh: trains the parity model
// (tests/support/stage3_models.h, fc1's bias frozen) for 3 steps on WORLD ranks (threads)
// at ZeRO stage STAGE in DTYPE, saves a checkpoint into SAVE_DIR (tag global_step3, and
// `latest`), and writes SAVE_DIR/expected.json: the model's weights gathered on rank 0
// after the save, {"<name>": {"shape": [...], "values": [...]}} in fp32, which at DTYPE
// fp32 are the fp32 master weights the consolidation must reproduce.
//
//   make_checkpoint SAVE_DIR WORLD STAGE DTYPE
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tests/support/stage3_models.h"
#include "tests/support/thread_ranks.h"
#include "zerotrain/engine/engine.h"

int main(int argc, char** argv) {
  using namespace zerotrain;
  if (argc != 5) {
    std::cerr << "usage: make_checkpoint SAVE_DIR WORLD STAGE DTYPE\n";
    return 2;
  }
  const std::string dir = argv[1], dtype = argv[4];
  const int world = std::stoi(argv[2]), stage = std::stoi(argv[3]);
  std::string json = R"({"train_batch_size": 24, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 6, "warmup_max_lr": 0.01}},
      "zero_optimization": {"stage": )" + std::to_string(stage) + R"(, "stage3_param_persistence_threshold": 0})";
  if (dtype == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (dtype == "fp16") json += R"(, "fp16": {"enabled": true, "initial_scale_power": 8})";
  const Config config = Config::from_string(json + "}");

  torch::manual_seed(3);
  const auto x = torch::randn({3, 24, 8}), y = torch::randn({3, 24, 4});
  nlohmann::json expected = nlohmann::json::object();
  const auto errors = test::run_ranks(world, [&](int rank, comm::Communicator& comm) {
    test::ShardedParityNet net = test::make_sharded_parity_net(/*freeze_fc1_bias=*/true);
    Engine engine = initialize(net.ptr(), config, {.comm = comm});
    const int64_t micro = 24 / world;
    for (int step = 0; step < 3; ++step) {
      const auto input = x[step].narrow(0, rank * micro, micro).to(engine.model_dtype());
      engine.backward(torch::mse_loss(net->forward(input).to(torch::kFloat), y[step].narrow(0, rank * micro, micro)));
      engine.step();
    }
    engine.save_checkpoint(dir);
    for (auto& [name, t] : engine.consolidated_16bit_state_dict()) {
      if (rank != 0) continue;
      const auto values = t.to(torch::kFloat).contiguous();
      expected[name] = {{"shape", values.sizes().vec()},
                        {"values", std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel())}};
    }
  });
  for (int r = 0; r < world; ++r) {
    if (!errors[static_cast<size_t>(r)].empty()) {
      std::cerr << "rank " << r << ": " << errors[static_cast<size_t>(r)] << "\n";
      return 1;
    }
  }
  std::ofstream(dir + "/expected.json") << expected.dump() << "\n";
  return 0;
}
