// What this process finds of GPUs at run time, for `zerotrain report`: the CUDA runtime and
// driver actually loaded, the devices, and a probe that runs the GPU code paths here (a
// matrix product and a few engine steps on each stage, checked against the CPU). Nothing is
// taken from how the binary was built; a machine without a GPU says so.
#pragma once

#include <string>
#include <vector>

namespace zerotrain::tools {

struct GpuDevice {
  int index = 0;
  std::string name;              // "NVIDIA H100 80GB HBM3"
  int64_t memory_bytes = 0;
  std::string capability;        // "9.0"
};

struct GpuInfo {
  bool cuda_built = false;       // built with LibTorch's CUDA half (loaded where a driver is)
  bool cuda_half_loaded = false; // libtorch_cuda is in this process now (zerotrain/cuda/autoload.cpp)
  std::string runtime_version;   // the CUDA runtime loaded: "13.2"; empty when none
  std::string driver_version;    // the driver's CUDA version: "13.0"; empty when no driver
  std::string nccl_version;      // the NCCL loaded: "2.28.9"; empty when not built
  std::vector<GpuDevice> devices;
  std::string none_reason;       // why no device is visible (the runtime's own words)
};
GpuInfo gpu_info();

// Runs the GPU paths on device 0 and compares with the CPU. `tested` is false with the
// reason when there is no GPU; otherwise `passed` and one line per check.
struct GpuProbe {
  bool tested = false;
  bool passed = false;
  std::vector<std::string> lines;
};
GpuProbe gpu_probe();

}  // namespace zerotrain::tools
