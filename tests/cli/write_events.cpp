// Writes a TensorBoard event file with zerotrain's writer for tests/cli/tensorboard_read_test.py,
// which reads it with TensorBoard's own reader. What was written goes to expected.json beside
// it: {"<tag>": [[step, value], ...]}.
//
//   write_events OUT_DIR
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/monitor/monitor.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_events OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    auto writer = zerotrain::monitor::make_tensorboard_writer(dir);
    std::map<std::string, std::vector<std::pair<int64_t, double>>> written;
    auto write = [&](int64_t step, const std::vector<zerotrain::monitor::Scalar>& scalars) {
      writer->write(step, scalars);
      for (const auto& s : scalars) written[s.tag].emplace_back(step, s.value);
    };
    // 300 steps: multi-byte step varints; values of many magnitudes and both signs.
    for (int64_t step = 0; step < 300; ++step) {
      const double x = static_cast<double>(step);
      write(step, {{"train/loss", 5.0 * std::exp(-x / 50.0)},
                   {"train/learning_rate", 1e-4 * std::min(1.0, (x + 1) / 30.0)},
                   {"train/grad_norm", std::sin(x) * 1e3}});
      if (step % 100 == 99) write(step, {{"eval/loss", 2.0 - x / 300.0}, {"eval/accuracy", x / 400.0}});
    }
    const std::string long_tag = "eval/" + std::string(200, 'a');   // a two-byte length varint
    write(int64_t{1} << 40, {{long_tag, -1.25e-30}});
    writer->flush();

    nlohmann::json expected = nlohmann::json::object();
    for (const auto& [tag, points] : written) {
      for (const auto& [step, value] : points) expected[tag].push_back({step, value});
    }
    std::ofstream(dir + "/expected.json") << expected.dump();
  } catch (const zerotrain::Error& e) {
    std::fprintf(stderr, "write_events: %s\n", e.what());
    return 1;
  }
  return 0;
}
