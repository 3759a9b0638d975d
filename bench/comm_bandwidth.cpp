// Bus bandwidth of all_reduce, reduce_scatter and all_gather through comm::Communicator,
// from 1 KiB to 256 MiB of fp32, in NCCL-tests' terms:
//   algbw = bytes / time, busbw = algbw * 2(n-1)/n (all_reduce) or (n-1)/n (the others),
// where bytes is the full buffer (the all_reduce tensor, the reduce_scatter input, the
// all_gather output). Rank 0 prints one JSON line per measurement. With --memcpy it
// measures this host's single-thread memcpy bandwidth instead (no communicator): the
// physical limit of a same-host transfer. bench/comm_bandwidth.py runs every backend and
// world size side by side and writes the table in docs/benchmarks.md.
//
//   comm_bandwidth [--min_bytes N] [--max_bytes N] [--min_time_s S] [--memcpy]
#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"

namespace comm = zerotrain::comm;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  int64_t min_bytes = 1 << 10;
  int64_t max_bytes = int64_t{256} << 20;
  double min_time_s = 0.3;
  bool memcpy = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&] { return std::string(argv[++i]); };
    if (k == "--min_bytes") a.min_bytes = std::stoll(next());
    else if (k == "--max_bytes") a.max_bytes = std::stoll(next());
    else if (k == "--min_time_s") a.min_time_s = std::stod(next());
    else if (k == "--memcpy") a.memcpy = true;
    else throw std::invalid_argument("unknown argument " + k);
  }
  return a;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void print(const std::string& backend, int ws, const std::string& op, int64_t nbytes, double time_s, double bus_factor) {
  const double algbw = static_cast<double>(nbytes) / time_s / 1e9;
  std::cout << "{\"backend\": \"" << backend << "\", \"world_size\": " << ws << ", \"op\": \"" << op
            << "\", \"nbytes\": " << nbytes << ", \"time_s\": " << time_s << ", \"algbw_GBps\": " << algbw
            << ", \"busbw_GBps\": " << algbw * bus_factor << "}" << std::endl;
}

void bench_memcpy(const Args& a) {
  for (int64_t nbytes = a.min_bytes; nbytes <= a.max_bytes; nbytes *= 4) {
    // Both page-aligned: glibc's memcpy on some CPUs runs at a tenth of its speed when the
    // destination sits just past the source modulo 4 KiB (4K aliasing), which two vectors
    // allocated back to back can do, and which would understate the limit.
    const auto page_aligned = [](int64_t n) {
      return std::unique_ptr<char, decltype(&std::free)>(
          static_cast<char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096)), &std::free);
    };
    auto src_buffer = page_aligned(nbytes), dst_buffer = page_aligned(nbytes);
    char* const src = src_buffer.get();
    char* const dst = dst_buffer.get();
    std::memset(src, 1, nbytes);
    std::memcpy(dst, src, nbytes);   // touch the pages
    int iters = 0;
    const auto start = Clock::now();
    do {
      std::memcpy(dst, src, nbytes);
      ++iters;
    } while (seconds_since(start) < a.min_time_s);
    print("memcpy", 1, "memcpy", nbytes, seconds_since(start) / iters, 1.0);
  }
}

void bench_collectives(const Args& a) {
  auto c = comm::Communicator::init();
  const int ws = c.world_size();
  const std::string backend = comm::to_string(c.backend());
  for (const std::string op : {"all_reduce", "reduce_scatter", "all_gather"}) {
    for (int64_t nbytes = a.min_bytes; nbytes <= a.max_bytes; nbytes *= 4) {
      const int64_t numel = nbytes / 4;
      at::Tensor full = at::ones({numel}, at::kFloat);
      at::Tensor chunk = at::empty({comm::chunk_range(numel, ws, c.rank()).numel}, at::kFloat);
      auto run = [&] {
        if (op == "all_reduce") c.all_reduce(full).wait();
        else if (op == "reduce_scatter") c.reduce_scatter(full, chunk).wait();
        else c.all_gather(chunk, full).wait();
      };
      run();   // warm up: connections, buffers, page faults
      // Every rank must run the same number of iterations: decide from the slowest rank.
      c.barrier().wait();
      auto start = Clock::now();
      run();
      at::Tensor probe = at::full({1}, seconds_since(start), at::kDouble);
      c.all_reduce(probe, comm::ReduceOp::kMax).wait();
      // Small messages repeat often enough to time their latency, large ones a few times.
      const int iters = std::max(1, std::min(20000, static_cast<int>(a.min_time_s / probe.item<double>())));
      c.barrier().wait();
      start = Clock::now();
      for (int i = 0; i < iters; ++i) run();
      at::Tensor elapsed = at::full({1}, seconds_since(start), at::kDouble);
      c.all_reduce(elapsed, comm::ReduceOp::kMax).wait();
      const double factor = op == "all_reduce" ? 2.0 * (ws - 1) / ws : static_cast<double>(ws - 1) / ws;
      if (c.rank() == 0) print(backend, ws, op, nbytes, elapsed.item<double>() / iters, factor);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (a.memcpy) {
      bench_memcpy(a);
    } else {
      bench_collectives(a);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "comm_bandwidth: " << e.what() << std::endl;
    return 1;
  }
}
