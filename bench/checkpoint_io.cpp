// Checkpoint save and load throughput against the disk's raw sequential bandwidth, measured
// side by side in one run (docs/benchmarks.md, "Checkpoints"). Each round, interleaved:
//   raw write  - every rank writes as many bytes as its checkpoint file, write() + fsync, the
//                same way the engine writes (buffered, then flushed);
//   save       - Engine::save_checkpoint of a trained MLP (fp32 master + Adam moments);
//   raw read   - every rank reads its raw file back, after the file's pages are evicted;
//   load       - Engine::load_checkpoint, after the checkpoint's pages are evicted.
// Prints one JSON line per round with the four times and the bytes; bench/checkpoint_bench.py
// turns them into ratios (ours / raw throughput, the median over rounds).
//
//   checkpoint_io --dir DIR [--layers 8] [--width 4096] [--world 2] [--stage 1] [--rounds 3]
//   checkpoint_io --save_to DIR ...   saves one checkpoint of the model there and stops (for
//                                     bench/checkpoint_bench.py's consolidation comparison)
#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/engine/engine.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string dir, save_to;
  int layers = 8, width = 4096, world = 2, stage = 1, rounds = 3;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Drops a file's pages from the page cache (they are clean after fsync), so the next read
// comes from the disk.
void evict(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void evict_tree(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) evict(e.path());
  }
}

void raw_write(const fs::path& file, int64_t bytes) {
  std::vector<char> block(8 << 20, 1);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (int64_t left = bytes; left > 0;) {
    const ssize_t n = ::write(fd, block.data(), static_cast<size_t>(std::min<int64_t>(left, block.size())));
    if (n <= 0) throw std::runtime_error("raw write failed");
    left -= n;
  }
  ::fsync(fd);
  ::close(fd);
}

void raw_read(const fs::path& file) {
  std::vector<char> block(8 << 20);
  const int fd = ::open(file.c_str(), O_RDONLY);
  for (int64_t at = 0;;) {
    const ssize_t n = ::pread(fd, block.data(), block.size(), at);
    if (n <= 0) break;
    at += n;
  }
  ::close(fd);
}

template <class F>
double on_ranks(int world, F fn) {
  std::vector<std::thread> threads;
  const auto t = Clock::now();
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { fn(r); });
  for (auto& th : threads) th.join();
  return seconds_since(t);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--dir") a.dir = v;
    else if (k == "--save_to") a.save_to = v;
    else if (k == "--layers") a.layers = std::stoi(v);
    else if (k == "--width") a.width = std::stoi(v);
    else if (k == "--world") a.world = std::stoi(v);
    else if (k == "--stage") a.stage = std::stoi(v);
    else if (k == "--rounds") a.rounds = std::stoi(v);
    else { std::cerr << "unknown flag " << k << "\n"; return 2; }
  }
  if (a.dir.empty() == a.save_to.empty()) { std::cerr << "give --dir or --save_to\n"; return 2; }
  torch::set_num_threads(1);
  const fs::path dir(a.dir), ckpt = dir / "ckpt", raw = dir / "raw";
  auto comms = zerotrain::comm::Communicator::make_thread_world(a.world);
  const auto config = zerotrain::Config::from_string(
      R"({"train_batch_size": )" + std::to_string(2 * a.world) +
      R"(, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "zero_optimization": {"stage": )" +
      std::to_string(a.stage) + "}}");
  std::vector<std::optional<zerotrain::Engine>> engines(a.world);
  std::vector<torch::nn::Sequential> models(a.world);
  on_ranks(a.world, [&](int r) {
    torch::manual_seed(1);
    torch::nn::Sequential m;
    for (int l = 0; l < a.layers; ++l) m->push_back(torch::nn::Linear(a.width, a.width));
    models[r] = m;
    engines[r].emplace(zerotrain::initialize(m.ptr(), config, {.comm = comms[r]}));
    auto loss = m->forward(torch::randn({2, a.width})).square().mean();   // one step: Adam's moments exist
    engines[r]->backward(loss);
    engines[r]->step();
  });
  if (!a.save_to.empty()) {
    on_ranks(a.world, [&](int r) { engines[r]->save_checkpoint(a.save_to); });
    return 0;
  }
  fs::create_directories(raw);
  // Rank files are about equal; the first round measures them, odd rounds reuse the size.
  int64_t expected_bytes = 0;
  for (int round = 0; round < a.rounds; ++round) {
    // Last round's files go before anything is timed: freeing blocks on a disk mounted with
    // `discard` trims them, which would slow whichever write came next.
    fs::remove_all(ckpt);
    for (int r = 0; r < a.world; ++r) fs::remove(raw / std::to_string(r));
    ::sync();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    // Odd rounds write the raw files first, so neither side always follows the other.
    std::vector<int64_t> sizes(a.world, expected_bytes);
    double write_s = 0;
    if (round % 2 == 1) write_s = on_ranks(a.world, [&](int r) { raw_write(raw / std::to_string(r), sizes[r]); });
    const double save_s = on_ranks(a.world, [&](int r) { engines[r]->save_checkpoint(ckpt.string(), "bench"); });
    int64_t total = 0;
    for (int r = 0; r < a.world; ++r) {
      char name[64];
      std::snprintf(name, sizeof name, "rank_%05d.safetensors", r);
      sizes[r] = static_cast<int64_t>(fs::file_size(ckpt / "bench" / name));
      total += sizes[r];
    }
    if (round % 2 == 0) write_s = on_ranks(a.world, [&](int r) { raw_write(raw / std::to_string(r), sizes[r]); });
    expected_bytes = sizes[0];
    evict_tree(raw);
    const double read_s = on_ranks(a.world, [&](int r) { raw_read(raw / std::to_string(r)); });
    evict_tree(ckpt);
    const double load_s = on_ranks(a.world, [&](int r) { engines[r]->load_checkpoint(ckpt.string(), "bench"); });
    std::cout << "{\"round\": " << round << ", \"bytes\": " << total << ", \"save_s\": " << save_s
              << ", \"raw_write_s\": " << write_s << ", \"load_s\": " << load_s << ", \"raw_read_s\": " << read_s
              << "}" << std::endl;
  }
  fs::remove_all(dir);
  return 0;
}
