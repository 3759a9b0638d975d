// The SIMD Adam on every target this binary has and this CPU runs, bit for bit against the
// scalar reference, at lengths that leave every kind of tail and at unaligned offsets.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "zerotrain/optim/adam_kernel.h"

namespace zo = zerotrain::optim;

namespace {

struct Arrays {
  std::vector<float> p, g, m, v;
};

Arrays random_arrays(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Arrays a;
  for (int64_t i = 0; i < n; ++i) {
    a.p.push_back(normal(rng));
    a.g.push_back(normal(rng) * 0.1f);
    a.m.push_back(normal(rng) * 0.01f);
    a.v.push_back(std::abs(normal(rng)) * 0.001f);
  }
  return a;
}

class AdamKernel : public ::testing::TestWithParam<int64_t> {};

TEST_P(AdamKernel, EveryTargetMatchesTheScalarReferenceExactly) {
  const int64_t target = GetParam();
  zo::adam_force_target(target);
  SCOPED_TRACE("target " + zo::adam_target_name(target));
  for (bool adamw : {true, false}) {
    for (float wd : {0.0f, 0.01f}) {
      for (bool bias_correction : {true, false}) {
        for (int64_t step : {1, 7}) {
          const auto c = zo::adam_coefficients(1e-3, 0.9, 0.999, 1e-8, wd, adamw, bias_correction, step);
          for (int64_t n : {0, 1, 3, 7, 15, 16, 17, 31, 33, 64, 100, 1023, 4099}) {
            for (int64_t offset : {0, 1, 3}) {
              Arrays a = random_arrays(n + offset, static_cast<uint32_t>(n * 31 + offset));
              Arrays r = a;
              zo::adam_update(c, a.p.data() + offset, a.g.data() + offset, a.m.data() + offset, a.v.data() + offset, n);
              zo::adam_update_reference(c, r.p.data() + offset, r.g.data() + offset, r.m.data() + offset,
                                        r.v.data() + offset, n);
              SCOPED_TRACE("n " + std::to_string(n) + " offset " + std::to_string(offset) + " adamw " +
                           std::to_string(adamw) + " wd " + std::to_string(wd));
              ASSERT_EQ(0, std::memcmp(a.p.data(), r.p.data(), a.p.size() * sizeof(float)));
              ASSERT_EQ(0, std::memcmp(a.m.data(), r.m.data(), a.m.size() * sizeof(float)));
              ASSERT_EQ(0, std::memcmp(a.v.data(), r.v.data(), a.v.size() * sizeof(float)));
            }
          }
        }
      }
    }
  }
  zo::adam_force_target(0);
}

INSTANTIATE_TEST_SUITE_P(Targets, AdamKernel, ::testing::ValuesIn(zo::adam_available_targets()),
                         [](const auto& info) { return zo::adam_target_name(info.param); });

TEST(AdamKernelMath, OneElementByHand) {
  // DeepSpeed's formula at step 1, AdamW, no decay: m = 0.1 g, v = 0.001 g^2,
  // p -= lr * (m / 0.1) / (sqrt(v) / sqrt(0.001) + eps) = lr * g / (|g| + eps).
  float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
  const auto c = zo::adam_coefficients(0.01, 0.9, 0.999, 1e-8, 0.0, true, true, 1);
  zo::adam_update_reference(c, &p, &g, &m, &v, 1);
  EXPECT_NEAR(p, 1.0f - 0.01f, 1e-6f);
  EXPECT_FLOAT_EQ(m, 0.05f);
  EXPECT_NEAR(v, 0.00025f, 1e-8f);   // (1 - 0.999f) is not exactly 0.001 in float
}

TEST(AdamKernelMath, DispatchesToTheBestTargetThisCpuRuns) {
  // Read before adam_available_targets, which clears any forced target: a target forced by
  // another test and never restored shows here as a weaker one than the list's head.
  const std::string dispatched = zo::adam_target();
  const auto targets = zo::adam_available_targets();
  ASSERT_FALSE(targets.empty());
  // Highway lists targets best first.
  EXPECT_EQ(dispatched, zo::adam_target_name(targets.front()));
#if defined(__x86_64__) || defined(__i386__)
  // Every feature Highway's AVX2 target asks of the CPU (its SSE4 ones come with them).
  // Highway compiles that target by default, so on such a CPU a dispatch to SSE or to the
  // portable fallback means the build lost its SIMD code paths.
  bool avx2_target_runs = true;
  for (const bool has : {__builtin_cpu_supports("avx2"), __builtin_cpu_supports("fma"), __builtin_cpu_supports("bmi"),
                         __builtin_cpu_supports("bmi2"), __builtin_cpu_supports("f16c"),
                         __builtin_cpu_supports("lzcnt"), __builtin_cpu_supports("aes"),
                         __builtin_cpu_supports("pclmul")}) {
    avx2_target_runs = avx2_target_runs && has;
  }
  if (avx2_target_runs) {
    for (const char* weaker : {"SCALAR", "EMU128", "SSE2", "SSSE3", "SSE4"}) EXPECT_NE(dispatched, weaker);
  }
#endif
}

}  // namespace
