// The engine's own loop, as a DeepSpeed script has it (docs/engine.md): a small model, a
// ds_config, zerotrain::initialize, then backward and step; a checkpoint at the end. Every
// rank runs it; under a launcher the ranks find each other from the environment.
//
//   build/tools/zerotrain launch --nproc_per_node 2 -- build-examples/engine_loop examples/ds_config_zero2.json
//
// The data is synthetic and the same on every run: y = x · w_true plus a little noise, so the
// loss falls (rank 0 prints its first and last). Built against an installed zerotrain (examples/CMakeLists.txt).
#include <torch/torch.h>

#include <cstdio>
#include <exception>
#include <string>

#include <zerotrain/zerotrain.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DS_CONFIG [CHECKPOINT_DIR]\n", argv[0]);
    return 2;
  }
  try {
    zerotrain::Config config = zerotrain::Config::from_file(argv[1]);
    const auto where = zerotrain::comm::rendezvous_from_env();
    auto comm = zerotrain::comm::Communicator::init(where, zerotrain::comm::options_from_config(config));

    torch::manual_seed(0);   // every rank builds the same model
    auto model = torch::nn::Sequential(torch::nn::Linear(16, 32), torch::nn::Tanh(), torch::nn::Linear(32, 1));
    auto engine = zerotrain::initialize(model.ptr(), config, {.comm = comm});

    const int64_t micro_batch = engine.config().train_micro_batch_size_per_gpu.value.value_or(8);
    torch::manual_seed(1);
    const torch::Tensor w_true = torch::randn({16, 1});
    double first_loss = 0, last_loss = 0;
    for (int64_t step = 0; step < 40; ++step) {
      // Each rank its own slice of the step's batch, as a distributed sampler gives it.
      torch::manual_seed(100 + step * comm.world_size() + comm.rank());
      const torch::Tensor x = torch::randn({micro_batch, 16});
      const torch::Tensor y = x.matmul(w_true) + 0.01 * torch::randn({micro_batch, 1});
      // The model is in the config's dtype (bf16, fp16 or fp32); the loss is taken in fp32.
      const torch::Tensor out = model->forward(x.to(engine.model_dtype()));
      const torch::Tensor loss = torch::mse_loss(out.to(torch::kFloat), y);
      engine.backward(loss);
      engine.step();
      const double value = loss.item<double>();
      if (step == 0) first_loss = value;
      last_loss = value;
    }
    if (argc > 2) engine.save_checkpoint(argv[2]);
    if (comm.rank() == 0) {
      std::printf("engine_loop: zerotrain %s, ZeRO stage %d, world size %d, loss %.4f -> %.4f\n", ZEROTRAIN_VERSION,
                  static_cast<int>(engine.config().zero_optimization.stage), comm.world_size(), first_loss, last_loss);
    }
    return 0;
  } catch (const zerotrain::Error& e) {
    std::fprintf(stderr, "engine_loop: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_loop: %s\n", e.what());
    return 1;
  }
}
