// The shared-memory LocalGroup with real processes: fork()ed members, a real segment, an
// Exchange over files in a temporary folder. Results are checked bit for bit against a
// scalar reference written here (fp16 through the compiler's _Float16), and the faults
// (a member killed, a member that never calls, an intruder, every member killed) end as
// docs/comm.md promises, leaving no memfd behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

#include "zerotrain/comm/shm/local_group.h"
#include "zerotrain/comm/shm/reduce_kernels.h"
#include "zerotrain/comm/shm/segment.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::shm {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const Dtype kAllDtypes[] = {Dtype::kFloat32, Dtype::kFloat64, Dtype::kFloat16, Dtype::kBFloat16,
                            Dtype::kInt32,   Dtype::kInt64,   Dtype::kUInt8,   Dtype::kInt8};
const Op kAllOps[] = {Op::kSum, Op::kAvg, Op::kMax};
const char* op_name(Op op) { return op == Op::kSum ? "sum" : op == Op::kAvg ? "avg" : "max"; }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// ---- the scalar reference ------------------------------------------------------------------

float ref_half_to_float(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}
uint16_t ref_float_to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value)) return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7E00u);
  const auto h = static_cast<_Float16>(value);   // round to nearest-even
  uint16_t out;
  std::memcpy(&out, &h, 2);
  return out;
}
float ref_bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}
uint16_t ref_float_to_bf16(float value) {
  if (std::isnan(value)) return 0x7FC0;
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  // Nearest-even on the 16 dropped bits.
  const uint32_t dropped = bits & 0xFFFFu, kept = bits >> 16;
  const bool up = dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u));
  return static_cast<uint16_t>(kept + (up ? 1u : 0u));
}

template <class A>
A ref_step(Op op, A acc, A x) {
  if (op != Op::kMax) return static_cast<A>(acc + x);
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(acc)) return acc;
    return std::isnan(x) || x > acc ? x : acc;
  } else {
    return x > acc ? x : acc;
  }
}

template <class T, class A, class In, class Out>
void ref_fold(Op op, void* out, const std::vector<const void*>& srcs, int64_t numel, In in, Out to) {
  const int n = static_cast<int>(srcs.size());
  for (int64_t i = 0; i < numel; ++i) {
    A acc = in(static_cast<const T*>(srcs[0])[i]);
    for (int k = 1; k < n; ++k) acc = ref_step<A>(op, acc, in(static_cast<const T*>(srcs[k])[i]));
    if (op == Op::kAvg) acc = static_cast<A>(acc / static_cast<A>(n));
    static_cast<T*>(out)[i] = to(acc);
  }
}

template <class T>
void ref_int(Op op, void* out, const std::vector<const void*>& srcs, int64_t numel) {
  // Sums wrap in the type, as a tensor's add_ does (computed unsigned: no overflow UB).
  using U = std::make_unsigned_t<T>;
  const int n = static_cast<int>(srcs.size());
  for (int64_t i = 0; i < numel; ++i) {
    T acc = static_cast<const T*>(srcs[0])[i];
    for (int k = 1; k < n; ++k) {
      const T x = static_cast<const T*>(srcs[k])[i];
      acc = op == Op::kMax ? std::max(acc, x) : static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(x)));
    }
    if (op == Op::kAvg) acc = static_cast<T>(acc / static_cast<T>(n));
    static_cast<T*>(out)[i] = acc;
  }
}

void reference_reduce(Dtype dtype, Op op, void* out, const std::vector<const void*>& srcs, int64_t numel) {
  auto id = [](auto v) { return v; };
  switch (dtype) {
    case Dtype::kFloat32: return ref_fold<float, float>(op, out, srcs, numel, id, id);
    case Dtype::kFloat64: return ref_fold<double, double>(op, out, srcs, numel, id, id);
    case Dtype::kFloat16: return ref_fold<uint16_t, float>(op, out, srcs, numel, ref_half_to_float, ref_float_to_half);
    case Dtype::kBFloat16: return ref_fold<uint16_t, float>(op, out, srcs, numel, ref_bf16_to_float, ref_float_to_bf16);
    case Dtype::kInt32: return ref_int<int32_t>(op, out, srcs, numel);
    case Dtype::kInt64: return ref_int<int64_t>(op, out, srcs, numel);
    case Dtype::kUInt8: return ref_int<uint8_t>(op, out, srcs, numel);
    case Dtype::kInt8: return ref_int<int8_t>(op, out, srcs, numel);
  }
}

// Equal bits, except that a NaN may differ in its sign (which NaN an addition of two NaNs
// returns is the compiler's choice of operand order).
std::string compare(Dtype dtype, const void* expected, const void* actual, int64_t numel) {
  const int64_t bytes = dtype_bytes(dtype);
  for (int64_t i = 0; i < numel; ++i) {
    const auto* e = static_cast<const unsigned char*>(expected) + i * bytes;
    const auto* a = static_cast<const unsigned char*>(actual) + i * bytes;
    if (std::memcmp(e, a, static_cast<size_t>(bytes)) == 0) continue;
    bool both_nan = false;
    if (dtype == Dtype::kFloat32) {
      float x, y;
      std::memcpy(&x, e, 4);
      std::memcpy(&y, a, 4);
      both_nan = std::isnan(x) && std::isnan(y);
    } else if (dtype == Dtype::kFloat64) {
      double x, y;
      std::memcpy(&x, e, 8);
      std::memcpy(&y, a, 8);
      both_nan = std::isnan(x) && std::isnan(y);
    } else if (dtype == Dtype::kFloat16 || dtype == Dtype::kBFloat16) {
      uint16_t x, y;
      std::memcpy(&x, e, 2);
      std::memcpy(&y, a, 2);
      both_nan = (x & 0x7FFF) == (y & 0x7FFF) && (dtype == Dtype::kFloat16 ? (x & 0x7FFF) == 0x7E00 : true) &&
                 (x & 0x7FFF) >= (dtype == Dtype::kFloat16 ? 0x7C01 : 0x7F81);
    }
    if (both_nan) continue;
    std::ostringstream text;
    text << dtype_name(dtype) << " element " << i << " of " << numel << ": expected 0x" << std::hex;
    for (int64_t b = bytes - 1; b >= 0; --b) text << (e[b] >> 4) << (e[b] & 15);
    text << ", got 0x";
    for (int64_t b = bytes - 1; b >= 0; --b) text << (a[b] >> 4) << (a[b] & 15);
    return text.str();
  }
  return "";
}

// ---- inputs ---------------------------------------------------------------------------------

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Moderate values with NaN, infinities and signed zeros among them; for fp16/bf16 also raw
// bit patterns (subnormals, overflow to infinity).
void fill(Dtype dtype, void* data, int64_t numel, uint64_t seed) {
  for (int64_t i = 0; i < numel; ++i) {
    const uint64_t r = mix(seed * 0x100000001B3ull + static_cast<uint64_t>(i));
    const double specials[] = {INFINITY, -INFINITY, NAN, -NAN, 0.0, -0.0};
    const bool special = r % 97 == 0;
    const double moderate = std::ldexp(static_cast<double>(r >> 40) / 16777216.0, static_cast<int>((r >> 8) % 12) - 4) *
                            ((r >> 20) & 1 ? -1.0 : 1.0);
    const double value = special ? specials[(r >> 32) % 6] : moderate;
    switch (dtype) {
      case Dtype::kFloat32: static_cast<float*>(data)[i] = static_cast<float>(value); break;
      case Dtype::kFloat64: static_cast<double*>(data)[i] = value; break;
      case Dtype::kFloat16:
        static_cast<uint16_t*>(data)[i] =
            (r >> 5) & 1 ? static_cast<uint16_t>(r >> 48) : ref_float_to_half(static_cast<float>(value * 1000));
        break;
      case Dtype::kBFloat16:
        static_cast<uint16_t*>(data)[i] =
            (r >> 5) & 1 ? static_cast<uint16_t>(r >> 48) : ref_float_to_bf16(static_cast<float>(value));
        break;
      case Dtype::kInt32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(r >> 7); break;
      case Dtype::kInt64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(r); break;
      case Dtype::kUInt8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(r >> 17); break;
      case Dtype::kInt8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(r >> 23); break;
    }
  }
}

// ---- processes ------------------------------------------------------------------------------

// An Exchange over files: set writes a file and renames it into place; get polls for it.
Exchange file_exchange(const fs::path& dir, std::chrono::milliseconds timeout) {
  Exchange exchange;
  exchange.set = [dir](const std::string& key, const std::string& value) {
    const fs::path tmp = dir / (key + ".tmp." + std::to_string(::getpid()));
    std::ofstream(tmp) << value;
    fs::rename(tmp, dir / key);
  };
  exchange.get = [dir, timeout](const std::string& key) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      std::ifstream in(dir / key);
      if (in) return std::string(std::istreambuf_iterator<char>(in), {});
      if (Clock::now() >= deadline) throw TimeoutError("no key " + key + " in the test exchange");
      std::this_thread::sleep_for(1ms);
    }
  };
  return exchange;
}

struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/zt-shm-test-XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path); }
};

// What a member process reports back through anonymous shared memory.
enum Outcome : int { kRunning = 0, kOk = 1, kFailed = 2, kCommError = 3, kTimeoutError = 4, kOtherError = 5 };
struct Report {
  std::atomic<int> outcome;
  std::atomic<int> joined;
  int64_t error_ns;
  uint64_t hash;
  char message[2048];
};

class Reports {
 public:
  explicit Reports(int n) : n_(n) {
    void* p = ::mmap(nullptr, sizeof(Report) * n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    reports_ = static_cast<Report*>(p);
    std::memset(p, 0, sizeof(Report) * n);
  }
  ~Reports() { ::munmap(reports_, sizeof(Report) * n_); }
  Report& operator[](int i) { return reports_[i]; }

 private:
  int n_;
  Report* reports_;
};

void set_message(Report& report, const std::string& text) {
  std::snprintf(report.message, sizeof report.message, "%s", text.c_str());
}

// Runs `body` in a child process; its outcome goes to `report` (an exception's type and text).
// `body` returns "" on success or what was wrong.
pid_t spawn(Report& report, const std::function<std::string()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  int outcome = kOk;
  try {
    const std::string wrong = body();
    if (!wrong.empty()) {
      outcome = kFailed;
      set_message(report, wrong);
    }
  } catch (const TimeoutError& e) {
    outcome = kTimeoutError;
    set_message(report, e.what());
  } catch (const CommError& e) {
    outcome = kCommError;
    set_message(report, e.what());
  } catch (const std::exception& e) {
    outcome = kOtherError;
    set_message(report, e.what());
  }
  report.error_ns = now_ns();
  report.outcome.store(outcome);
  ::_exit(0);
}

// Waits for every pid (killing all on overrun); true if all ended in time.
bool reap(const std::vector<pid_t>& pids, std::chrono::seconds limit = 60s) {
  const auto deadline = Clock::now() + limit;
  std::vector<bool> done(pids.size(), false);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --left;
      }
    }
    if (left == 0) break;
    if (Clock::now() >= deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (!done[i]) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
        }
      }
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

std::string outcome_text(Report& report) {
  const char* names[] = {"still running", "ok", "wrong result", "CommError", "TimeoutError", "other error"};
  return std::string(names[report.outcome.load()]) + ": " + report.message;
}

// The memfd name of the group published in `dir` ("" before member 0 has published it).
std::string segment_name(const fs::path& dir) {
  std::ifstream in(dir / kSegmentExchangeKey);
  std::string hex;
  if (!(in >> hex)) return "";
  return kSegmentNamePrefix + hex;
}

// Every process's descriptors and mappings that name `name` ("pid: where" lines).
std::vector<std::string> holders_of(const std::string& name) {
  std::vector<std::string> holders;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ec;
    for (const auto& fd : fs::directory_iterator(entry.path() / "fd", ec)) {
      std::error_code link_ec;
      const std::string target = fs::read_symlink(fd.path(), link_ec);
      if (!link_ec && target.find(name) != std::string::npos) holders.push_back(pid + ": fd " + target);
    }
    std::ifstream maps(entry.path() / "maps");
    std::string line;
    while (std::getline(maps, line)) {
      if (line.find(name) != std::string::npos) holders.push_back(pid + ": map " + line);
    }
  }
  return holders;
}

// ---- the kernels alone ------------------------------------------------------------------

TEST(ShmReduceKernels, MatchTheScalarReferenceOnEveryTarget) {
  const int64_t lengths[] = {0, 1, 2, 7, 15, 16, 17, 31, 33, 64, 100, 1001};
  for (const int64_t target : reduce_available_targets()) {
    reduce_force_target(target);
    SCOPED_TRACE(reduce_target_name(target));
    for (const Dtype dtype : kAllDtypes) {
      for (const Op op : kAllOps) {
        for (const int n : {1, 2, 3, 5}) {
          for (const int64_t numel : lengths) {
            const auto bytes = static_cast<size_t>(numel * dtype_bytes(dtype));
            std::vector<std::vector<char>> inputs(n, std::vector<char>(bytes + 1));
            std::vector<const void*> srcs;
            for (int k = 0; k < n; ++k) {
              // Odd addresses: no source is aligned.
              fill(dtype, inputs[k].data() + 1, numel, 1000 * n + 10 * k + static_cast<uint64_t>(numel));
              srcs.push_back(inputs[k].data() + 1);
            }
            std::vector<char> expected(bytes + 1), actual(bytes + 1), second(bytes + 1);
            reference_reduce(dtype, op, expected.data(), srcs, numel);
            reduce(dtype, op, actual.data(), srcs.data(), n, numel, second.data() + 1);
            const std::string wrong = compare(dtype, expected.data(), actual.data(), numel);
            ASSERT_EQ(wrong, "") << op_name(op) << " over " << n;
            ASSERT_EQ(std::memcmp(actual.data(), second.data() + 1, bytes), 0) << "the second output differs";
            // In place: the output is one of the sources.
            std::vector<char> in_place(inputs[0]);
            srcs[0] = in_place.data() + 1;
            reduce(dtype, op, in_place.data() + 1, srcs.data(), n, numel);
            ASSERT_EQ(compare(dtype, expected.data(), in_place.data() + 1, numel), "") << "in place";
          }
        }
      }
    }
  }
  reduce_force_target(0);
}

TEST(ShmReduceKernels, ConversionsRoundAsC10Does) {
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);            // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);            // half the smallest subnormal: even is 0
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(float_to_half(-NAN), 0xFE00);
  EXPECT_EQ(float_to_half(NAN), 0x7E00);
  EXPECT_EQ(float_to_bfloat16(-NAN), 0x7FC0);
  EXPECT_EQ(float_to_bfloat16(1.00390625f), 0x3F80);     // 1 + 2^-8: a tie, to even
  EXPECT_EQ(float_to_bfloat16(1.01171875f), 0x3F82);     // 1 + 3*2^-8: a tie, to even (up)
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = half_to_float(h);
    const float r = ref_half_to_float(h);
    if (std::isnan(r)) {
      ASSERT_TRUE(std::isnan(f));
    } else {
      ASSERT_EQ(std::memcmp(&f, &r, 4), 0) << bits;
      ASSERT_EQ(float_to_half(f), h);
    }
  }
}

// ---- collectives ------------------------------------------------------------------------

struct Case {
  enum Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast } kind;
  Dtype dtype;
  Op op;
  int64_t numel;   // of the message (all_reduce, broadcast) or of one chunk
};

std::vector<Case> all_cases(int size, int64_t slot_bytes) {
  std::vector<Case> cases;
  for (const Dtype dtype : kAllDtypes) {
    const int64_t rounds = 3 * slot_bytes / dtype_bytes(dtype) + 7;
    const int64_t numels[] = {0, 1, size - 1, 37, 4 * size + 1, rounds};
    for (const int64_t numel : numels) {
      for (const Op op : kAllOps) {
        cases.push_back({Case::kAllReduce, dtype, op, numel});
        cases.push_back({Case::kReduceScatter, dtype, op, numel});
      }
      cases.push_back({Case::kAllGather, dtype, Op::kSum, numel});
      cases.push_back({Case::kBroadcast, dtype, Op::kSum, numel});
    }
  }
  return cases;
}

std::string describe(const Case& c) {
  const char* kinds[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
  return std::string(kinds[c.kind]) + " " + dtype_name(c.dtype) + " " + op_name(c.op) + " numel " +
         std::to_string(c.numel);
}

// Runs every case as member `rank`, checking against the reference; returns what was wrong.
// The hash covers every result that all members share, so members can be compared.
std::string run_cases(LocalGroup& group, const std::vector<Case>& cases, uint64_t seed, uint64_t& hash) {
  const int size = group.size(), rank = group.rank();
  for (size_t index = 0; index < cases.size(); ++index) {
    const Case& c = cases[index];
    const int64_t bytes = dtype_bytes(c.dtype);
    const uint64_t case_seed = seed * 7919 + index * 131;
    auto input_of = [&](int member, int64_t numel) {
      std::vector<char> data(static_cast<size_t>(numel * bytes) + 1);
      fill(c.dtype, data.data(), numel, case_seed + static_cast<uint64_t>(member));
      return data;
    };
    std::vector<char> expected, actual;
    int64_t check_numel = 0;
    switch (c.kind) {
      case Case::kAllReduce: {
        std::vector<std::vector<char>> all;
        std::vector<const void*> srcs;
        for (int m = 0; m < size; ++m) all.push_back(input_of(m, c.numel));
        for (auto& a : all) srcs.push_back(a.data());
        expected.resize(all[0].size());
        reference_reduce(c.dtype, c.op, expected.data(), srcs, c.numel);
        actual = all[static_cast<size_t>(rank)];
        group.all_reduce(actual.data(), c.numel, c.dtype, c.op);
        check_numel = c.numel;
        break;
      }
      case Case::kReduceScatter: {
        std::vector<std::vector<char>> all;
        std::vector<const void*> srcs;
        for (int m = 0; m < size; ++m) all.push_back(input_of(m, c.numel * size));
        for (auto& a : all) srcs.push_back(a.data() + rank * c.numel * bytes);
        expected.resize(static_cast<size_t>(c.numel * bytes) + 1);
        reference_reduce(c.dtype, c.op, expected.data(), srcs, c.numel);
        actual.assign(expected.size(), 0x5A);
        group.reduce_scatter(all[static_cast<size_t>(rank)].data(), actual.data(), c.numel, c.dtype, c.op);
        check_numel = c.numel;
        break;
      }
      case Case::kAllGather: {
        expected.resize(static_cast<size_t>(size * c.numel * bytes) + 1);
        for (int m = 0; m < size; ++m) {
          const auto part = input_of(m, c.numel);
          std::memcpy(expected.data() + m * c.numel * bytes, part.data(), static_cast<size_t>(c.numel * bytes));
        }
        actual.assign(expected.size(), 0x5A);
        const auto mine = input_of(rank, c.numel);
        group.all_gather(mine.data(), actual.data(), c.numel * bytes);
        check_numel = size * c.numel;
        break;
      }
      case Case::kBroadcast: {
        const int root = static_cast<int>(index % static_cast<size_t>(size));
        expected = input_of(root, c.numel);
        actual = rank == root ? expected : std::vector<char>(expected.size(), 0x5A);
        group.broadcast(actual.data(), c.numel * bytes, root);
        check_numel = c.numel;
        break;
      }
    }
    const std::string wrong = compare(c.dtype, expected.data(), actual.data(), check_numel);
    if (!wrong.empty()) return describe(c) + ": " + wrong;
    if (c.kind == Case::kReduceScatter) continue;   // each member has its own chunk
    for (int64_t i = 0; i < check_numel * bytes; ++i) hash = mix(hash ^ static_cast<unsigned char>(actual[i]));
  }
  return "";
}

void expect_all_ok(Reports& reports, int n) {
  for (int m = 0; m < n; ++m) {
    EXPECT_EQ(reports[m].outcome.load(), kOk) << "member " << m << ": " << outcome_text(reports[m]);
  }
}

class ShmLocalGroupSizes : public ::testing::TestWithParam<int> {};

TEST_P(ShmLocalGroupSizes, EveryOpAndDtypeMatchesTheReference) {
  const int size = GetParam();
  TempDir dir;
  Reports reports(size);
  LocalGroupOptions options;
  options.timeout = 20s;
  options.slot_bytes = 4096;   // small: several rounds with small messages
  const auto cases = all_cases(size, options.slot_bytes);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    pids.push_back(spawn(reports[rank], [&, rank] {
      auto group = LocalGroup::join(file_exchange(dir.path, options.timeout), rank, size, options);
      uint64_t hash = 0;
      std::string wrong = run_cases(*group, cases, 1, hash);
      group->barrier();
      reports[rank].hash = hash;
      return wrong;
    }));
  }
  ASSERT_TRUE(reap(pids));
  expect_all_ok(reports, size);
  for (int m = 1; m < size; ++m) EXPECT_EQ(reports[m].hash, reports[0].hash) << "member " << m << "'s results differ";
  const std::string name = segment_name(dir.path);
  ASSERT_NE(name, "");
  EXPECT_EQ(holders_of(name), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Sizes, ShmLocalGroupSizes, ::testing::Values(2, 3, 4));

TEST(ShmLocalGroup, DefaultSlotsAroundTheSmallMessagePath) {
  const int size = 3;
  TempDir dir;
  Reports reports(size);
  LocalGroupOptions options;
  options.timeout = 20s;
  std::vector<Case> cases;
  for (const int64_t numel : {int64_t{4095}, int64_t{4096}, int64_t{4097}, int64_t{(1 << 18) + 3}}) {
    cases.push_back({Case::kAllReduce, Dtype::kFloat32, Op::kSum, numel});
    cases.push_back({Case::kAllReduce, Dtype::kBFloat16, Op::kAvg, numel});
    cases.push_back({Case::kReduceScatter, Dtype::kFloat16, Op::kSum, numel});
    cases.push_back({Case::kAllGather, Dtype::kUInt8, Op::kSum, numel});
  }
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    pids.push_back(spawn(reports[rank], [&, rank] {
      auto group = LocalGroup::join(file_exchange(dir.path, options.timeout), rank, size, options);
      uint64_t hash = 0;
      return run_cases(*group, cases, 2, hash);
    }));
  }
  ASSERT_TRUE(reap(pids));
  expect_all_ok(reports, size);
}

TEST(ShmLocalGroup, TwoGroupsAtOnceDoNotCrossTalk) {
  TempDir dir_a, dir_b;
  Reports reports(4);
  LocalGroupOptions options;
  options.timeout = 20s;
  options.slot_bytes = 4096;
  std::vector<Case> cases;
  for (const Dtype dtype : {Dtype::kFloat32, Dtype::kInt64}) {
    for (const int64_t numel : {int64_t{3}, int64_t{5000}}) {
      cases.push_back({Case::kAllReduce, dtype, Op::kSum, numel});
      cases.push_back({Case::kReduceScatter, dtype, Op::kMax, numel});
      cases.push_back({Case::kAllGather, dtype, Op::kSum, numel});
    }
  }
  std::vector<pid_t> pids;
  for (int group_index = 0; group_index < 2; ++group_index) {
    const fs::path dir = group_index == 0 ? dir_a.path : dir_b.path;
    for (int rank = 0; rank < 2; ++rank) {
      pids.push_back(spawn(reports[2 * group_index + rank], [&, dir, group_index, rank] {
        auto group = LocalGroup::join(file_exchange(dir, options.timeout), rank, 2, options);
        uint64_t hash = 0;
        std::string wrong;
        for (int repeat = 0; repeat < 20 && wrong.empty(); ++repeat) {
          wrong = run_cases(*group, cases, 100 + 17 * group_index + repeat, hash);
        }
        return wrong;
      }));
    }
  }
  ASSERT_TRUE(reap(pids));
  expect_all_ok(reports, 4);
  EXPECT_NE(segment_name(dir_a.path), segment_name(dir_b.path));
}

// Members loop on all_reduce until an error ends them.
std::string loop_collectives(LocalGroup& group, Report& report) {
  std::vector<float> data(20000, 1.0f);
  report.joined.store(1);
  for (;;) group.all_reduce(data.data(), static_cast<int64_t>(data.size()), Dtype::kFloat32, Op::kMax);
}

void wait_joined(Reports& reports, int n) {
  const auto deadline = Clock::now() + 20s;
  for (int m = 0; m < n; ++m) {
    while (reports[m].joined.load() == 0 && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  }
}

// `size` forked members that join over `dir` and loop on collectives; returns once all joined.
std::vector<pid_t> spawn_looping_group(const TempDir& dir, Reports& reports, int size, const LocalGroupOptions& options) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    pids.push_back(spawn(reports[rank], [&, rank] {
      auto group = LocalGroup::join(file_exchange(dir.path, options.timeout), rank, size, options);
      return loop_collectives(*group, reports[rank]);
    }));
  }
  wait_joined(reports, size);
  return pids;
}

TEST(ShmLocalGroup, AKilledMemberIsNamedByTheOthersWithinASecond) {
  const int size = 3;
  TempDir dir;
  Reports reports(size);
  LocalGroupOptions options;
  options.timeout = 30s;   // far longer than the test may take: the death must be noticed itself
  options.slot_bytes = 8192;
  options.job_ranks = {10, 11, 12};
  const std::vector<pid_t> pids = spawn_looping_group(dir, reports, size, options);
  std::this_thread::sleep_for(200ms);   // well inside the stream of collectives
  const int64_t killed_ns = now_ns();
  ::kill(pids[2], SIGKILL);
  ::waitpid(pids[2], nullptr, 0);
  ASSERT_TRUE(reap({pids[0], pids[1]}, 20s));
  for (int m = 0; m < 2; ++m) {
    EXPECT_EQ(reports[m].outcome.load(), kCommError) << outcome_text(reports[m]);
    const std::string message = reports[m].message;
    EXPECT_NE(message.find("member 2 (job rank 12"), std::string::npos) << message;
    EXPECT_NE(message.find("pid " + std::to_string(pids[2])), std::string::npos) << message;
    EXPECT_LT(reports[m].error_ns - killed_ns, int64_t{1'500'000'000}) << "member " << m << " noticed late";
  }
  EXPECT_EQ(holders_of(segment_name(dir.path)), std::vector<std::string>{});
}

TEST(ShmLocalGroup, AMemberThatNeverCallsTimesOutEveryoneAndBreaksTheGroup) {
  const int size = 3;
  TempDir dir;
  Reports reports(size);
  LocalGroupOptions options;
  options.timeout = 500ms;
  options.slot_bytes = 4096;
  std::vector<pid_t> pids;
  int64_t start_ns = now_ns();
  for (int rank = 0; rank < size; ++rank) {
    pids.push_back(spawn(reports[rank], [&, rank]() -> std::string {
      auto group = LocalGroup::join(file_exchange(dir.path, 10s), rank, size, options);
      reports[rank].joined.store(1);
      std::vector<int32_t> data(100, rank);
      if (rank == 2) {
        std::this_thread::sleep_for(1500ms);
        const auto before = Clock::now();
        try {
          group->all_reduce(data.data(), 100, Dtype::kInt32, Op::kSum);
        } catch (const CommError& e) {
          if (dynamic_cast<const TimeoutError*>(&e) != nullptr) {
            return std::string("late call: TimeoutError: ") + e.what();
          }
          if (Clock::now() - before > 100ms) return "the late call did not fail at once";
          return "";
        }
        return "the late call succeeded on a broken group";
      }
      group->barrier();   // never completes: member 2 is asleep
      return "the barrier completed";
    }));
  }
  wait_joined(reports, size);
  start_ns = now_ns();
  ASSERT_TRUE(reap(pids, 20s));
  for (int m = 0; m < 2; ++m) {
    EXPECT_EQ(reports[m].outcome.load(), kTimeoutError) << outcome_text(reports[m]);
    EXPECT_NE(std::string(reports[m].message).find("member 2"), std::string::npos) << reports[m].message;
    EXPECT_LT(reports[m].error_ns - start_ns, int64_t{1'400'000'000});
  }
  EXPECT_EQ(reports[2].outcome.load(), kOk) << outcome_text(reports[2]);
}

TEST(ShmLocalGroup, NothingIsLeftWhenEveryMemberIsKilledInACollective) {
  const int size = 3;
  TempDir dir;
  Reports reports(size);
  LocalGroupOptions options;
  options.timeout = 30s;
  options.slot_bytes = 8192;
  const std::vector<pid_t> pids = spawn_looping_group(dir, reports, size, options);
  std::this_thread::sleep_for(100ms);
  const std::string name = segment_name(dir.path);
  ASSERT_NE(name, "");
  // The scan finds a live segment (else its silence below would prove nothing).
  EXPECT_GE(holders_of(name).size(), static_cast<size_t>(size));
  for (const pid_t pid : pids) ::kill(pid, SIGKILL);
  ASSERT_TRUE(reap(pids, 10s));
  EXPECT_EQ(holders_of(name), std::vector<std::string>{});
}

TEST(ShmLocalGroup, AnIntruderWithAWrongSecretIsRefusedAndTheGroupStillForms) {
  TempDir dir;
  Reports reports(2);
  LocalGroupOptions options;
  options.timeout = 20s;
  options.slot_bytes = 4096;
  auto member = [&](int rank) {
    return spawn(reports[rank], [&, rank] {
      auto group = LocalGroup::join(file_exchange(dir.path, options.timeout), rank, 2, options);
      std::vector<int64_t> data(10, rank + 1);
      group->all_reduce(data.data(), 10, Dtype::kInt64, Op::kSum);
      return data[9] == 3 ? std::string() : "wrong sum " + std::to_string(data[9]);
    });
  };
  const pid_t first = member(0);
  // Wait for member 0 to publish its socket, then knock with a wrong secret.
  std::string name;
  for (auto deadline = Clock::now() + 10s; name.empty() && Clock::now() < deadline;) {
    name = segment_name(dir.path);
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_NE(name, "");
  const int intruder = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(::connect(intruder, reinterpret_cast<sockaddr*>(&address),
                      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())), 0)
      << std::strerror(errno);
  struct {
    unsigned char secret[16];
    int32_t member;
  } hello{};
  hello.member = 1;
  ASSERT_EQ(::send(intruder, &hello, sizeof hello, 0), static_cast<ssize_t>(sizeof hello));
  char byte = 0;
  iovec payload{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &payload;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  EXPECT_EQ(::recvmsg(intruder, &message, MSG_CMSG_CLOEXEC), 0) << "the intruder got an answer";
  EXPECT_EQ(CMSG_FIRSTHDR(&message), nullptr) << "the intruder got a descriptor";
  ::close(intruder);
  const pid_t second = member(1);
  ASSERT_TRUE(reap({first, second}));
  expect_all_ok(reports, 2);
}

TEST(ShmLocalGroup, AMissingMemberIsNamedWhenTheGroupCannotForm) {
  TempDir dir;
  Reports reports(1);
  LocalGroupOptions options;
  options.timeout = 300ms;
  options.job_ranks = {4, 5};
  const pid_t first = spawn(reports[0], [&] {
    LocalGroup::join(file_exchange(dir.path, options.timeout), 0, 2, options);
    return std::string("joined without member 1");
  });
  ASSERT_TRUE(reap({first}, 10s));
  EXPECT_EQ(reports[0].outcome.load(), kTimeoutError) << outcome_text(reports[0]);
  EXPECT_NE(std::string(reports[0].message).find("member 1 (job rank 5)"), std::string::npos) << reports[0].message;
}

}  // namespace
}  // namespace zerotrain::comm::shm
