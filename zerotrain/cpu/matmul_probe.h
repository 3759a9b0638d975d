// A quick measurement of one fp32 matrix product on one thread, for `zerotrain report`
// and the matmul_kernels bench: which kernel family ran and its speed against the core's
// peak.
#pragma once

#include <cstdint>
#include <string>

namespace zerotrain::cpu {

struct MatmulProbe {
  std::string kernels;        // e.g. "MKL 2024.0 Update 2, AVX2 kernels (vendor check answered)"
  double gflops = 0;          // measured, the median of the timed products
  double peak_gflops = 0;     // flop/cycle of the widest FMA this CPU has x the clock below
  double clock_mhz = 0;       // /proc/cpuinfo "cpu MHz" (the nominal clock; boost can exceed it)
  int flops_per_cycle = 0;    // 32 for AVX2+FMA (2 FMA units x 8 fp32 lanes x 2), 64 for AVX-512
};

// Multiplies two n x n fp32 matrices for about `seconds` on one intra-op thread (the
// thread count is restored after).
MatmulProbe probe_matmul(int64_t n = 1024, double seconds = 0.2);

// MKL's version string as linked into LibTorch ("" when LibTorch has no MKL).
std::string mkl_version();

// One line: kernel family and GFLOP/s against the peak.
std::string describe(const MatmulProbe& p);

}  // namespace zerotrain::cpu
