// `zerotrain io-bench` (docs/io.md): DeepSpeed's ds_nvme_tune / ds_io for our IO engines.
// Sweeps block size, queue depth and threads over one O_DIRECT file, beside a plain
// single-threaded 1 MiB pwrite/pread loop (what `dd oflag=direct bs=1M` does), and prints
// the `aio` block of the best combination.
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/output_path.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/io/io_engine.h"

namespace zerotrain::tools {
namespace {

using io::EngineKind;

struct IoBenchOptions {
  std::string path;
  int64_t size_mib = 1024;
  std::string engine = "auto";
  std::string block_sizes = "256K,1M,4M";
  std::string queue_depths = "4,8,16,32";
  std::string threads = "1,2";
  int rounds = 3;
  bool read_only = false;
  bool write_only = false;
};

struct Combo {
  io::AioOptions options;
  std::vector<double> write_gbps, read_gbps;
};

// The raw baseline: one thread, blocking 1 MiB O_DIRECT transfers, as dd does.
constexpr int64_t kRawBlockBytes = 1 << 20;

std::vector<std::string> split_list(const std::string& text, const char* flag) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, comma - start);
    if (!item.empty()) items.push_back(item);
    start = comma + 1;
  }
  ZT_CHECK(!items.empty(), UsageError, flag, ": give a comma-separated list, e.g. ", flag, " 1M,4M");
  return items;
}

std::vector<int64_t> parse_counts(const std::string& text, const char* flag, int64_t max) {
  std::vector<int64_t> out;
  for (const auto& item : split_list(text, flag)) {
    const double v = strings::parse_count(item, flag);
    ZT_CHECK(v >= 1 && v <= static_cast<double>(max) && v == static_cast<double>(static_cast<int64_t>(v)), UsageError,
             flag, ": ", item, " must be a whole number between 1 and ", max);
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

std::vector<int64_t> parse_block_sizes(const std::string& text) {
  std::vector<int64_t> out;
  for (const auto& item : split_list(text, "--block_sizes")) {
    const int64_t b = strings::parse_bytes(item, "--block_sizes");
    ZT_CHECK(b >= io::kAlignmentBytes && b % io::kAlignmentBytes == 0 && b <= (int64_t{1} << 30), UsageError,
             "--block_sizes: ", item, " must be a multiple of 4K between 4K and 1G (O_DIRECT)");
    out.push_back(b);
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string size_text(int64_t bytes) {
  if (bytes % (int64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "M";
  return std::to_string(bytes >> 10) + "K";
}

template <class Fn>
double gbps(int64_t bytes, Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const std::chrono::duration<double> s = std::chrono::steady_clock::now() - t0;
  return static_cast<double>(bytes) / 1e9 / s.count();
}

void raw_transfer(const io::DirectFile& file, char* buffer, int64_t nbytes, bool write) {
  for (int64_t off = 0; off < nbytes;) {
    const size_t len = static_cast<size_t>(std::min(kRawBlockBytes, nbytes - off));
    const ssize_t n = write ? ::pwrite(file.fd(), buffer + off, len, off) : ::pread(file.fd(), buffer + off, len, off);
    if (n < 0 && errno == EINTR) continue;
    ZT_CHECK(n > 0, IoError, "raw O_DIRECT ", write ? "write" : "read", " of ", len, " bytes at offset ", off, " of ",
             file.path(), " failed: ", n < 0 ? std::strerror(errno) : "end of file");
    off += n;
  }
}

// The test file's path for the signal handler: a fixed buffer, as a handler may only call
// async-signal-safe functions (unlink, raise).
char g_test_file[PATH_MAX] = "";

// Removes the test file, then dies of the signal as it would have (exit status 128 + N for
// the shell): the handler is reset to the default by SA_RESETHAND, and the signal raised
// again is delivered when the handler returns.
extern "C" void remove_test_file_and_die(int signal_number) {
  ::unlink(g_test_file);
  ::raise(signal_number);
}

// Removes the test file however the run ends: a return or an exception (the destructor), or
// an interrupt, a termination or a hang-up (a handler; those would otherwise end the
// process at once and leave a file of --size_mib behind). A signal the process was started
// with ignored (nohup, a background job) stays ignored.
class RemoveOnExit {
 public:
  explicit RemoveOnExit(const std::string& path) : path_(path) {
    ZT_CHECK(path.size() < sizeof g_test_file, UsageError, "--path: ", path, " is too long a path");
    std::memcpy(g_test_file, path.c_str(), path.size() + 1);
    for (const int signal_number : kSignals) {
      struct sigaction current {};
      if (::sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler == SIG_IGN) continue;
      struct sigaction remove {};
      remove.sa_handler = remove_test_file_and_die;
      remove.sa_flags = SA_RESETHAND;
      sigemptyset(&remove.sa_mask);
      for (const int other : kSignals) sigaddset(&remove.sa_mask, other);   // one handler at a time
      if (::sigaction(signal_number, &remove, nullptr) == 0) installed_.push_back({signal_number, current});
    }
  }
  ~RemoveOnExit() {
    ::unlink(path_.c_str());
    for (const auto& [signal_number, previous] : installed_) ::sigaction(signal_number, &previous, nullptr);
  }
  RemoveOnExit(const RemoveOnExit&) = delete;
  RemoveOnExit& operator=(const RemoveOnExit&) = delete;

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  std::string path_;
  std::vector<std::pair<int, struct sigaction>> installed_;
};

int run_io_bench(const IoBenchOptions& o) {
  ZT_CHECK(!(o.read_only && o.write_only), UsageError, "--read and --write together: give neither to measure both");
  ZT_CHECK(o.size_mib >= 1, UsageError, "--size_mib must be at least 1, got ", o.size_mib);
  ZT_CHECK(o.rounds >= 1, UsageError, "--rounds must be at least 1, got ", o.rounds);
  const bool do_write = !o.read_only, do_read = !o.write_only;
  const int64_t nbytes = o.size_mib << 20;
  const auto blocks = parse_block_sizes(o.block_sizes);
  const auto depths = parse_counts(o.queue_depths, "--queue_depths", 4096);
  const auto threads = parse_counts(o.threads, "--threads", 256);

  // The engines to sweep: the one named, auto's pick, or every one that runs here.
  std::vector<EngineKind> engines;
  if (o.engine == "all") {
    for (const auto& p : io::probe_engines()) {
      if (p.available) engines.push_back(p.kind);
    }
  } else {
    const EngineKind kind = io::engine_kind_from_name(o.engine, "--engine");
    engines.push_back(kind == EngineKind::kAuto ? io::make_io_engine({})->kind() : kind);
    io::make_io_engine({.engine = engines.back()});   // NotSupported now, not after the file is written
  }

  // The folder the user names must exist (a mistyped path or an unmounted disk is not
  // silently measured elsewhere); the file in it is the command's own.
  files::check_existing_root(o.path, "--path");
  const std::string path =
      (std::filesystem::path(o.path) / ("zerotrain-io-bench-" + std::to_string(::getpid()) + ".dat")).string();
  RemoveOnExit remove(path);
  io::DirectFile file = io::DirectFile::open(path, io::DirectFile::Mode::kCreate);
  file.reserve(nbytes);

  // Random bytes, not zeros, which a host can short-cut.
  io::AlignedBuffer buffer(nbytes);
  {
    std::mt19937_64 gen(20240229);
    auto* words = static_cast<uint64_t*>(buffer.data());
    for (int64_t i = 0; i < nbytes / 8; ++i) words[i] = gen();
  }
  char* data = static_cast<char*>(buffer.data());
  raw_transfer(file, data, nbytes, true);   // the reads read what was written

  std::vector<Combo> combos;
  for (EngineKind e : engines) {
    for (int64_t b : blocks) {
      for (int64_t d : depths) {
        for (int64_t t : threads) combos.push_back({{.block_size_bytes = b, .queue_depth = d, .threads = t, .engine = e}, {}, {}});
      }
    }
  }
  std::printf("zerotrain io-bench: %lld MiB in %s, %zu combinations, %s, rounds: %d (median GB/s, 1 GB = 1e9 bytes)\n",
              static_cast<long long>(o.size_mib), o.path.c_str(), combos.size(),
              do_read && do_write ? "write, read" : (do_read ? "read" : "write"), o.rounds);
  std::fflush(stdout);

  // Rounds outermost, so that a drift of the disk's speed touches every combination alike.
  std::vector<double> raw_write, raw_read;
  for (int r = 0; r < o.rounds; ++r) {
    if (do_write) raw_write.push_back(gbps(nbytes, [&] { raw_transfer(file, data, nbytes, true); }));
    if (do_read) raw_read.push_back(gbps(nbytes, [&] { raw_transfer(file, data, nbytes, false); }));
    for (Combo& c : combos) {
      auto engine = io::make_io_engine(c.options);
      if (do_write) {
        c.write_gbps.push_back(gbps(nbytes, [&] { engine->wait(engine->submit({&file, 0, data, nbytes, true})); }));
      }
      if (do_read) {
        c.read_gbps.push_back(gbps(nbytes, [&] { engine->wait(engine->submit({&file, 0, data, nbytes, false})); }));
      }
    }
  }

  auto cell = [](bool on, double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", v);
    return on ? std::string(text) : std::string("-");
  };
  std::printf("%-10s %6s %12s %8s %11s %10s\n", "engine", "block", "queue_depth", "threads", "write GB/s", "read GB/s");
  std::printf("%-39s %11s %10s\n", "raw O_DIRECT (1M blocks, 1 thread)",
              cell(do_write, median(raw_write)).c_str(), cell(do_read, median(raw_read)).c_str());
  const Combo* best_write = nullptr;
  const Combo* best_read = nullptr;
  const Combo* best_both = nullptr;
  // Offload reads and writes about as many bytes each step, so the combination for the aio
  // block is the one with the least time for one of each: the best harmonic mean.
  auto both_time = [](const Combo& c) { return 1 / median(c.write_gbps) + 1 / median(c.read_gbps); };
  for (const Combo& c : combos) {
    std::printf("%-10s %6s %12lld %8lld %11s %10s\n", io::engine_kind_name(c.options.engine),
                size_text(c.options.block_size_bytes).c_str(), static_cast<long long>(c.options.queue_depth),
                static_cast<long long>(c.options.threads), cell(do_write, median(c.write_gbps)).c_str(),
                cell(do_read, median(c.read_gbps)).c_str());
    if (do_write && (!best_write || median(c.write_gbps) > median(best_write->write_gbps))) best_write = &c;
    if (do_read && (!best_read || median(c.read_gbps) > median(best_read->read_gbps))) best_read = &c;
    if (do_write && do_read && (!best_both || both_time(c) < both_time(*best_both))) best_both = &c;
  }
  auto describe = [](const Combo& c) {
    return std::string(io::engine_kind_name(c.options.engine)) + " block " + size_text(c.options.block_size_bytes) +
           " queue_depth " + std::to_string(c.options.queue_depth) + " threads " + std::to_string(c.options.threads);
  };
  if (best_write) {
    std::printf("best write: %s: %.3f GB/s, %.2fx raw O_DIRECT (%.3f GB/s)\n", describe(*best_write).c_str(),
                median(best_write->write_gbps), median(best_write->write_gbps) / median(raw_write), median(raw_write));
  }
  if (best_read) {
    std::printf("best read:  %s: %.3f GB/s, %.2fx raw O_DIRECT (%.3f GB/s)\n", describe(*best_read).c_str(),
                median(best_read->read_gbps), median(best_read->read_gbps) / median(raw_read), median(raw_read));
  }
  const Combo& pick = best_both ? *best_both : (best_write ? *best_write : *best_read);
  std::printf("%s\n", best_both ? "best for a write and a read together (what offload does), for ds_config:"
                                : "best combination, for ds_config:");
  std::printf("\"aio\": {\n  \"block_size\": %lld,\n  \"queue_depth\": %lld,\n  \"intra_op_parallelism\": %lld,\n"
              "  \"single_submit\": false,\n  \"overlap_events\": true,\n  \"use_gds\": false\n}\n",
              static_cast<long long>(pick.options.block_size_bytes), static_cast<long long>(pick.options.queue_depth),
              static_cast<long long>(pick.options.threads));
  if (pick.options.engine != io::make_io_engine({})->kind()) {
    std::printf("and run with ZEROTRAIN_IO_ENGINE=%s (auto picks %s here)\n", io::engine_kind_name(pick.options.engine),
                io::make_io_engine({})->name());
  }
  return 0;
}

}  // namespace

Command add_io_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("io-bench", "Measure the IO engines on a disk and print the best `aio` block");
  auto o = std::make_shared<IoBenchOptions>();
  cmd->add_option("--path", o->path, "A directory on the disk to measure (nvme_path); a test file is made and removed")
      ->required();
  cmd->add_option("--size_mib", o->size_mib, "Size of the test file and of each transfer, in MiB")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--engine", o->engine, "auto, io_uring, libaio, threads, or all (every engine that runs here)")
      ->capture_default_str();
  cmd->add_option("--block_sizes", o->block_sizes, "aio.block_size values to try, e.g. 128K,256K,1M,4M")
      ->capture_default_str();
  cmd->add_option("--queue_depths", o->queue_depths, "aio.queue_depth values to try")->capture_default_str();
  cmd->add_option("--threads", o->threads, "aio.intra_op_parallelism values to try")->capture_default_str();
  cmd->add_option("--rounds", o->rounds, "Rounds per combination; the median is reported")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--read", o->read_only, "Measure reads only");
  cmd->add_flag("--write", o->write_only, "Measure writes only");
  return {cmd, [o] { return run_io_bench(*o); }};
}

}  // namespace zerotrain::tools
