// Why a process has no CUDA device when the machine has an NVIDIA GPU.
//
// LibTorch says only "no CUDA": the same on a CPU machine (nothing to do) and on a GPU machine
// where its CUDA half did not load (something to fix). These tell the two apart without
// LibTorch or CUDA (this header and its source compile on any machine): whether the machine
// shows an NVIDIA GPU, and what zerotrain/cuda/autoload.cpp did before main(). The GPU tests
// skip on the first kind and fail on the second, and `zerotrain report` says which it is
// (docs/gpu.md).
#pragma once

#include <string>
#include <vector>

namespace zerotrain::cuda {

// The driver's GPU device nodes in `dev_dir`: nvidia0, nvidia1, ... (not nvidiactl,
// nvidia-uvm, nvidia-modeset or nvidia-caps, which a driver has without any GPU), sorted.
std::vector<std::string> nvidia_device_nodes(const std::string& dev_dir);

struct SightingOptions {
  std::string dev_dir = "/dev";            // where the device nodes are looked for
  std::string nvidia_smi = "nvidia-smi";   // asked (`-L`) only when there is no node; "" skips it
  int nvidia_smi_timeout_ms = 10000;       // a wedged driver can hang it
};

// Whether this machine shows an NVIDIA GPU, and the evidence: "/dev/nvidia0" (the nodes
// found) or "nvidia-smi -L: GPU 0: NVIDIA H100 ...". The nodes are enough; nvidia-smi is the
// fallback for a machine whose nodes are elsewhere.
struct GpuSighting {
  bool shown = false;
  std::string evidence;   // "" when not shown
};
GpuSighting sight_nvidia_gpu(const SightingOptions& options = {});

// What zerotrain/cuda/autoload.cpp did with LibTorch's CUDA half (libtorch_cuda) before main().
enum class CudaLoadOutcome {
  kNoLoader,   // this program has no loader: built without LibTorch's CUDA half
  kDisabled,   // ZEROTRAIN_CUDA_LOAD=0
  kNoDriver,   // not attempted: no NVIDIA driver or GPU node at start-up
  kLoaded,     // loaded (or was already, where the program links it)
  kFailed,     // dlopen failed; `error` has its words
};
struct CudaLoad {
  CudaLoadOutcome outcome = CudaLoadOutcome::kNoLoader;
  std::string library;   // the libtorch_cuda.so it loads; "" with kNoLoader
  std::string error;     // dlerror()'s text (kFailed), or what was looked for (kNoDriver)
};

// Called by autoload.cpp only (before main); cuda_load() returns what it recorded.
void record_cuda_load(CudaLoadOutcome outcome, const char* library, const char* error);
CudaLoad cuda_load();

// One line for the report: "loaded", "failed to load: <error>", "not attempted: <why>".
std::string describe(const CudaLoad& load);

// What the CUDA runtime in this process says of its devices: its error string when counting
// them fails ("CUDA driver version is insufficient for CUDA runtime version"), "no devices"
// when it counts none, "" when it sees some or the process has no CUDA runtime (a CPU build).
std::string cuda_runtime_reason();

// The message for a machine that shows a GPU (`sighting.shown`) where LibTorch sees no CUDA
// device: the evidence, why (the load outcome and its error, or `runtime_reason` when the
// CUDA half did load), and the fix.
std::string unusable_gpu_message(const GpuSighting& sighting, const CudaLoad& load, const std::string& runtime_reason);

}  // namespace zerotrain::cuda
