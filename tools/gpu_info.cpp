#include "tools/gpu_info.h"

#ifdef ZEROTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "zerotrain/cuda_paths.h"
#endif

#include "zerotrain/comm/report.h"
#include "zerotrain/core/error.h"

namespace zerotrain::tools {
namespace {

// CUDA's versions are 1000 * major + 10 * minor.
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

}  // namespace

GpuInfo gpu_info() {
  GpuInfo info;
  info.shown = cuda::sight_nvidia_gpu();
  info.cuda_half = cuda::describe(cuda::cuda_load());
  info.nccl_version = comm::nccl_version();
#ifdef ZEROTRAIN_HAVE_CUDA
  info.cuda_built = true;
  info.cuda_half_loaded = ::dlopen(ZEROTRAIN_TORCH_CUDA_LIB, RTLD_LAZY | RTLD_NOLOAD) != nullptr;
  int runtime = 0, driver = 0, count = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) info.runtime_version = cuda_version(runtime);
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) info.driver_version = cuda_version(driver);
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess) {
    info.none_reason = cudaGetErrorString(counted);
    cudaGetLastError();   // clear it: the probe and the engine ask again
    return info;
  }
  if (count == 0) info.none_reason = "the CUDA runtime sees 0 devices (CUDA_VISIBLE_DEVICES?)";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    info.devices.push_back({i, p.name, static_cast<int64_t>(p.totalGlobalMem), detail::str(p.major, ".", p.minor)});
  }
#else
  info.none_reason = "this build has no CUDA (the torch it was built on is a CPU build, or -DZEROTRAIN_CUDA=OFF)";
#endif
  return info;
}

}  // namespace zerotrain::tools
