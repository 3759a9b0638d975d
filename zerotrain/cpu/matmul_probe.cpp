#include "zerotrain/cpu/matmul_probe.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "zerotrain/cpu/mkl_vendor_override.h"

// MKL's own (exported by libtorch_cpu.so when it has MKL); weak, so that a LibTorch
// without MKL still links.
extern "C" void MKL_Get_Version_String(char* buffer, int length) __attribute__((weak));

namespace zerotrain::cpu {
namespace {

double cpuinfo_mhz() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    try {
      return std::stod(line.substr(line.find(':') + 1));
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

int fp32_flops_per_cycle() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // Two FMA pipes x lanes x 2 flops; AVX-512 counted as 2 x 16 lanes (some cores have one
  // 512-bit pipe: then this is the upper bound).
  if (__builtin_cpu_supports("avx512f")) return 64;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 32;
  if (__builtin_cpu_supports("avx")) return 16;
  return 8;
#else
  return 0;
#endif
}

}  // namespace

std::string mkl_version() {
  if (!MKL_Get_Version_String) return "";
  char buffer[256] = {};
  MKL_Get_Version_String(buffer, sizeof(buffer));
  // "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build ..." -> "2024.2"
  std::string text(buffer);
  const auto at = text.find("Version ");
  if (at == std::string::npos) return text;
  std::string version = text.substr(at + 8);
  return version.substr(0, version.find_first_of("- "));
}

MatmulProbe probe_matmul(int64_t n, double seconds) {
  MatmulProbe p;
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto a = at::randn({n, n});
  const auto b = at::randn({n, n});
  auto c = at::mm(a, b);   // the first product: MKL initialises and asks its vendor question
  const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::vector<double> rates;
  const auto start = std::chrono::steady_clock::now();
  while (rates.size() < 3 ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    rates.push_back(flop / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9);
    if (rates.size() >= 50) break;
  }
  at::set_num_threads(threads);
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  p.gflops = rates[rates.size() / 2];
  p.clock_mhz = cpuinfo_mhz();
  p.flops_per_cycle = fp32_flops_per_cycle();
  p.peak_gflops = p.flops_per_cycle * p.clock_mhz / 1000.0;

  const std::string version = mkl_version();
  if (version.empty()) {
    p.kernels = "not MKL (LibTorch without MKL)";
  } else {
    switch (zerotrain_mkl_vendor_answer()) {
      case 1:
        p.kernels = "MKL " + version +
                    (zerotrain_mkl_vendor_would_override() ? ", AVX2 kernels (vendor check answered)"
                                                           : ", its own ISA dispatch (Intel CPU)");
        break;
      case 0:
        p.kernels = "MKL " + version + ", generic \"def\" kernels (MKL's choice on a non-Intel CPU)";
        break;
      default:
        p.kernels = "MKL " + version + ", MKL's own dispatch (the vendor override is not linked here)";
        break;
    }
  }
  return p;
}

std::string describe(const MatmulProbe& p) {
  char line[160];
  if (p.peak_gflops > 0) {
    std::snprintf(line, sizeof(line), "%.1f GFLOP/s on 1 thread, %.0f%% of %.1f (%d flop/cycle x %.0f MHz)",
                  p.gflops, 100.0 * p.gflops / p.peak_gflops, p.peak_gflops, p.flops_per_cycle, p.clock_mhz);
  } else {
    std::snprintf(line, sizeof(line), "%.1f GFLOP/s on 1 thread", p.gflops);
  }
  return p.kernels + "; " + line;
}

}  // namespace zerotrain::cpu
