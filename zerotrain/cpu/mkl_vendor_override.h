// The answer LibTorch's MKL gets when it asks "is this an Intel CPU?", which decides
// whether it dispatches its kernels on the instruction set at all (mkl_vendor_override.cpp).
// No LibTorch and no zerotrain code here: the same source is built into a small shared
// library that Python processes can load with LD_PRELOAD.
#pragma once

extern "C" {

// What MKL was told, for reports: -1 = MKL has not asked this process's override (MKL not
// used yet, or the override is not the definition MKL binds to, as in a Python process
// without the preload), 0 = told "not Intel" (MKL's own choice stood), 1 = told "Intel".
int zerotrain_mkl_vendor_answer(void);
// Whether the override would tell MKL "Intel" on this CPU under this environment (reads
// ZEROTRAIN_MATMUL each call; does not need MKL to have asked).
int zerotrain_mkl_vendor_would_override(void);

}
