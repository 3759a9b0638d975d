// What this process finds of GPUs at run time, for `zerotrain report`: the CUDA runtime and
// driver actually loaded, the devices, and a probe that runs the GPU code paths here (a
// matrix product and a few engine steps on each stage, checked against the CPU). Nothing is
// taken from how the binary was built; a machine without a GPU says so.
#pragma once

#include <string>
#include <vector>

#include "zerotrain/cuda/availability.h"

namespace zerotrain::tools {

struct GpuDevice {
  int index = 0;
  std::string name;              // "NVIDIA H100 80GB HBM3"
  int64_t memory_bytes = 0;
  std::string capability;        // "9.0"
};

struct GpuInfo {
  cuda::GpuSighting shown;       // the NVIDIA GPU this machine shows without CUDA (device nodes, nvidia-smi)
  bool cuda_built = false;       // built with LibTorch's CUDA half (loaded where a driver is)
  bool cuda_half_loaded = false; // libtorch_cuda is in this process now (zerotrain/cuda/autoload.cpp)
  std::string cuda_half;         // what autoload did: "loaded", "failed to load: <dlerror>", "not attempted: ..."
  std::string runtime_version;   // the CUDA runtime loaded: "13.2"; empty when none
  std::string driver_version;    // the driver's CUDA version: "13.0"; empty when no driver
  std::string nccl_version;      // the NCCL loaded: "2.28.9"; empty when not built
  std::vector<GpuDevice> devices;
  std::string none_reason;       // why no device is visible (the runtime's own words)
};
GpuInfo gpu_info();

// Runs the GPU paths on device 0 and compares with the CPU. `tested` is false with the
// reason when LibTorch sees no CUDA device; otherwise `passed` and one line per check. Where
// LibTorch sees none but the machine shows a GPU (`info.shown`), `unusable` says why and
// what to do (cuda::unusable_gpu_message): a failure, not a machine without a GPU.
struct GpuProbe {
  bool tested = false;
  bool passed = false;
  std::string unusable;            // "" unless the machine shows a GPU that LibTorch cannot use
  std::vector<std::string> lines;
  bool failed() const { return (tested && !passed) || !unusable.empty(); }
};
GpuProbe gpu_probe(const GpuInfo& info);

}  // namespace zerotrain::tools
