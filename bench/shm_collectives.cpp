// The shared-memory LocalGroup's collectives against this host's single-thread memcpy, side
// by side in one run: for each message size, rounds alternate between a memcpy of the same
// bytes (member 0 alone, the others wait) and the collective on every member; medians.
//
//   shm_collectives [--nproc N] [--slot_bytes B] [--min_bytes B] [--max_bytes B] [--rounds R]
//
// Bus bandwidth as NCCL's tests define it (bytes = the whole buffer): all_reduce
// algbw * 2(n-1)/n, reduce_scatter and all_gather algbw * (n-1)/n. The ratio column is
// busbw / memcpy bandwidth of the same bytes. best_us is the fastest round (the least
// disturbed by other processes); cpu_us is member 0's CPU time per operation, which falls
// below time_us when it waited for a peer that another process had displaced.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "zerotrain/comm/shm/local_group.h"
#include "zerotrain/core/error.h"

namespace {

namespace fs = std::filesystem;
namespace shm = zerotrain::comm::shm;
using Clock = std::chrono::steady_clock;

shm::Exchange file_exchange(const fs::path& dir) {
  shm::Exchange exchange;
  exchange.set = [dir](const std::string& key, const std::string& value) {
    const fs::path tmp = dir / (key + ".tmp");
    std::ofstream(tmp) << value;
    fs::rename(tmp, dir / key);
  };
  exchange.get = [dir](const std::string& key) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    for (;;) {
      std::ifstream in(dir / key);
      if (in) return std::string(std::istreambuf_iterator<char>(in), {});
      if (Clock::now() >= deadline) throw zerotrain::TimeoutError("no key " + key);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  return exchange;
}

template <class T>
struct AlignedBuffer {
  AlignedBuffer(int64_t n, T value) : bytes(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)) {
    bytes = (bytes + 4095) / 4096 * 4096;
    p = static_cast<T*>(std::aligned_alloc(4096, bytes));
    std::fill(p, p + n, value);
  }
  ~AlignedBuffer() { std::free(p); }
  T* data() { return p; }
  size_t bytes;
  T* p;
};

// This process's CPU time: far below the wall time when a member waited for a descheduled peer.
double cpu_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Iterations so that one timed batch moves about 64 MiB (at least 1, at most 2000).
int iterations_for(int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>((int64_t{64} << 20) / std::max<int64_t>(bytes, 1), 1, 2000));
}

struct Options {
  int nproc = 2;
  int64_t slot_bytes = int64_t{1} << 20;
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t{64} << 20;
  int rounds = 7;
};

void run_member(const fs::path& dir, int rank, const Options& options) {
  shm::LocalGroupOptions group_options;
  group_options.slot_bytes = options.slot_bytes;
  group_options.timeout = std::chrono::seconds(120);
  auto group = shm::LocalGroup::join(file_exchange(dir), rank, options.nproc, group_options);
  const int n = options.nproc;
  if (rank == 0) {
    std::printf("# %d members, slot_bytes %lld; times are medians of %d rounds\n", n,
                static_cast<long long>(options.slot_bytes), options.rounds);
    std::printf("%-15s %10s %10s %10s %10s %10s %10s %10s %7s\n", "op", "bytes", "time_us", "best_us", "cpu_us",
                "algbw_GBs", "busbw_GBs", "memcpy_GBs", "ratio");
  }
  const char* ops[] = {"all_reduce", "reduce_scatter", "all_gather"};
  for (int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 4) {
    const int64_t numel = bytes / 4;   // float32
    // Page-aligned buffers (as large tensors are): memcpy's baseline is its good case.
    AlignedBuffer<float> data(numel, 1.0f), out(numel, 0.0f);
    AlignedBuffer<char> copy_from(bytes, 1), copy_to(bytes, 0);
    for (int op = 0; op < 3; ++op) {
      const int64_t chunk = numel / n;
      auto once = [&] {
        if (op == 0) group->all_reduce(data.data(), numel, shm::Dtype::kFloat32, shm::Op::kSum);
        if (op == 1) group->reduce_scatter(data.data(), out.data(), chunk, shm::Dtype::kFloat32, shm::Op::kSum);
        if (op == 2) group->all_gather(data.data(), out.data(), chunk * 4);
      };
      const int iterations = iterations_for(bytes);
      std::vector<double> collective_s, memcpy_s, cpu_s;
      for (int i = 0; i < 2; ++i) once();   // warm up
      for (int round = 0; round < options.rounds; ++round) {
        group->barrier();
        if (rank == 0) {
          const auto start = Clock::now();
          for (int i = 0; i < iterations; ++i) {
            std::memcpy(copy_to.data(), copy_from.data(), static_cast<size_t>(bytes));
            asm volatile("" : : "r"(copy_to.data()) : "memory");
          }
          memcpy_s.push_back(std::chrono::duration<double>(Clock::now() - start).count() / iterations);
        }
        group->barrier();
        const double cpu_start = cpu_seconds();
        const auto start = Clock::now();
        for (int i = 0; i < iterations; ++i) once();
        collective_s.push_back(std::chrono::duration<double>(Clock::now() - start).count() / iterations);
        cpu_s.push_back((cpu_seconds() - cpu_start) / iterations);
      }
      if (rank == 0) {
        const double t = median(collective_s);
        const double algbw = static_cast<double>(bytes) / t / 1e9;
        const double factor = op == 0 ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
        const double memcpy_bw = static_cast<double>(bytes) / median(memcpy_s) / 1e9;
        const double best = *std::min_element(collective_s.begin(), collective_s.end());
        std::printf("%-15s %10lld %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %7.2f\n", ops[op],
                    static_cast<long long>(bytes), t * 1e6, best * 1e6, median(cpu_s) * 1e6, algbw, algbw * factor,
                    memcpy_bw, algbw * factor / memcpy_bw);
        std::fflush(stdout);
      }
    }
  }
  group->barrier();
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long value = std::atoll(argv[i + 1]);
    if (flag == "--nproc") options.nproc = static_cast<int>(value);
    else if (flag == "--slot_bytes") options.slot_bytes = value;
    else if (flag == "--min_bytes") options.min_bytes = value;
    else if (flag == "--max_bytes") options.max_bytes = value;
    else if (flag == "--rounds") options.rounds = static_cast<int>(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  char pattern[] = "/tmp/zt-shm-bench-XXXXXX";
  const fs::path dir = ::mkdtemp(pattern);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < options.nproc; ++rank) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      try {
        run_member(dir, rank, options);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "member %d: %s\n", rank, e.what());
        ::_exit(1);
      }
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (const pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  fs::remove_all(dir);
  return failed == 0 ? 0 : 1;
}
