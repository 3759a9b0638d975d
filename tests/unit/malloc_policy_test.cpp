// How a training process reuses memory (zerotrain/cpu/malloc_policy.h): what ZEROTRAIN_MALLOC
// and a user's GLIBC_TUNABLES decide, and the effect of "heap" that matters, blocks of a
// step's sizes reused by the next step without page faults. The effect is measured in forked children:
// the thresholds are process-wide and set once.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/cpu/malloc_policy.h"

namespace {

using zerotrain::cpu::apply_malloc_policy;
using zerotrain::cpu::plan_malloc_policy;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool is_glibc() {
#if defined(__GLIBC__)
  return true;
#else
  return false;
#endif
}

TEST(MallocPolicy, UnsetOrAutoKeepsLargeTensorsMappedAndLeavesMallocsThresholds) {
  for (const char* value : {static_cast<const char*>(nullptr), "", "auto"}) {
    ScopedEnv setting(zerotrain::cpu::kMallocEnv, value);
    const auto plan = plan_malloc_policy();
    EXPECT_TRUE(plan.large_block_cache) << (value ? value : "(unset)");
    EXPECT_FALSE(plan.training_thresholds) << (value ? value : "(unset)");
    EXPECT_EQ(plan.setting, "auto");
  }
}

TEST(MallocPolicy, HeapAlsoFixesMallocsThresholds) {
  if (!is_glibc()) GTEST_SKIP() << "not glibc: there are no thresholds to set";
  ScopedEnv tunables("GLIBC_TUNABLES", nullptr);
  ScopedEnv setting(zerotrain::cpu::kMallocEnv, "heap");
  const auto plan = plan_malloc_policy();
  EXPECT_TRUE(plan.large_block_cache);
  EXPECT_TRUE(plan.training_thresholds);
  EXPECT_NE(plan.reason.find("32 MiB"), std::string::npos) << plan.reason;
}

TEST(MallocPolicy, DefaultLeavesGlibcAndLibTorchAsTheyAre) {
  ScopedEnv setting(zerotrain::cpu::kMallocEnv, "default");
  const auto plan = plan_malloc_policy();
  EXPECT_FALSE(plan.training_thresholds);
  EXPECT_FALSE(plan.large_block_cache);
  EXPECT_EQ(plan.setting, "default");
}

TEST(MallocPolicy, AUsersMallocTunablesStandUnderHeap) {
  if (!is_glibc()) GTEST_SKIP() << "not glibc: there are no thresholds to set";
  ScopedEnv setting(zerotrain::cpu::kMallocEnv, "heap");
  for (const char* tunables : {"glibc.malloc.trim_threshold=1000000", "glibc.cpu.hwcaps=-AVX512F:glibc.malloc.mmap_threshold=4096"}) {
    ScopedEnv env("GLIBC_TUNABLES", tunables);
    const auto plan = plan_malloc_policy();
    EXPECT_FALSE(plan.training_thresholds) << tunables;
    EXPECT_TRUE(plan.large_block_cache) << tunables;
    EXPECT_NE(plan.reason.find("GLIBC_TUNABLES"), std::string::npos) << plan.reason;
  }
  ScopedEnv other("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F");   // not malloc's: the thresholds apply
  EXPECT_TRUE(plan_malloc_policy().training_thresholds);
}

TEST(MallocPolicy, AnUnknownValueIsAUsageErrorNamingTheVariable) {
  ScopedEnv setting(zerotrain::cpu::kMallocEnv, "fast");
  try {
    plan_malloc_policy();
    FAIL() << "ZEROTRAIN_MALLOC=fast was accepted";
  } catch (const zerotrain::UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ZEROTRAIN_MALLOC=fast"), std::string::npos) << what;
    EXPECT_NE(what.find("auto"), std::string::npos) << what;
    EXPECT_NE(what.find("heap"), std::string::npos) << what;
    EXPECT_NE(what.find("default"), std::string::npos) << what;
  }
}

long minor_faults() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

constexpr std::size_t kPageBytes = 4096;

// Three "steps", each allocating, writing and freeing blocks of 4 to 28 MiB, as a training
// step's activations and gradients are; returns the minor page faults of steps 2 and 3 and
// the pages they wrote.
std::pair<long, long> faults_of_repeated_steps() {
  long faults = 0, pages = 0;
  for (int step = 0; step < 3; ++step) {
    const long before = minor_faults();
    for (std::size_t mib = 4; mib <= 28; mib += 4) {
      const std::size_t bytes = mib << 20;
      auto* block = static_cast<volatile char*>(std::malloc(bytes));
      if (block == nullptr) std::_Exit(3);
      for (std::size_t at = 0; at < bytes; at += kPageBytes) block[at] = static_cast<char>(at);
      std::free(const_cast<char*>(block));
      if (step > 0) pages += static_cast<long>(bytes / kPageBytes);
    }
    if (step > 0) faults += minor_faults() - before;
  }
  return {faults, pages};
}

// Applies ZEROTRAIN_MALLOC=malloc_setting in a forked child and runs the steps there; the
// child writes its measurement to a pipe, read back into `line`. Returns the child's exit
// code: with expect_reuse, 2 when the thresholds were not set and 1 when more than 5% of the
// pages faulted in again (the blocks were not reused); otherwise 0.
int in_child(const char* malloc_setting, bool expect_reuse, std::string& line) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (malloc_setting) ::setenv(zerotrain::cpu::kMallocEnv, malloc_setting, 1);
    ::unsetenv("GLIBC_TUNABLES");
    const auto policy = apply_malloc_policy();
    const auto [faults, pages] = faults_of_repeated_steps();
    char text[160];
    const int n = std::snprintf(text, sizeof(text), "%s: %ld faults over %ld pages written", malloc_setting,
                                faults, pages);
    if (::write(fds[1], text, static_cast<std::size_t>(n)) != n) std::_Exit(4);
    if (!expect_reuse) std::_Exit(0);
    if (!policy.training_thresholds) std::_Exit(2);
    std::_Exit(faults * 20 > pages ? 1 : 0);
  }
  ::close(fds[1]);
  char buffer[160] = {};
  const auto got = ::read(fds[0], buffer, sizeof(buffer) - 1);
  ::close(fds[0]);
  if (got > 0) line.assign(buffer, static_cast<std::size_t>(got));
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(MallocPolicy, UnderHeapBlocksOfAStepsSizesAreReusedWithoutPageFaults) {
  if (!is_glibc()) GTEST_SKIP() << "not glibc: the policy sets nothing";
  std::string line;
  EXPECT_EQ(in_child("heap", /*expect_reuse=*/true, line), 0) << line;
  // glibc's adaptive thresholds on the same steps, for the log: how many faults the policy saves.
  std::string adaptive;
  in_child("default", /*expect_reuse=*/false, adaptive);
  std::printf("with the policy, %s\nwithout it,     %s\n", line.c_str(), adaptive.c_str());
}

}  // namespace
