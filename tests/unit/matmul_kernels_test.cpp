// The matrix kernels zerotrain picks (zerotrain/cpu/matmul_kernels.h) compute what MKL's
// default kernels compute, to fp32 rounding, and ZEROTRAIN_MATMUL=default turns the choice
// off. MKL settles its code path once per process, so the default side runs in a child
// process: this binary again, filtered to the DISABLED_Child test, with ZEROTRAIN_MATMUL=default.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/cpu/matmul_kernels.h"
#include "zerotrain/cpu/mkl_vendor_override.h"

namespace {

constexpr const char* kChildOut = "ZT_MATMUL_TEST_OUT";

// The products checked, each from fixed seeds: square, odd sizes, a single row, transposed
// operands (as nn::Linear's forward and weight gradient use them), addmm with a bias, bmm,
// and bf16.
std::vector<at::Tensor> products() {
  at::manual_seed(7);
  std::vector<at::Tensor> out;
  auto mm = [&](int64_t m, int64_t k, int64_t n) {
    out.push_back(at::mm(at::randn({m, k}), at::randn({k, n})));
  };
  mm(1024, 1024, 1024);
  mm(257, 129, 511);
  mm(1, 1000, 3);
  mm(33, 7, 65);
  const auto x = at::randn({300, 256}), w = at::randn({769, 256}), b = at::randn({769}), gy = at::randn({300, 769});
  out.push_back(at::linear(x, w, b));   // addmm, weight transposed
  out.push_back(at::mm(gy.t(), x));     // the weight gradient: a transposed left operand
  out.push_back(at::mm(gy, w));
  out.push_back(at::bmm(at::randn({4, 33, 65}), at::randn({4, 17, 65}).transpose(1, 2)));
  out.push_back(at::mm(at::randn({129, 255}).to(at::kBFloat16), at::randn({255, 67}).to(at::kBFloat16)));
  return out;
}

// Relative error in the Frobenius norm.
double relative_error(const at::Tensor& got, const at::Tensor& want) {
  const auto g = got.to(at::kDouble), w = want.to(at::kDouble);
  return (g - w).norm().item<double>() / w.norm().item<double>();
}

// The bound for two results of one product: fp32 rounding (K <= 1024), or bf16's (8 bits
// of mantissa: one rounding of each result, 2^-8 each).
double bound_for(const at::Tensor& t) { return t.scalar_type() == at::kBFloat16 ? 2.0 * 0.0039 : 1e-5; }

void write_tensors(const std::string& path, const std::vector<at::Tensor>& ts) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& t : ts) {
    const auto c = t.to(at::kFloat).contiguous();
    out.write(reinterpret_cast<const char*>(c.data_ptr<float>()), static_cast<std::streamsize>(c.numel() * 4));
  }
}

std::vector<at::Tensor> read_like(const std::string& path, const std::vector<at::Tensor>& like) {
  std::ifstream in(path, std::ios::binary);
  std::vector<at::Tensor> ts;
  for (const auto& l : like) {
    auto t = at::empty(l.sizes(), at::kFloat);
    in.read(reinterpret_cast<char*>(t.data_ptr<float>()), static_cast<std::streamsize>(t.numel() * 4));
    ts.push_back(t);
  }
  EXPECT_TRUE(in.good()) << "short read of " << path;
  return ts;
}

// Runs this test binary's DISABLED_Child test with ZEROTRAIN_MATMUL=default; its products, and what
// MKL was told in it.
std::vector<at::Tensor> default_products(const std::vector<at::Tensor>& like, int* vendor_answer) {
  const std::string path = ::testing::TempDir() + "matmul_default_" + std::to_string(::getpid()) + ".bin";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("ZEROTRAIN_MATMUL", "default", 1);
    ::setenv(kChildOut, path.c_str(), 1);
    ::execl("/proc/self/exe", "matmul_kernels_test", "--gtest_filter=MatmulKernels.DISABLED_Child",
            "--gtest_also_run_disabled_tests", static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed";
  auto ts = read_like(path, like);
  std::ifstream answer(path + ".answer");
  answer >> *vendor_answer;
  std::remove(path.c_str());
  std::remove((path + ".answer").c_str());
  return ts;
}

// The child half, run only by default_products (disabled, so no run lists it as skipped).
TEST(MatmulKernels, DISABLED_Child) {
  const char* out = std::getenv(kChildOut);
  ASSERT_NE(out, nullptr) << "run by MatchesMklDefault, which sets " << kChildOut;
  at::set_num_threads(1);
  zerotrain::cpu::select_matmul_kernels();
  write_tensors(out, products());
  std::ofstream(std::string(out) + ".answer") << zerotrain_mkl_vendor_answer();
}

TEST(MatmulKernels, MatchesMklDefault) {
  ::unsetenv("ZEROTRAIN_MATMUL");
  at::set_num_threads(1);
  const auto chosen = zerotrain::cpu::select_matmul_kernels();
  const auto ours = products();
  // Where the override applies, MKL asked it and was told "Intel".
  if (chosen.mkl_avx2_override) {
    EXPECT_EQ(zerotrain_mkl_vendor_answer(), 1);
  }
  int default_answer = -1;
  const auto theirs = default_products(ours, &default_answer);
  ASSERT_EQ(theirs.size(), ours.size());
  double worst_fp32 = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const double err = relative_error(ours[i], theirs[i]);
    if (ours[i].scalar_type() == at::kFloat) worst_fp32 = std::max(worst_fp32, err);
    EXPECT_LE(err, bound_for(ours[i])) << "product " << i << " " << ours[i].sizes() << " "
                                       << ours[i].scalar_type();
  }
  char worst[32];
  std::snprintf(worst, sizeof(worst), "%.3g", worst_fp32);
  RecordProperty("worst_fp32_relative_error", worst);   // in --gtest_output=xml
  // The switch: with ZEROTRAIN_MATMUL=default MKL keeps its own answer ("not Intel" on AMD).
  if (chosen.mkl_avx2_override) {
    EXPECT_EQ(default_answer, 0);
  }
}

// Each result against an fp64 product of the same operands (so neither side can be wrong
// the same way).
TEST(MatmulKernels, Fp32NearFp64) {
  at::set_num_threads(1);
  at::manual_seed(3);
  for (auto [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1024, 1024, 1024}, {257, 129, 511},
                                                                           {5, 1023, 9}}) {
    const auto a = at::randn({k, m}).t(), b = at::randn({n, k}).t();   // both transposed
    const double err = relative_error(at::mm(a, b), at::mm(a.to(at::kDouble), b.to(at::kDouble)));
    EXPECT_LE(err, 1e-5) << m << "x" << k << "x" << n;
  }
}

TEST(MatmulKernels, RejectsUnknownSetting) {
  ::setenv("ZEROTRAIN_MATMUL", "fastest", 1);
  EXPECT_THROW(zerotrain::cpu::select_matmul_kernels(), zerotrain::UsageError);
  ::setenv("ZEROTRAIN_MATMUL", "default", 1);
  EXPECT_FALSE(zerotrain::cpu::select_matmul_kernels().mkl_avx2_override);
  ::unsetenv("ZEROTRAIN_MATMUL");
}

}  // namespace
