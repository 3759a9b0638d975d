// Shared by the threads-backend tests: running one body per rank thread, inputs that are
// exact in every dtype, their reference reductions, and error capture.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/error.h"


namespace zerotrain::comm::test {


using namespace std::chrono_literals;

inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

// Long enough for a loaded 2-core machine, short enough that a broken test fails in seconds.
inline constexpr std::chrono::milliseconds kTestTimeout = 10s;

inline CommOptions options_with(int64_t bucket_nbytes = 25 << 20, bool fingerprints = false,
                         std::chrono::milliseconds timeout = kTestTimeout) {
  CommOptions options;
  options.timeout = timeout;
  options.bucket_nbytes = bucket_nbytes;
  options.check_fingerprints = fingerprints;
  return options;
}

// Every variable rendezvous_from_env() and apply_env() read.
inline constexpr const char* kCommEnvVariables[] = {
    "RANK",          "WORLD_SIZE",          "LOCAL_RANK",          "LOCAL_WORLD_SIZE",
    "LOCAL_SIZE",    "MASTER_ADDR",         "MASTER_PORT",         "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",                 "OMPI_COMM_WORLD_LOCAL_RANK",          "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_PROCID",  "SLURM_NTASKS",        "SLURM_LOCALID",       "SLURM_NTASKS_PER_NODE",
    "SLURM_STEP_NODELIST",                  "SLURM_JOB_NODELIST",  "ZEROTRAIN_COMM_BACKEND",
    "ZEROTRAIN_COMM_TIMEOUT_S",             "ZEROTRAIN_COMM_DEBUG",
};

// Clears every variable above for the lifetime of a test and restores what was there.
class EnvGuard {
 public:
  EnvGuard() {
    for (const char* name : kCommEnvVariables) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name, value->c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  void set(const char* name, const std::string& value) { ASSERT_EQ(::setenv(name, value.c_str(), 1), 0) << name; }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

// Runs body(communicator, rank) for every rank of `world` on its own thread and reports any
// exception that escapes a rank.
inline void run_world(std::vector<Communicator>& world, const std::function<void(Communicator&, int)>& body) {
  const int ws = static_cast<int>(world.size());
  std::vector<std::exception_ptr> errors(ws);
  std::vector<std::thread> threads;
  for (int r = 0; r < ws; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(world[r], r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ws; ++r) {
    if (errors[r]) ADD_FAILURE() << "rank " << r << " threw: " << describe(errors[r]);
  }
}

// The message of the E that f() throws; a test failure when it throws nothing or another type.
template <class E, class F>
inline std::string error_of(F&& f, const std::string& what = "") {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw an exception of the wrong type: " << e.what();
    return "";
  }
  ADD_FAILURE() << what << ": threw nothing";
  return "";
}

// ---------------------------------------------------------------- inputs and references

// Element i of rank r's input to a collective tagged `salt`: an integer in [-5, 5], exact in
// every dtype; different on every rank (for ws <= 11), so a wrong root or chunk shows.
inline int64_t value(int rank, int64_t i, int salt) { return (i * 3 + rank * 5 + salt * 7 + 1) % 11 - 5; }

inline at::Tensor make(int64_t numel, at::ScalarType dtype, const std::function<double(int64_t)>& f) {
  at::Tensor t = at::empty({numel}, at::kDouble);
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < numel; ++i) p[i] = f(i);
  return t.to(dtype);
}

inline at::Tensor input_for(int rank, int64_t numel, at::ScalarType dtype, int salt) {
  return make(numel, dtype, [&](int64_t i) { return static_cast<double>(value(rank, i, salt)); });
}

// The reduction over ranks 0..ws-1 of input_for(r, numel, dtype, salt): exact sums and
// maxima; the average rounded once from the exact quotient (floating point), or truncated
// toward zero (integers).
inline at::Tensor reference(int ws, int64_t numel, at::ScalarType dtype, int salt, ReduceOp op) {
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/false);
  return make(numel, dtype, [&](int64_t i) {
    int64_t sum = 0;
    int64_t max = std::numeric_limits<int64_t>::min();
    for (int r = 0; r < ws; ++r) {
      sum += value(r, i, salt);
      max = std::max(max, value(r, i, salt));
    }
    switch (op) {
      case ReduceOp::kSum: return static_cast<double>(sum);
      case ReduceOp::kMax: return static_cast<double>(max);
      case ReduceOp::kAvg:
        return integral ? static_cast<double>(sum / ws)   // C++ division truncates toward zero
                        : static_cast<double>(sum) / ws;
    }
    return 0.0;
  });
}

inline std::string values_of(const at::Tensor& t) {
  std::ostringstream out;
  out << "[";
  at::Tensor flat = t.reshape(-1).to(at::kDouble).contiguous();
  for (int64_t i = 0; i < flat.numel(); ++i) out << (i ? ", " : "") << flat.data_ptr<double>()[i];
  out << "]";
  return out.str();
}

inline void expect_same(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type()) << what;
  ASSERT_EQ(actual.sizes().vec(), expected.sizes().vec()) << what;
  EXPECT_TRUE(at::equal(actual, expected)) << what << "\n  actual:   " << values_of(actual)
                                           << "\n  expected: " << values_of(expected);
}

inline int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline std::string name_of(ReduceOp op) { return to_string(op); }

}  // namespace zerotrain::comm::test
