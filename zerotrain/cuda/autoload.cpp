// Loads LibTorch's CUDA half (libtorch_cuda, and through it libc10_cuda, cuBLAS, cuDNN...)
// before main() when this machine has an NVIDIA driver or GPU device node, and not otherwise.
//
// Why not link it: loading libtorch_cuda costs every process about 240 MiB of resident
// memory and 0.15 s (measured: a `zerotrain train` rank's baseline RSS went from 126 to
// 365 MiB), which CPU jobs would pay for nothing. Why before main: LibTorch decides once,
// on the first CUDA question anyone asks (at::detail::getCUDAHooks), whether CUDA exists in
// the process; loaded later, the CUDA half would be ignored. Shared libraries run their
// initialisers before the executable's, so this runs after LibTorch's own and before any
// code of ours.
//
// This file is an INTERFACE source of zerotrain::torch: every executable that links
// LibTorch through zerotrain compiles its own copy (static libraries get one too, which is
// never linked in, as nothing names it). docs/gpu.md.
//
// ZEROTRAIN_CUDA_LOAD=0 never loads it, =1 always does (a CPU machine can then check that
// the CUDA half loads and registers); unset, it loads when the driver is there.
//
// What it did is recorded (zerotrain/cuda/availability.h), so that a program that finds no
// CUDA device on a machine that shows a GPU can say why: the GPU tests fail with it, and
// `zerotrain report` prints it. The GPU device nodes count as a driver here for the same
// reason: wherever those say "GPU", the load is attempted and its error is known.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "zerotrain/cuda/availability.h"
#include "zerotrain/cuda_paths.h"   // ZEROTRAIN_TORCH_CUDA_LIB

namespace {

using zerotrain::cuda::CudaLoadOutcome;

bool exists(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0;
}

bool driver_present() {
  return exists("/proc/driver/nvidia/version") || exists("/dev/nvidiactl") ||
         !zerotrain::cuda::nvidia_device_nodes("/dev").empty();
}

__attribute__((constructor)) void zerotrain_load_torch_cuda() {
  using zerotrain::cuda::record_cuda_load;
  const char* want = std::getenv("ZEROTRAIN_CUDA_LOAD");
  if (want && std::strcmp(want, "0") == 0) {
    record_cuda_load(CudaLoadOutcome::kDisabled, ZEROTRAIN_TORCH_CUDA_LIB, "ZEROTRAIN_CUDA_LOAD=0");
    return;
  }
  const bool forced = want && std::strcmp(want, "1") == 0;
  if (!forced && !driver_present()) {
    record_cuda_load(CudaLoadOutcome::kNoDriver, ZEROTRAIN_TORCH_CUDA_LIB,
                     "no /proc/driver/nvidia/version, /dev/nvidiactl or /dev/nvidia[0-9]*");
    return;
  }
  if (::dlopen(ZEROTRAIN_TORCH_CUDA_LIB, RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* error = ::dlerror();
    record_cuda_load(CudaLoadOutcome::kFailed, ZEROTRAIN_TORCH_CUDA_LIB, error);
    // Not fatal: CPU training still works; a CUDA request then says no GPU is usable, and
    // the GPU tests and `zerotrain report` repeat this error.
    std::fprintf(stderr, "zerotrain: warning: this machine has an NVIDIA driver but LibTorch's CUDA half did not "
                         "load, so no GPU can be used (%s)\n", error);
    return;
  }
  record_cuda_load(CudaLoadOutcome::kLoaded, ZEROTRAIN_TORCH_CUDA_LIB, nullptr);
}

}  // namespace
