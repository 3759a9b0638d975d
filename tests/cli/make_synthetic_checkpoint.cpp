// Test helper for tests/cli/checkpoint_rss_test.sh: writes a checkpoint of any size without
// training and without LibTorch (tests/support/synthetic_checkpoint.h): PARAMS parameters
// of NUMEL fp32 elements each, with two optimizer states, split over WORLD rank files.
// Prints the tag directory's size and the largest parameter's fp32 bytes as JSON.
//
//   make_synthetic_checkpoint SAVE_DIR WORLD PARAMS NUMEL
#include <filesystem>
#include <iostream>
#include <string>

#include "tests/support/synthetic_checkpoint.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: make_synthetic_checkpoint SAVE_DIR WORLD PARAMS NUMEL\n";
    return 2;
  }
  zerotrain::test::SyntheticSpec spec;
  spec.world_size = std::stoi(argv[2]);
  const int params = std::stoi(argv[3]);
  const int64_t numel = std::stoll(argv[4]);
  for (int i = 0; i < params; ++i) spec.params.push_back({"layers." + std::to_string(i) + ".weight", {numel}});
  spec.buffers.push_back({"step", {}, zerotrain::checkpoint::Dtype::kI64});
  try {
    const auto manifest = zerotrain::test::write_synthetic_checkpoint(argv[1], spec);
    int64_t bytes = 0;
    for (const auto& f : manifest.files) bytes += f.bytes;
    std::cout << "{\"rank_file_bytes\": " << bytes << ", \"largest_param_bytes\": " << numel * 4 << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "make_synthetic_checkpoint: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
