// The training time a checkpoint save costs, synchronous against checkpoint.async_save
// (docs/benchmarks.md, "Checkpoints"). One process per mode; bench/checkpoint_async.py runs
// the modes interleaved over rounds and takes the differences.
//
//   checkpoint_async --mode none|sync|async --dir DIR [--layers 8] [--width 4096] [--world 1]
//                    [--stage 1] [--steps 12] [--save_after 2]
//
// Trains an MLP (ranks as threads of one process) for --steps optimizer steps twice: a warm
// pass, then the timed one. Each pass saves after step --save_after (mode sync or async) and
// ends when the checkpoint is published (async: wait_for_checkpoint() after the last step,
// counted). Prints one JSON line: the timed pass's seconds, the seconds the save call
// blocked (rank 0), and the checkpoint's bytes. The warm pass leaves the snapshot buffer and
// the allocator as a long run has them.
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/engine/engine.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string mode, dir;
  int layers = 8, width = 4096, world = 1, stage = 1, steps = 12, save_after = 2;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

template <class F>
void on_ranks(int world, F fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { fn(r); });
  for (auto& th : threads) th.join();
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--mode") a.mode = v;
    else if (k == "--dir") a.dir = v;
    else if (k == "--layers") a.layers = std::stoi(v);
    else if (k == "--width") a.width = std::stoi(v);
    else if (k == "--world") a.world = std::stoi(v);
    else if (k == "--stage") a.stage = std::stoi(v);
    else if (k == "--steps") a.steps = std::stoi(v);
    else if (k == "--save_after") a.save_after = std::stoi(v);
    else { std::cerr << "unknown flag " << k << "\n"; return 2; }
  }
  if (a.dir.empty() || (a.mode != "none" && a.mode != "sync" && a.mode != "async")) {
    std::cerr << "give --mode none|sync|async and --dir DIR\n";
    return 2;
  }
  // The two cores shared by the ranks' compute; the background writer competes with them.
  torch::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / a.world));
  auto comms = zerotrain::comm::Communicator::make_thread_world(a.world);
  const auto config = zerotrain::Config::from_string(
      R"({"train_batch_size": )" + std::to_string(8 * a.world) +
      R"(, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "zero_optimization": {"stage": )" +
      std::to_string(a.stage) + R"(}, "checkpoint": {"async_save": )" + (a.mode == "async" ? "true" : "false") + "}}");
  std::vector<std::optional<zerotrain::Engine>> engines(a.world);
  std::vector<torch::nn::Sequential> models(a.world);
  on_ranks(a.world, [&](int r) {
    torch::manual_seed(1);
    torch::nn::Sequential m;
    for (int l = 0; l < a.layers; ++l) m->push_back(torch::nn::Linear(a.width, a.width));
    models[r] = m;
    engines[r].emplace(zerotrain::initialize(m.ptr(), config, {.comm = comms[r]}));
  });
  double blocked_s = 0, pass_s = 0;
  int64_t bytes = 0;
  for (int pass = 0; pass < 2; ++pass) {
    fs::remove_all(a.dir);
    ::sync();
    const auto started = Clock::now();
    on_ranks(a.world, [&](int r) {
      zerotrain::Engine& e = *engines[r];
      const auto x = torch::randn({8, a.width});
      for (int step = 1; step <= a.steps; ++step) {
        e.backward(models[r]->forward(x).square().mean());
        e.step();
        if (step == a.save_after && a.mode != "none") {
          const auto t = Clock::now();
          e.save_checkpoint(a.dir, "bench");
          if (r == 0) blocked_s = seconds_since(t);
        }
      }
      e.wait_for_checkpoint();
    });
    pass_s = seconds_since(started);
  }
  if (a.mode != "none") {
    for (const auto& f : fs::directory_iterator(fs::path(a.dir) / "bench")) bytes += static_cast<int64_t>(f.file_size());
  }
  fs::remove_all(a.dir);
  std::cout << "{\"mode\": \"" << a.mode << "\", \"pass_s\": " << pass_s << ", \"blocked_s\": " << blocked_s
            << ", \"bytes\": " << bytes << "}" << std::endl;
  return 0;
}
