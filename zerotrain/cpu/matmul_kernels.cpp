#include "zerotrain/cpu/matmul_kernels.h"

#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/cpu/mkl_vendor_override.h"

namespace zerotrain::cpu {

MatmulKernels select_matmul_kernels() {
  MatmulKernels k;
  k.setting = env::get(kMatmulEnv).value_or("auto");
  if (k.setting.empty()) k.setting = "auto";
  ZT_CHECK(k.setting == "auto" || k.setting == "default", UsageError, kMatmulEnv, "=", k.setting,
           ": expected auto (MKL's AVX2 kernels where MKL would not pick them) or default (MKL's own choice)");
  k.mkl_avx2_override = zerotrain_mkl_vendor_would_override() != 0;
  if (k.mkl_avx2_override) {
    k.reason = "MKL's AVX2 kernels (its vendor check answered; ZEROTRAIN_MATMUL=default turns this off)";
  } else if (k.setting == "default") {
    k.reason = "MKL's own choice (ZEROTRAIN_MATMUL=default)";
  } else {
    k.reason = "MKL's own choice (an Intel CPU, or no AVX2+FMA: nothing to override)";
  }
  return k;
}

}  // namespace zerotrain::cpu
