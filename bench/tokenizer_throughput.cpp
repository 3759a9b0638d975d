// tokenizer_throughput: zerotrain's tokenizer.json encode on one core, line by line, as a user
// tokenising a corpus would call it. bench/tokenizer_throughput.py runs it against the
// tokenizers package on the same text and tokenizer (docs/benchmarks.md, "Tokenizer throughput").
//
//   tokenizer_throughput DIR TEXT_FILE
//
// Prints one JSON line: {"mb_per_s": text megabytes (10^6 bytes) per second, "tokens": ids made,
// "bytes": text bytes, "seconds": encode time}. The tokenizer is loaded fresh, so the word
// cache starts empty, and loading is not timed.
#include "zerotrain/core/error.h"
#include "zerotrain/text/tokenizer.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: tokenizer_throughput DIR TEXT_FILE\n";
    return 2;
  }
  try {
    const auto tokenizer = zerotrain::text::Tokenizer::from_folder(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) {
      std::cerr << argv[2] << ": cannot be read\n";
      return 2;
    }
    std::vector<std::string> lines;
    size_t text_bytes = 0;
    for (std::string line; std::getline(in, line);) {
      text_bytes += line.size();
      lines.push_back(std::move(line));
    }
    size_t tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    for (const std::string& line : lines) tokens += tokenizer.encode(line).size();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "{\"mb_per_s\": " << text_bytes / seconds / 1e6 << ", \"tokens\": " << tokens
              << ", \"bytes\": " << text_bytes << ", \"seconds\": " << seconds << "}\n";
    return 0;
  } catch (const zerotrain::Error& e) {
    std::cerr << e.what() << "\n";
    return e.exit_code();
  }
}
