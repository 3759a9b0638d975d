// Which kernels LibTorch's matrix products (nn::Linear forward and backward, attention's
// bmm) run on this CPU, and the switch that picks them. docs/benchmarks.md, "Matrix
// kernels on this CPU", has the measurements behind the choice.
#pragma once

#include <string>

namespace zerotrain::cpu {

// ZEROTRAIN_MATMUL: unset or "auto" lets MKL take its AVX2 kernels on a non-Intel x86 CPU
// with AVX2+FMA (mkl_vendor_override.cpp); "default" leaves MKL's own choice.
inline constexpr const char* kMatmulEnv = "ZEROTRAIN_MATMUL";

struct MatmulKernels {
  bool mkl_avx2_override = false;   // MKL is (or will be) told to dispatch on the ISA here
  std::string setting;              // "auto" or "default", as read from ZEROTRAIN_MATMUL
  std::string reason;               // one line for logs
};

// Reads ZEROTRAIN_MATMUL and says what MKL runs; throws UsageError for an unknown value.
// Called once at process start (the engine's initialize()); calling it also links the
// override into every program that uses the engine.
MatmulKernels select_matmul_kernels();

}  // namespace zerotrain::cpu
